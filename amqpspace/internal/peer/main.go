// Command peer is the other process of amqpspace's multi-process tests: it
// adds agents to a space on the given exchange and serves them until SIGINT
// or SIGTERM, then closes the space and checks that no goroutine is left.
//
// Each agent has these actions: echo, which answers its text prefixed with
// the agent's id and the process id ("Remote-x@1234: hi"); slow, which
// sleeps for the given number of milliseconds, finishing even when the
// process is told to stop meanwhile; record, which prints its text; hold,
// which waits until the peer reads "release" on its standard input;
// stream, which emits parts until its caller stops reading; and take,
// which takes a text of any size and counts the calls.
//
// The test reads what the peer prints on stdout, one event a line:
//
//	ready               every agent is in the space
//	slow started ID     agent ID began a slow action
//	slow finished ID    and ended it
//	record TEXT         record ran with TEXT
//	hold started ID     agent ID began to hold
//	stream started ID   agent ID began to stream
//	took N              take has run N times in all
//	log: MESSAGE        a log record of the space (with -log-stdout)
//	peak_rss_kib N      the process's peak resident memory (with -report-rss)
//	closed              the space is closed and no goroutine leaked
//
// It exits with status 0 after "closed", 1 when closing fails or leaks, and
// 2 for bad flags.
//
//	go run ./amqpspace/internal/peer -exchange test -ids Remote-a,Remote-b
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
)

// closeTimeout bounds how long running actions may take once the peer is
// told to stop.
const closeTimeout = 30 * time.Second

// errUsage reports bad flags; the peer then exits with status 2.
var errUsage = errors.New("peer: bad usage")

func main() {
	switch err := run(os.Args[1:]); {
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case err != nil:
		fmt.Println("peer:", err)
		os.Exit(1)
	}
	fmt.Println("closed")
}

// run serves the agents that args name until a signal, then closes the
// space and looks for leaked goroutines.
func run(args []string) error {
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = amqpspace.DefaultURL
	}
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.StringVar(&url, "url", url, "broker URL (default: AMQP_URL or amqpspace.DefaultURL)")
	exchange := fs.String("exchange", "", "exchange of the space (required)")
	ids := fs.String("ids", "", "comma-separated ids of the agents to add")
	logStdout := fs.Bool("log-stdout", false, "print the space's log records (info and above) on stdout, as \"log: MESSAGE\"")
	reportRSS := fs.Bool("report-rss", false, "print the peak resident memory before \"closed\" (Linux)")
	maxPending := fs.Int64("max-pending", 0, "Config.MaxPendingBytes (0: the default)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *exchange == "" {
		return fmt.Errorf("%w: -exchange is required", errUsage)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *logStdout {
		logger = slog.New(stdoutHandler{})
	}
	sp, err := amqpspace.New(ctx, amqpspace.Config{URL: url, Exchange: *exchange, Logger: logger, MaxPendingBytes: *maxPending})
	if err != nil {
		return err
	}
	go readStdin()
	err = serve(ctx, sp, *ids)
	stop() // a second signal ends the process at once

	closeCtx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if cerr := sp.Close(closeCtx); cerr != nil {
		return errors.Join(err, fmt.Errorf("closing the space: %w", cerr))
	}
	if err != nil {
		return err
	}
	cancel()
	if err := goleak.Find(goleak.IgnoreAnyFunction("main.readStdin")); err != nil {
		return fmt.Errorf("after Close: %w", err)
	}
	if *reportRSS {
		fmt.Println("peak_rss_kib", peakRSS())
	}
	return nil
}

// released is closed when the peer reads "release" on its standard input:
// every hold action returns then.
var (
	released    = make(chan struct{})
	releaseOnce sync.Once
)

func readStdin() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "release" {
			releaseOnce.Do(func() { close(released) })
		}
	}
}

// peakRSS returns VmHWM from /proc/self/status, in KiB, or -1.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// stdoutHandler prints log records of level info and above on stdout, one
// a line, as "log: MESSAGE".
type stdoutHandler struct{}

func (stdoutHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (stdoutHandler) Handle(_ context.Context, r slog.Record) error {
	fmt.Println("log:", r.Message)
	return nil
}
func (h stdoutHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h stdoutHandler) WithGroup(string) slog.Handler      { return h }

// serve adds one agent per id in ids, says "ready", and waits for ctx.
func serve(ctx context.Context, sp *amqpspace.Space, ids string) error {
	for id := range strings.SplitSeq(ids, ",") {
		if id == "" {
			continue
		}
		a, err := newAgent(id)
		if err != nil {
			return err
		}
		if err := sp.Add(ctx, a); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}

// echoArgs are the arguments of echo.
type echoArgs struct {
	Text string `json:"text"`
}

// slowArgs are the arguments of slow.
type slowArgs struct {
	MS int `json:"ms" validate:"min=0"`
}

// takeArgs are the arguments of take.
type takeArgs struct {
	Pad string `json:"pad"`
}

// took counts the calls of take, across the peer's agents.
var took atomic.Int64

// newAgent returns an agent with the echo and slow actions.
func newAgent(id string) (*agency.Agent, error) {
	a, err := agency.NewAgent(id)
	if err != nil {
		return nil, err
	}
	agency.Handle(a, "echo", func(_ context.Context, args echoArgs) (string, error) {
		return fmt.Sprintf("%s@%d: %s", id, os.Getpid(), args.Text), nil
	}, agency.Describe("Answers the text prefixed with the agent's id and the process id"))
	agency.Handle(a, "slow", func(ctx context.Context, args slowArgs) (bool, error) {
		fmt.Println("slow started", id)
		// The sleep ignores ctx on purpose: the test checks that a
		// stopping process lets a running action finish.
		time.Sleep(time.Duration(args.MS) * time.Millisecond)
		fmt.Println("slow finished", id)
		if err := ctx.Err(); err != nil {
			return false, err
		}
		return true, nil
	}, agency.Describe("Sleeps for ms milliseconds, then answers true"))
	agency.Handle(a, "record", func(_ context.Context, args echoArgs) (bool, error) {
		fmt.Println("record", args.Text)
		return true, nil
	}, agency.Describe("Prints the text on the peer's stdout"))
	agency.Handle(a, "hold", func(ctx context.Context, _ struct{}) (bool, error) {
		fmt.Println("hold started", id)
		select {
		case <-released:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}, agency.Describe("Waits until the peer reads \"release\" on its standard input"))
	agency.Handle(a, "stream", func(ctx context.Context, _ struct{}) (bool, error) {
		fmt.Println("stream started", id)
		for i := 1; ; i++ {
			if err := agency.Emit(ctx, fmt.Sprintf("p%d", i)); err != nil {
				return false, err
			}
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}, agency.Describe("Streams parts p1, p2, … every 10 ms until its caller stops reading"))
	agency.Handle(a, "take", func(context.Context, takeArgs) (bool, error) {
		fmt.Println("took", took.Add(1))
		return true, nil
	}, agency.Describe("Takes a text of any size and counts the calls"))
	return a, nil
}
