package amqpspace_test

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/internal/testenv"
)

// A flood of large messages to an agent that does not take them: 40 over
// the size limit (10 MiB each) and 60 valid ones of 3.5 MiB, 610 MiB in all.
// The receiving process holds at most Config.MaxPendingBytes of them (64
// MiB by default) and leaves the rest in the broker, so its peak resident
// memory stays under 256 MiB; the oversize ones are dropped without being
// held, and the valid ones are all handled once the agent takes them.
//
// The receiver is the peer program, built without the race detector (whose
// shadow memory would be measured too), and it reports its own peak
// resident set (VmHWM).
func TestMemoryBounded(t *testing.T) {
	testenv.Long(t) // 610 MiB through the broker
	if runtime.GOOS != "linux" {
		t.Skip("the peak resident set is read from /proc/self/status")
	}
	const (
		oversize, valid = 40, 60
		bigPad          = 10 << 20
		validPad        = 3<<20 + 1<<19
		limitKiB        = 256 << 10
	)
	ex := testExchange(t)
	bin := testenv.ProgramNoRace(t, "./internal/peer")
	id := randomName("Flooded")
	// A pipe of the system's, which the child reads directly: with an
	// io.Pipe, waiting for the child would wait for the copy too.
	stdin, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer release.Close()
	p := launchPeer(t, bin, stdin, "-url", brokerURL(t), "-exchange", ex, "-ids", id, "-log-stdout", "-report-rss")
	var logged []string
	note := func(line string) {
		if msg, ok := strings.CutPrefix(line, "log: "); ok {
			logged = append(logged, msg)
		}
	}
	p.until("ready", func(l string) bool { note(l); return l == "ready" })

	ch := bareChannel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, oversize+valid+1))
	from := randomName("Flooder")
	publish := func(n int, action, args string) {
		t.Helper()
		body := fmt.Sprintf(`{"to":%q,"from":%q,"action":{"__meta__":{"id":"flood-%d","no_reply":true},%q:%s}}`, id, from, n, action, args)
		if err := ch.Publish(ex, id, false, false, amqp.Publishing{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	publish(0, "hold", "{}") // the agent is busy from now on
	big := `{"pad":"` + strings.Repeat("x", bigPad) + `"}`
	small := `{"pad":"` + strings.Repeat("y", validPad) + `"}`
	for i := range oversize + valid {
		if i%5 < 2 {
			publish(i+1, "take", big)
		} else {
			publish(i+1, "take", small)
		}
	}
	for range oversize + valid + 1 {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatal("the broker refused a message of the flood")
			}
		case <-time.After(time.Minute):
			t.Fatal("the broker did not confirm the flood")
		}
	}

	// Wait until the peer says it stops reading, or (without a bound) until
	// it has everything.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(peerTimeout)
wait:
	for {
		select {
		case line := <-p.lines:
			note(line)
			if strings.Contains(line, "reading from the broker pauses") {
				break wait
			}
		case <-tick.C:
			q, err := ch.QueueDeclarePassive(id, true, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if q.Messages == 0 {
				t.Log("the broker has handed the peer every message")
				break wait
			}
		case <-timeout:
			t.Fatal("the peer neither paused nor took in the flood")
		}
	}
	if _, err := io.WriteString(release, "release\n"); err != nil {
		t.Fatal(err)
	}
	p.until(fmt.Sprintf("took %d", valid), func(l string) bool { note(l); return l == fmt.Sprintf("took %d", valid) })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	lines, err := p.rest()
	stdin.Close()
	if err != nil {
		t.Errorf("the peer exited with %v", err)
	}
	peak := int64(-1)
	for _, l := range lines {
		note(l)
		if v, ok := strings.CutPrefix(l, "peak_rss_kib "); ok {
			peak, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	t.Logf("peak resident memory of the flooded process: %d MiB", peak>>10)
	if peak < 0 || peak > limitKiB {
		t.Errorf("peak resident memory %d KiB, want at most %d KiB (256 MiB)", peak, limitKiB)
	}
	dropped := 0
	for _, m := range logged {
		if strings.Contains(m, "over the size limit") {
			dropped++
		}
	}
	if dropped != oversize {
		t.Errorf("the peer logged %d oversize messages as dropped, want %d", dropped, oversize)
	}
}
