package amqpspace_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/seed72275b23/agency-go/internal/testenv"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest/clustertest"
)

// The cluster test's child processes are this test binary, run again with
// clusterChildEnv set (see TestClusterChild).
const clusterChildEnv = "AGENCY_CLUSTER_CHILD"

const (
	clusterProcs     = 3 // child processes, process i connecting first to node i
	clusterAgents    = 2 // agents in each
	clusterReqWait   = 20 * time.Second
	clusterLoadEvery = 100 * time.Millisecond
	// failoverBound is what the test asserts of the time an agent takes to
	// serve again after its node died: the contract's few seconds, with
	// room for a machine shared by many (the figure measured is reported).
	failoverBound = 60 * time.Second
)

// Losing a node of a three-node RabbitMQ cluster loses nothing: with agents
// in three processes, one connected to each node, exchanging requests and
// one-way messages, a node is killed (SIGKILL), comes back, and then
// another is. Every request is answered or fails at once (ErrDisconnected,
// ErrUnconfirmed, or ErrRejected and ErrNoRecipient while a queue changes
// nodes), none is answered twice, and none waits out its deadline, but
// without Durable one sent to an agent whose transient queue went with the
// node (the agent's process says so when it declares it again). Every
// agent serves again through a surviving node (the time is reported);
// with Durable no confirmed one-way message is lost.
//
// It starts its own cluster (clustertest) and is one of the long tests:
// AGENCY_LONG_TESTS=1.
func TestClusterNodeLoss(t *testing.T) {
	testenv.Long(t)
	c := clustertest.Start(t, 3)
	modes := []bool{true, false}
	if m := os.Getenv("AGENCY_CLUSTER_MODE"); m != "" { // to run one while investigating
		modes = []bool{m == "durable"}
	}
	for _, durable := range modes {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			runNodeLoss(t, c, durable)
		})
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// clusterChild is a child process of the cluster test.
type clusterChild struct {
	*peer
	ids   []string
	stdin io.Writer

	mu    sync.Mutex
	lines []string        // every line but the protocol's
	lost  map[string]bool // agents whose queues were gone after a reconnect
}

// queuesLost is what a space logs when an agent's queues were gone after
// a reconnect.
const queuesLost = "an agent's queues were gone after the reconnect"

// childStderr passes a child's log on to the test's, noting the agents
// whose queues were lost.
type childStderr struct {
	ch   *clusterChild
	next io.Writer
	buf  []byte
}

func (w *childStderr) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := slices.Index(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if strings.Contains(line, queuesLost) {
			for _, f := range strings.Fields(line) {
				if id, ok := strings.CutPrefix(f, "agent="); ok {
					w.ch.mu.Lock()
					if w.ch.lost == nil {
						w.ch.lost = map[string]bool{}
					}
					w.ch.lost[id] = true
					w.ch.mu.Unlock()
				}
			}
		}
	}
	return w.next.Write(b)
}

func runNodeLoss(t *testing.T, c *clustertest.Cluster, durable bool) {
	ex := randomName("cluster")
	var all []string
	var children []*clusterChild
	for i := range clusterProcs {
		var ids []string
		for j := range clusterAgents {
			ids = append(ids, fmt.Sprintf("%s-%d", randomName(fmt.Sprintf("P%d", i)), j))
		}
		all = append(all, ids...)
		children = append(children, &clusterChild{ids: ids})
	}
	for i, ch := range children {
		urls := c.URLs()
		urls = append(urls[i%len(urls):], urls[:i%len(urls)]...) // node i first
		ch.peer = startClusterChild(t, ch, urls, ex, durable, all)
	}
	for _, ch := range children {
		ch.expect("ready")
	}
	for _, ch := range children {
		fmt.Fprintln(ch.stdin, "go") // every agent is in: the load starts
	}
	t.Logf("%d agents in %d processes, one process on each node; load running", len(all), len(children))
	time.Sleep(2 * time.Second)

	var worst time.Duration
	for _, k := range []int{0, 1} {
		victim := c.Nodes[k]
		var survivors []string
		for j, n := range c.Nodes {
			if j != k {
				survivors = append(survivors, n.URL())
			}
		}
		victim.Kill()
		killed := time.Now()
		times := serveAgain(t, survivors, ex, durable, all, killed)
		slowest := slices.Max(times)
		worst = max(worst, slowest)
		t.Logf("node %d killed: every agent served again through a surviving node within %v (fastest %v)", k+1, slowest.Round(time.Millisecond), slices.Min(times).Round(time.Millisecond))
		if slowest > failoverBound {
			t.Errorf("an agent took %v to serve again after node %d died, over %v", slowest, k+1, failoverBound)
		}
		time.Sleep(2 * time.Second) // load on two nodes
		start := time.Now()
		victim.Start()
		t.Logf("node %d back and in the cluster after %v", k+1, time.Since(start).Round(time.Second))
		time.Sleep(2 * time.Second) // load on three nodes
	}

	for _, ch := range children {
		fmt.Fprintln(ch.stdin, "quiet")
	}
	for _, ch := range children {
		ch.expect("quiet")
	}
	checkClusterRun(t, children, durable)
	for _, ch := range children {
		fmt.Fprintln(ch.stdin, "exit")
	}
	for _, ch := range children {
		ch.expect("closed")
	}
	t.Logf("slowest fail-over: %v", worst.Round(time.Millisecond))
}

// serveAgain asks every agent to echo, through a space on the surviving
// nodes, until it answers; it returns how long after killed each did.
func serveAgain(t *testing.T, urls []string, ex string, durable bool, ids []string, killed time.Time) []time.Duration {
	t.Helper()
	sp := newClusterSpace(t, urls, ex, durable)
	probe := agency.MustNewAgent(randomName("Probe"))
	addAll(t, sp, probe)
	out := make([]time.Duration, len(ids))
	// Not while the cluster elects new leaders: a channel whose first
	// publish to a quorum queue comes while the queue has no leader was
	// seen to have every later publish to that queue refused
	// (docs/amqp.md). The probe's first request waits a second; the
	// time is still counted from the kill.
	time.Sleep(time.Until(killed.Add(time.Second)))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := probe.Request(ctx, id, "echo", echoArgs{Text: "probe"})
				cancel()
				if err == nil {
					out[i] = time.Since(killed)
					return
				}
				if time.Since(killed) > 2*failoverBound {
					out[i] = time.Since(killed)
					t.Errorf("%s never served again: %v", id, err)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := sp.Close(ctx); err != nil {
		t.Errorf("closing the probe's space: %v", err)
	}
	return out
}

func newClusterSpace(t *testing.T, urls []string, ex string, durable bool) *amqpspace.Space {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sp, err := amqpspace.New(ctx, amqpspace.Config{URLs: urls, Exchange: ex, Durable: durable})
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// checkClusterRun reads what the children reported.
func checkClusterRun(t *testing.T, children []*clusterChild, durable bool) {
	t.Helper()
	outcomes := map[string]int{}
	sent := map[string]bool{} // "from to seq" confirmed by the broker
	noted := map[string]int{} // "from to seq" handled by the receiver
	var twice, late int
	lostQueues := map[string]bool{}
	for _, ch := range children {
		ch.mu.Lock()
		for id := range ch.lost {
			lostQueues[id] = true
		}
		ch.mu.Unlock()
	}
	var lostWithQueue int
	for _, ch := range children {
		ch.mu.Lock()
		for _, l := range ch.lines {
			f := strings.Fields(l)
			switch f[0] {
			case "req":
				outcomes[f[1]]++
				switch f[1] {
				case "ok", "disconnected", "unconfirmed":
				case "rejected", "norecipient":
					// Fast failures too, and honest ones: the broker
					// refused the request (a quorum queue electing a
					// leader, a queue on the node that died), or no queue
					// was bound for its recipient (one being declared
					// again): it was not queued, and the caller knows it.
				case "deadline":
					// "req deadline MS ID FROM TO"
					if to := f[len(f)-1]; !durable && lostQueues[to] {
						// A transient queue goes with its node, and what
						// it held with it: the request may have been in it.
						lostWithQueue++
						t.Logf("past its deadline, to an agent whose transient queue was lost with the node: %s", l)
					} else {
						t.Errorf("a request waited out its deadline: %s", l)
					}
				default:
					t.Errorf("a request ended otherwise than answered or a fast failure: %s", l)
				}
			case "sent":
				sent[strings.Join(f[1:], " ")] = true
			case "noted":
				noted[strings.Join(f[1:], " ")]++
			case "twice":
				twice++
				t.Errorf("a request was answered twice: %s", l)
			case "late":
				late++
			}
		}
		ch.mu.Unlock()
	}
	t.Logf("requests: %v; late answers to requests that had failed: %d", outcomes, late)
	t.Logf("durable=%v: %d of %d requests waited out their deadline, %d of them to an agent whose transient queue was lost with the node", durable, outcomes["deadline"], total(outcomes), lostWithQueue)
	if outcomes["ok"] == 0 {
		t.Error("no request was answered")
	}
	var lost []string
	for k := range sent {
		if noted[k] == 0 {
			lost = append(lost, k)
		}
	}
	dups := 0
	for _, n := range noted {
		if n > 1 {
			dups++
		}
	}
	t.Logf("one-way: %d confirmed, %d of them not handled, %d handled more than once", len(sent), len(lost), dups)
	if durable && len(lost) > 0 {
		slices.Sort(lost)
		t.Errorf("Durable: %d confirmed one-way messages were lost, e.g. %q", len(lost), lost[:min(5, len(lost))])
	}
}

// startClusterChild runs this test binary as a child on the cluster.
func startClusterChild(t *testing.T, ch *clusterChild, urls []string, ex string, durable bool, all []string) *peer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterChild$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		clusterChildEnv+"=1",
		"CLUSTER_URLS="+strings.Join(urls, ","),
		"CLUSTER_EXCHANGE="+ex,
		"CLUSTER_DURABLE="+strconv.FormatBool(durable),
		"CLUSTER_IDS="+strings.Join(ch.ids, ","),
		"CLUSTER_ALL="+strings.Join(all, ","),
	)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &childStderr{ch: ch, next: &logWriter{t: t, prefix: "child stderr: "}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch.stdin = stdin
	p := &peer{t: t, cmd: cmd, lines: make(chan string, 64), exit: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l := sc.Text()
			switch {
			case l == "ready", l == "quiet", l == "closed":
				p.lines <- l
			case strings.HasPrefix(l, "req "), strings.HasPrefix(l, "sent "), strings.HasPrefix(l, "noted "),
				strings.HasPrefix(l, "twice "), strings.HasPrefix(l, "late "):
				ch.mu.Lock()
				ch.lines = append(ch.lines, l)
				ch.mu.Unlock()
			default:
				t.Logf("child %d: %s", cmd.Process.Pid, l)
			}
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.exit)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exit:
		default:
			_ = cmd.Process.Kill()
			<-p.exit
		}
	})
	return p
}

// TestClusterChild is a child process of TestClusterNodeLoss, and does
// nothing otherwise. Its agents ask agents of the other processes to echo
// (reporting "req OUTCOME MS") and send them one-way notes ("sent FROM TO
// SEQ" once confirmed, "noted FROM TO SEQ" when handled) until it reads
// "quiet" on stdin; "exit" closes its space.
func TestClusterChild(t *testing.T) {
	if os.Getenv(clusterChildEnv) != "1" {
		t.Skip("a child process of TestClusterNodeLoss")
	}
	amqpspace.FixNodeOrder()
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	ctx := context.Background()
	sp, err := amqpspace.New(ctx, amqpspace.Config{
		URLs:     strings.Split(os.Getenv("CLUSTER_URLS"), ","),
		Exchange: os.Getenv("CLUSTER_EXCHANGE"),
		Durable:  os.Getenv("CLUSTER_DURABLE") == "true",
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	mine := strings.Split(os.Getenv("CLUSTER_IDS"), ",")
	var others []string
	for _, id := range strings.Split(os.Getenv("CLUSTER_ALL"), ",") {
		if !slices.Contains(mine, id) {
			others = append(others, id)
		}
	}
	// answers counts the responses to each request, by the request's id:
	// what Request returned and what came to the hook after.
	var ansMu sync.Mutex
	answers := map[string]int{}
	failed := map[string]bool{}
	asked := map[string]bool{} // the ids of the requests, not of the notes
	answered := func(parent string, late bool) {
		ansMu.Lock()
		defer ansMu.Unlock()
		if !asked[parent] {
			return // the answer to a note
		}
		answers[parent]++
		if answers[parent] > 1 {
			say("twice %s", parent)
		} else if late || failed[parent] {
			say("late %s", parent)
		}
	}
	var agents []*agency.Agent
	for _, id := range mine {
		a := agency.MustNewAgent(id, agency.Hooks(lateHook{answered}))
		agency.Handle(a, "echo", func(_ context.Context, args echoArgs) (string, error) {
			return args.Text, nil
		})
		agency.Handle(a, "note", func(ctx context.Context, args echoArgs) (bool, error) {
			say("noted %s %s %s", agency.MessageFrom(ctx).From, id, args.Text)
			return true, nil
		})
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	say("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() && sc.Text() != "go" {
	}

	var quiet atomic.Bool
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() {
			for seq := 0; !quiet.Load(); seq++ {
				to := others[rand.IntN(len(others))]
				rctx, cancel := context.WithTimeout(ctx, clusterReqWait)
				start := time.Now()
				text := fmt.Sprintf("%s-%d", a.ID(), seq)
				req := &agency.Message{ID: agency.NewID(), To: to, Action: "echo", Args: echoArgs{Text: text}}
				ansMu.Lock()
				asked[req.ID] = true
				ansMu.Unlock()
				m, err := a.RequestMessage(rctx, req)
				cancel()
				if err != nil {
					ansMu.Lock()
					failed[req.ID] = true
					ansMu.Unlock()
				}
				ms := time.Since(start).Milliseconds()
				switch {
				case err == nil:
					answered(m.ParentID, false)
					if v, err := agency.Value[string](m); err != nil || v != text {
						say("req wrong %d %q %v", ms, v, err)
					} else {
						say("req ok %d", ms)
					}
				case errors.Is(err, amqpspace.ErrDisconnected):
					say("req disconnected %d", ms)
				case errors.Is(err, amqpspace.ErrUnconfirmed):
					say("req unconfirmed %d", ms)
				case errors.Is(err, amqpspace.ErrRejected):
					say("req rejected %d %s %s %s", ms, req.ID, a.ID(), to)
				case errors.Is(err, agency.ErrNoRecipient):
					say("req norecipient %d", ms)
				case errors.Is(err, agency.ErrTimeout):
					say("req deadline %d %s %s %s", ms, req.ID, a.ID(), to) // the ids: for a search in the logs
				default:
					say("req other %d %s", ms, strings.ReplaceAll(err.Error(), " ", "_"))
				}
				to = others[rand.IntN(len(others))]
				note := strconv.Itoa(seq)
				if _, err := a.Send(ctx, to, "note", echoArgs{Text: note}); err == nil {
					say("sent %s %s %s", a.ID(), to, note)
				}
				time.Sleep(clusterLoadEvery)
			}
		})
	}
	for sc.Scan() {
		switch sc.Text() {
		case "quiet":
			quiet.Store(true)
			wg.Wait()
			time.Sleep(3 * time.Second) // what was sent is handled
			say("quiet")
		case "exit":
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			err := sp.Close(cctx)
			cancel()
			if err != nil {
				t.Error(err)
			}
			say("closed")
			return
		}
	}
}

// lateHook reports responses that come after a Request returned.
type lateHook struct {
	answered func(parent string, late bool)
}

func (h lateHook) HandleActionValue(_ context.Context, m *agency.Message) {
	h.answered(m.ParentID, true)
}
func (h lateHook) HandleActionError(_ context.Context, m *agency.Message, _ *agency.ActionError) {
	h.answered(m.ParentID, true)
}
