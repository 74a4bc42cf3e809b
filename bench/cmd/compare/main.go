// Command compare runs agency-go's benchmarks against their counterparts in
// interleaved rounds and prints, for each comparison, the ratio of
// agency-go's figure to the counterpart's: the median over the rounds and
// the range.
//
// From the repository root:
//
//	go -C bench run ./cmd/compare                 # every row, 4 rounds
//	go -C bench run ./cmd/compare -rows local     # space.Local against hollywood and protoactor-go
//	go -C bench run ./cmd/compare -rows amqp -rounds 8
//	go -C bench run ./cmd/compare -list           # the rows and their benchmarks
//
// It compiles each benchmark package's test binary once, then, in each
// round, runs every row's benchmarks in order and back again (A, B, B, A;
// with two peers A, B, C, C, B, A), each in a process of its own, so that
// drift in the machine's speed falls on both sides alike and no benchmark
// inherits another's heap. A side's figure in a round is the mean of its
// two runs; the ratio of the round is agency-go's figure over the peer's.
//
// The amqp rows need RabbitMQ (AMQP_URL, or guest/guest on localhost).
// -out keeps every benchmark line, in the format benchstat reads.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// side is one benchmark: the package whose test binary runs it, and its
// name as -test.bench selects it.
type side struct {
	label string // how the table names it
	pkg   string // "local", "hollywood", "protoactor" (bench/…) or "amqpspace"
	bench string // e.g. "BenchmarkBroadcast10k/first"
}

// metric is one figure a benchmark reports, by its unit.
type metric struct {
	unit   string // "msgs/s", "µs-median", "ns/op", …
	higher bool   // a higher figure is better
}

// row is one comparison: agency-go's side against one or more peers.
type row struct {
	id, group, what string
	ours            side
	peers           []side
	metrics         []metric
	benchtime       string
}

var (
	msgsPerSec = metric{"msgs/s", true}
	reqPerSec  = metric{"req/s", true}
	// cpuPerOp is the client process's CPU time (user and system) a
	// message or request, which the amqp benchmarks report: the broker,
	// on the same machine, takes the rest, so it says what the
	// throughput ratio is made of, with less of the machine's drift in it.
	cpuPerOp  = metric{"cpu-µs/op", false}
	median    = metric{"µs-median", false}
	nsPerOp   = metric{"ns/op", false}
	perAgent  = metric{"bytes/agent", false}
	gibRSS    = metric{"GiB-RSS", false}
	toAdd     = metric{"s-to-add", false}
	firstPart = metric{"µs-first", false}
	perPart   = metric{"µs-part", false}
)

// peers returns the hollywood and protoactor sides of a benchmark of the
// bench packages.
func peers(bench string) []side {
	return []side{{"hollywood", "hollywood", bench}, {"protoactor", "protoactor", bench}}
}

func local(bench string) side { return side{"agency", "local", bench} }

var rows = []row{
	{
		id: "amqp-oneway-200B", group: "amqp",
		what:    "amqpspace one-way, 200 B, vs a bare amqp091-go client",
		ours:    side{"amqpspace", "amqpspace", "BenchmarkAMQPSendOneWay/200B"},
		peers:   []side{{"bare", "amqpspace", "BenchmarkRawAMQPOneWay/200B"}},
		metrics: []metric{msgsPerSec}, benchtime: "2s",
	},
	{
		id: "amqp-oneway-4KiB", group: "amqp",
		what:    "amqpspace one-way, 4 KiB, vs a bare amqp091-go client",
		ours:    side{"amqpspace", "amqpspace", "BenchmarkAMQPSendOneWay/4KiB"},
		peers:   []side{{"bare", "amqpspace", "BenchmarkRawAMQPOneWay/4KiB"}},
		metrics: []metric{msgsPerSec}, benchtime: "2s",
	},
	{
		id: "amqp-request", group: "amqp",
		what:    "amqpspace request p50, fresh deadline per call, vs bare",
		ours:    side{"amqpspace", "amqpspace", "BenchmarkAMQPRequest"},
		peers:   []side{{"bare", "amqpspace", "BenchmarkRawAMQPRequest"}},
		metrics: []metric{median}, benchtime: "2s",
	},
	{
		id: "amqp-concurrent", group: "amqp",
		what:    "amqpspace, 16 concurrent requesters (16 handlers), vs bare",
		ours:    side{"amqpspace", "amqpspace", "BenchmarkAMQPRequestConcurrent"},
		peers:   []side{{"bare", "amqpspace", "BenchmarkRawAMQPRequestConcurrent"}},
		metrics: []metric{reqPerSec, cpuPerOp}, benchtime: "2s",
	},
	{
		id: "amqp-stream", group: "stream",
		what:    "amqpspace stream p50: to the first part, and between parts, vs bare",
		ours:    side{"amqpspace", "amqpspace", "BenchmarkAMQPStream"},
		peers:   []side{{"bare", "amqpspace", "BenchmarkRawAMQPStream"}},
		metrics: []metric{firstPart, perPart}, benchtime: "300x",
	},
	{
		id: "local-oneway", group: "local",
		what: "space.Local one-way",
		ours: local("BenchmarkOneWay"),
		// hollywood-176 is hollywood sending each tick in a heap object
		// of 176 bytes, about what agency allocates for a message: what
		// the message's bytes cost.
		peers:   append(peers("BenchmarkOneWay"), side{"hollywood-176", "hollywood", "BenchmarkOneWayMessageSized"}),
		metrics: []metric{msgsPerSec}, benchtime: "1s",
	},
	{
		id: "local-request", group: "local",
		what:  "space.Local request p50, fresh deadline per call",
		ours:  local("BenchmarkRequest"),
		peers: peers("BenchmarkRequest"), metrics: []metric{median}, benchtime: "1s",
	},
	{
		id: "local-broadcast-first", group: "local",
		what:  "space.Local broadcast to 10,000 agents, the first",
		ours:  local("BenchmarkBroadcast10k/first"),
		peers: peers("BenchmarkBroadcast10k/first"), metrics: []metric{nsPerOp}, benchtime: "10x",
	},
	{
		id: "local-broadcast-later", group: "local",
		what:  "space.Local broadcast to 10,000 agents, later ones",
		ours:  local("BenchmarkBroadcast10k/later"),
		peers: peers("BenchmarkBroadcast10k/later"), metrics: []metric{nsPerOp}, benchtime: "50x",
	},
	{
		id: "memory-idle", group: "memory",
		what:  "idle agent, heap + stacks (100,000 agents)",
		ours:  local("BenchmarkIdleAgent"),
		peers: peers("BenchmarkIdleAgent"), metrics: []metric{perAgent}, benchtime: "1x",
	},
	{
		id: "memory-million", group: "memory",
		what:  "1,000,000 agents in one process",
		ours:  local("BenchmarkMillionAgents"),
		peers: peers("BenchmarkMillionAgents"), metrics: []metric{gibRSS, toAdd, perAgent}, benchtime: "1x",
	},
}

func main() {
	rowsFlag := flag.String("rows", "all", "comma-separated groups (local, amqp, stream, memory), row ids (see -list), or all")
	rounds := flag.Int("rounds", 4, "interleaved rounds")
	outFile := flag.String("out", "", "file to append every benchmark's output to (benchstat reads it)")
	verbose := flag.Bool("v", false, "print each benchmark's figures as it runs")
	list := flag.Bool("list", false, "list the rows and exit")
	flag.Parse()

	if *list {
		for _, r := range rows {
			fmt.Printf("%-22s %-7s %s\n", r.id, r.group, r.what)
			for _, s := range append([]side{r.ours}, r.peers...) {
				fmt.Printf("%31s %s: %s\n", s.label, s.pkg, s.bench)
			}
		}
		return
	}
	selected, err := selectRows(*rowsFlag)
	if err != nil {
		fatal(err)
	}
	if *rounds < 1 {
		fatal(fmt.Errorf("-rounds %d: at least 1", *rounds))
	}

	dirs, err := packageDirs()
	if err != nil {
		fatal(err)
	}
	tmp, err := os.MkdirTemp("", "agency-compare-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(tmp)
	bins, err := build(selected, dirs, tmp)
	if err != nil {
		fatal(err)
	}

	var out io.Writer = io.Discard
	if *outFile != "" {
		f, err := os.OpenFile(*outFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fatal(err)
		}
		defer f.Close()
		out = f
	}

	start := time.Now()
	fmt.Printf("%s\n\n", machine())
	results := make(map[string][][]figures) // row id → round → side → figures of its runs
	for round := 1; round <= *rounds; round++ {
		for _, r := range selected {
			sides := append([]side{r.ours}, r.peers...)
			order := make([]int, 0, 2*len(sides))
			for i := range sides {
				order = append(order, i)
			}
			for i := len(sides) - 1; i >= 0; i-- {
				order = append(order, i)
			}
			runs := make([]figures, len(sides))
			for _, i := range order {
				s := sides[i]
				logf("round %d/%d  %-22s %-10s", round, *rounds, r.id, s.label)
				f, err := run(bins[s.pkg], dirs[s.pkg], s.bench, r.benchtime, out)
				if err != nil {
					logf("  %v\n", err)
					continue
				}
				if *verbose {
					logf("  %s", f)
				}
				logf("\n")
				runs[i] = runs[i].add(f)
			}
			results[r.id] = append(results[r.id], runs)
		}
	}
	fmt.Printf("%d rounds in %v, load average at the end: %s\n\n", *rounds, time.Since(start).Round(time.Second), loadavg())
	report(os.Stdout, selected, results)
}

// selectRows returns the rows that spec names.
func selectRows(spec string) ([]row, error) {
	if spec == "all" {
		return rows, nil
	}
	want := map[string]bool{}
	for _, w := range strings.Split(spec, ",") {
		want[strings.TrimSpace(w)] = true
	}
	var sel []row
	for _, r := range rows {
		if want[r.group] || want[r.id] {
			sel = append(sel, r)
			delete(want, r.id)
		}
	}
	for _, r := range rows {
		delete(want, r.group)
	}
	if len(want) > 0 {
		var unknown []string
		for w := range want {
			unknown = append(unknown, w)
		}
		return nil, fmt.Errorf("-rows: no group or row %s (see -list)", strings.Join(unknown, ", "))
	}
	return sel, nil
}

// packageDirs returns the source directory of each benchmark package.
func packageDirs() (map[string]string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMOD: %w", err)
	}
	benchDir := filepath.Dir(strings.TrimSpace(string(gomod)))
	if _, err := os.Stat(filepath.Join(benchDir, "local")); err != nil {
		return nil, fmt.Errorf("run compare inside the bench module (go -C bench run ./cmd/compare): %w", err)
	}
	root := filepath.Join(benchDir, "..")
	return map[string]string{
		"local":      filepath.Join(benchDir, "local"),
		"hollywood":  filepath.Join(benchDir, "hollywood"),
		"protoactor": filepath.Join(benchDir, "protoactor"),
		"amqpspace":  filepath.Join(root, "amqpspace"),
	}, nil
}

// build compiles the test binary of each package the rows need.
func build(sel []row, dirs map[string]string, tmp string) (map[string]string, error) {
	bins := map[string]string{}
	for _, r := range sel {
		for _, s := range append([]side{r.ours}, r.peers...) {
			if bins[s.pkg] != "" {
				continue
			}
			bin := filepath.Join(tmp, s.pkg+".test")
			logf("building %s\n", s.pkg)
			cmd := exec.Command("go", "test", "-c", "-o", bin, ".")
			cmd.Dir = dirs[s.pkg]
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("building %s: %w", s.pkg, err)
			}
			bins[s.pkg] = bin
		}
	}
	return bins, nil
}

// figures are a benchmark's reported figures by unit; several runs' add up
// into sums with a count.
type figures struct {
	sum   map[string]float64
	count int
}

func (f figures) add(g figures) figures {
	if f.sum == nil {
		f.sum = map[string]float64{}
	}
	for u, v := range g.sum {
		f.sum[u] += v
	}
	f.count += g.count
	return f
}

// value returns the mean of unit over the runs.
func (f figures) value(unit string) (float64, bool) {
	v, ok := f.sum[unit]
	if !ok || f.count == 0 {
		return 0, false
	}
	return v / float64(f.count), true
}

func (f figures) String() string {
	var parts []string
	for u, v := range f.sum {
		parts = append(parts, fmt.Sprintf("%.4g %s", v, u))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// run runs one benchmark in a process of its own and returns its figures.
func run(bin, dir, bench, benchtime string, out io.Writer) (figures, error) {
	pattern := anchored(bench)
	cmd := exec.Command(bin, "-test.run=^$", "-test.bench="+pattern, "-test.benchtime="+benchtime,
		"-test.benchmem", "-test.count=1", "-test.timeout=30m")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	_, _ = out.Write(stdout.Bytes())
	f, found := parse(stdout.Bytes(), bench)
	switch {
	case err != nil:
		return f, fmt.Errorf("%s: %v\n%s%s", bench, err, tail(stdout.Bytes()), tail(stderr.Bytes()))
	case !found:
		return f, fmt.Errorf("%s: no result (skipped?)\n%s", bench, tail(stdout.Bytes()))
	}
	return f, nil
}

// anchored turns "BenchmarkX/sub" into "^BenchmarkX$/^sub$".
func anchored(bench string) string {
	parts := strings.Split(bench, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// procSuffix is the -GOMAXPROCS suffix of a result line's name.
var procSuffix = regexp.MustCompile(`-\d+$`)

// parse returns the figures of bench's result line in output.
func parse(output []byte, bench string) (figures, bool) {
	sc := bufio.NewScanner(bytes.NewReader(output))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || procSuffix.ReplaceAllString(fields[0], "") != bench {
			continue
		}
		f := figures{sum: map[string]float64{}, count: 1}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			f.sum[fields[i+1]] = v
		}
		return f, true
	}
	return figures{}, false
}

// report prints one table line per row, peer and metric.
func report(w io.Writer, sel []row, results map[string][][]figures) {
	fmt.Fprintln(w, "| row | metric | agency-go | peer | peer's | ratio, median of rounds | range | rounds |")
	fmt.Fprintln(w, "| --- | --- | ---: | --- | ---: | ---: | --- | ---: |")
	for _, r := range sel {
		rounds := results[r.id]
		for p, peer := range r.peers {
			for _, m := range r.metrics {
				var ours, theirs, ratios []float64
				for _, runs := range rounds {
					a, okA := runs[0].value(m.unit)
					b, okB := runs[p+1].value(m.unit)
					if okA {
						ours = append(ours, a)
					}
					if okB {
						theirs = append(theirs, b)
					}
					if okA && okB && b != 0 {
						ratios = append(ratios, a/b)
					}
				}
				better := "lower is better"
				if m.higher {
					better = "higher is better"
				}
				rng := "–"
				if len(ratios) > 0 {
					rng = fmt.Sprintf("%.2f–%.2f", slices.Min(ratios), slices.Max(ratios))
				}
				fmt.Fprintf(w, "| %s | %s (%s) | %s | %s | %s | %s | %s | %d |\n",
					r.what, m.unit, better, num(med(ours)), peer.label, num(med(theirs)),
					ratio(ratios), rng, len(ratios))
			}
		}
	}
	fmt.Fprintln(w, "\nratio = agency-go's figure / the peer's; figures are medians of the rounds")
}

func ratio(rs []float64) string {
	if len(rs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2fx", med(rs))
}

// med returns the median of vs, NaN for none.
func med(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// num prints a figure with three significant digits and thousands
// separators where it is large.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 10_000:
		s := strconv.FormatFloat(v, 'f', 0, 64)
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		return b.String()
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// machine describes where the run happens.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	gover, _ := exec.Command("go", "env", "GOVERSION").Output()
	return fmt.Sprintf("%s, %d CPUs (%s), %s/%s, load average at the start: %s",
		strings.TrimSpace(string(gover)), runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, loadavg())
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// tail returns the last lines of output, for an error message.
func tail(output []byte) string {
	lines := strings.Split(strings.TrimRight(string(output), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format, args...) }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(1)
}
