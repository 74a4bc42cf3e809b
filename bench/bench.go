package bench

import (
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Tick is the one-way message: space.Local's tick action takes it as its
// typed arguments, the peers' actors receive it as their message.
type Tick struct {
	N int `json:"n"`
}

// Ping is the request; its answer is N.
type Ping struct {
	N int `json:"n"`
}

// RequestTimeout is the deadline of every request, made fresh for each
// call on every side: context.WithTimeout for agency, the timeout argument
// of hollywood's Request and of protoactor's RequestFuture.
const RequestTimeout = 10 * time.Second

// Sizes of the workloads.
const (
	BroadcastAgents = 10_000    // recipients of a broadcast
	IdleAgents      = 100_000   // actors added to weigh one idle actor
	MillionAgents   = 1_000_000 // actors added to one process
)

// waitLimit bounds the waits for handlers: a safety net, not a measure.
const waitLimit = 2 * time.Minute

// Countdown is what the actors' handlers report to: each Handled counts
// one message down, and the waiter learns when none is left. It is safe
// for concurrent use.
type Countdown struct {
	left atomic.Int64
	done chan struct{}
}

// NewCountdown returns a countdown with nothing to wait for yet.
func NewCountdown() *Countdown {
	return &Countdown{done: make(chan struct{}, 1)}
}

// Expect sets how many messages the next Wait waits for.
func (c *Countdown) Expect(n int) { c.left.Store(int64(n)) }

// Handled counts one message as handled.
func (c *Countdown) Handled() {
	if c.left.Add(-1) == 0 {
		c.done <- struct{}{}
	}
}

// Wait waits until the expected messages have been handled.
func (c *Countdown) Wait(b *testing.B, what string) {
	select {
	case <-c.done:
	case <-time.After(waitLimit):
		b.Fatalf("%s: %d messages not handled after %v", what, c.left.Load(), waitLimit)
	}
}

// OneWay measures one-way messages between two actors of one process: the
// benchmark's goroutine calls send(i) b.N times, and the clock stops once
// the receiver has handled the last. setup makes the receiver, whose
// handler calls cd.Handled for each message, and returns the send function.
// It reports msgs/s: handled messages over the whole run.
func OneWay(b *testing.B, setup func(b *testing.B, cd *Countdown) (send func(i int))) {
	cd := NewCountdown()
	send := setup(b, cd)
	cd.Expect(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		send(i)
	}
	cd.Wait(b, "one-way")
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// Request measures sequential round trips: call(i) sends Ping{N: i} to an
// echo actor, with a deadline made for the call, and returns the answer.
// It reports the median and the 99th percentile.
func Request(b *testing.B, call func(i int) (int, error)) {
	times := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		n, err := call(i)
		times[i] = time.Since(start)
		if err != nil || n != i {
			b.Fatalf("ping %d: %d, %v", i, n, err)
		}
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1e3, "µs-median")
	b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1e3, "µs-p99")
}

// Fanout is BroadcastAgents actors, as Broadcast needs them.
type Fanout struct {
	Send func()       // sends one Tick to every actor
	Stop func() error // takes the actors down
}

// Broadcast measures one message to each of BroadcastAgents actors, until
// every one has handled it: "first" is the first such message after the
// actors were added (a new set of actors for each iteration), "later" one
// of those that follow. setup adds the actors, whose handler calls
// cd.Handled for each message.
func Broadcast(b *testing.B, setup func(b *testing.B, cd *Countdown) Fanout) {
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			b.StopTimer()
			cd := NewCountdown()
			f := setup(b, cd)
			cd.Expect(BroadcastAgents)
			b.StartTimer()
			f.Send()
			cd.Wait(b, "broadcast")
			b.StopTimer()
			if err := f.Stop(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("later", func(b *testing.B) {
		cd := NewCountdown()
		f := setup(b, cd)
		cd.Expect(BroadcastAgents)
		f.Send() // the first
		cd.Wait(b, "broadcast")
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			cd.Expect(BroadcastAgents)
			f.Send()
			cd.Wait(b, "broadcast")
		}
		b.StopTimer()
		if err := f.Stop(); err != nil {
			b.Fatal(err)
		}
	})
}

// IdleAgent adds IdleAgents actors that each handle one kind of message,
// and reports what each holds while idle: live heap and goroutine stacks,
// after the goroutines have settled and a collection, per actor.
func IdleAgent(b *testing.B, add func(b *testing.B, n int) (stop func())) {
	var perAgent float64
	for range b.N {
		b.StopTimer()
		freeMemory()
		before := inUse()
		b.StartTimer()
		stop := add(b, IdleAgents)
		b.StopTimer()
		perAgent = float64(inUse()-before) / IdleAgents
		stop()
		b.StartTimer()
	}
	b.ReportMetric(perAgent, "bytes/agent")
}

// Million adds MillionAgents idle actors and reports the time that took
// (s-to-add), the resident set of the process right after (GiB-RSS, as
// the operating system counts it, so run it in a process of its own, as
// cmd/compare does), and the live heap and stacks per actor after a
// collection. It takes a while, and is skipped with -short.
func Million(b *testing.B, add func(b *testing.B, n int) (stop func())) {
	if testing.Short() {
		b.Skip("adds a million actors; runs without -short")
	}
	var took time.Duration
	var resident, perAgent float64
	for range b.N {
		b.StopTimer()
		freeMemory()
		before := inUse()
		b.StartTimer()
		start := time.Now()
		stop := add(b, MillionAgents)
		took = time.Since(start)
		b.StopTimer()
		resident = float64(rss())
		perAgent = float64(inUse()-before) / MillionAgents
		stop()
		b.StartTimer()
	}
	b.ReportMetric(took.Seconds(), "s-to-add")
	b.ReportMetric(resident/(1<<30), "GiB-RSS")
	b.ReportMetric(perAgent, "bytes/agent")
}

// inUse returns the bytes of live heap objects plus goroutine stacks, once
// the goroutines have settled, after two collections.
func inUse() uint64 {
	settle()
	var ms runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// settle waits until the number of goroutines stops changing: the peers
// start a short-lived goroutine for each actor they spawn (to handle its
// start-up messages), whose stacks are not what an idle actor holds.
func settle() {
	last := runtime.NumGoroutine()
	for range 500 {
		time.Sleep(10 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n == last {
			return
		}
		last = n
	}
}

// rss returns the resident set size of this process in bytes, as the
// operating system counts it; 0 where /proc is missing.
func rss() uint64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// freeMemory hands back to the operating system what earlier benchmarks of
// the process left, so that the figures are this benchmark's.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}
