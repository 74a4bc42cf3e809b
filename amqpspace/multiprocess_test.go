package amqpspace_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/internal/testenv"
	"github.com/seed72275b23/agency-go/space"
)

// peerTimeout bounds each wait for the peer: a safety net, never a way to
// synchronise.
const peerTimeout = 30 * time.Second

// buildPeer returns the program of internal/peer, built once for the
// test binary, with the race detector when it has it.
func buildPeer(t *testing.T) string {
	t.Helper()
	return testenv.Program(t, "./internal/peer")
}

// peer is a running peer process.
type peer struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string   // what it prints on stdout; closed when stdout ends
	exit  chan struct{} // closed once it has exited and been waited for
	err   error         // Wait's error; set before exit closes
}

// startPeer runs the peer on exchange ex with agents ids and waits until it
// says "ready". It is killed, if it still runs, when the test ends.
func startPeer(t *testing.T, bin, ex string, ids ...string) *peer {
	t.Helper()
	p := launchPeer(t, bin, nil, "-url", brokerURL(t), "-exchange", ex, "-ids", strings.Join(ids, ","))
	p.expect("ready")
	return p
}

// launchPeer runs the peer with args, and stdin as its standard input
// (nil: none). It is killed, if it still runs, when the test ends.
func launchPeer(t *testing.T, bin string, stdin io.Reader, args ...string) *peer {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = stdin
	cmd.Stderr = &logWriter{t: t, prefix: "peer stderr: "}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, cmd: cmd, lines: make(chan string, 64), exit: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			t.Logf("peer %d: %s", cmd.Process.Pid, sc.Text())
			p.lines <- sc.Text()
		}
		close(p.lines)
		// All reads are done: now Wait may close the pipe.
		p.err = cmd.Wait()
		close(p.exit)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exit:
		default:
			_ = cmd.Process.Kill()
		}
		for range p.lines { // unblock the reader
		}
		<-p.exit
	})
	return p
}

// until reads the peer's lines until one satisfies match, and returns it.
func (p *peer) until(what string, match func(line string) bool) string {
	p.t.Helper()
	timeout := time.After(peerTimeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.exit
				p.t.Fatalf("peer ended its output (%v) before %s", p.err, what)
			}
			if match(line) {
				return line
			}
		case <-timeout:
			p.t.Fatalf("peer printed no %s within %v", what, peerTimeout)
		}
	}
}

// expect waits for the next line the peer prints and fails the test
// unless it is want.
func (p *peer) expect(want string) {
	p.t.Helper()
	if got := p.next(); got != want {
		p.t.Fatalf("peer printed %q, want %q", got, want)
	}
}

// next returns the next line the peer prints, failing the test when it
// ends its output or takes too long.
func (p *peer) next() string {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			<-p.exit
			p.t.Fatalf("peer ended its output (%v)", p.err)
		}
		return line
	case <-time.After(peerTimeout):
		p.t.Fatalf("peer printed nothing in %v", peerTimeout)
	}
	return ""
}

// rest returns every line the peer prints until it exits, and how it
// exited.
func (p *peer) rest() ([]string, error) {
	p.t.Helper()
	var lines []string
	timeout := time.After(peerTimeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.exit
				return lines, p.err
			}
			lines = append(lines, line)
		case <-timeout:
			p.t.Fatalf("peer has not exited within %v; printed %q", peerTimeout, lines)
		}
	}
}

// logWriter writes each line to the test's log.
type logWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.t.Log(w.prefix + string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(b), nil
}

// responses collects the [response] messages an agent receives through its
// ValueHandler hook.
type responses struct {
	mu      sync.Mutex
	got     []*agency.Message
	changed chan struct{} // capacity 1: "got may have grown"
}

func newResponses() *responses { return &responses{changed: make(chan struct{}, 1)} }

func (r *responses) HandleActionValue(_ context.Context, m *agency.Message) {
	r.mu.Lock()
	r.got = append(r.got, m)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// await waits until the responses to message id come from every agent in
// from, and returns them by sender; it fails the test after peerTimeout.
func (r *responses) await(t *testing.T, id string, from ...string) map[string]*agency.Message {
	t.Helper()
	timeout := time.After(peerTimeout)
	for {
		bySender := make(map[string]*agency.Message)
		r.mu.Lock()
		for _, m := range r.got {
			if m.ParentID == id {
				bySender[m.From] = m
			}
		}
		r.mu.Unlock()
		missing := slices.DeleteFunc(slices.Clone(from), func(s string) bool { return bySender[s] != nil })
		if len(missing) == 0 {
			return bySender
		}
		select {
		case <-r.changed:
		case <-timeout:
			t.Fatalf("no response to %s from %q within %v; got one from %v", id, missing, peerTimeout, keys(bySender))
		}
	}
}

func keys(m map[string]*agency.Message) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestMultiProcess(t *testing.T) {
	t.Parallel()
	ex := testExchange(t)
	bin := buildPeer(t)
	remotes := []string{randomName("RemoteA"), randomName("RemoteB")}
	p := startPeer(t, bin, ex, remotes...)
	pid := p.cmd.Process.Pid

	sp := newSpace(t, amqpspace.Config{Exchange: ex})
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	got := newResponses()
	local := agency.MustNewAgent(randomName("Local"), agency.Hooks(got))
	other := agency.MustNewAgent(randomName("LocalB"))
	for _, a := range []*agency.Agent{local, other} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatalf("Add(%s): %v", a.ID(), err)
		}
	}

	echo := func(t *testing.T, to, text string) {
		t.Helper()
		answer, err := agency.Call[string](ctx, local, to, "echo", map[string]any{"text": text})
		if err != nil {
			t.Fatalf("echo to %s: %v", to, err)
		}
		if want := fmt.Sprintf("%s@%d: %s", to, pid, text); answer != want {
			t.Fatalf("echo to %s answered %q, want %q (this process is %d)", to, answer, want, os.Getpid())
		}
	}

	t.Run("Request", func(t *testing.T) {
		echo(t, remotes[0], "hi")
		echo(t, remotes[1], "hello")
	})

	t.Run("BroadcastHelp", func(t *testing.T) {
		id, err := local.Send(ctx, agency.Broadcast, agency.HelpAction, nil)
		if err != nil {
			t.Fatalf("broadcast help: %v", err)
		}
		answers := got.await(t, id, append([]string{local.ID(), other.ID()}, remotes...)...)
		for _, r := range remotes {
			help, err := agency.Value[map[string]any](answers[r])
			if err != nil {
				t.Fatalf("help from %s: %v", r, err)
			}
			if help["echo"] == nil || help["slow"] == nil {
				t.Errorf("help from %s lists %v, want echo and slow", r, help)
			}
		}
	})

	t.Run("IDLiveElsewhere", func(t *testing.T) {
		err := sp.Add(ctx, agency.MustNewAgent(remotes[0]))
		if !errors.Is(err, space.ErrAgentExists) {
			t.Fatalf("Add(%s), live in the peer: %v, want ErrAgentExists", remotes[0], err)
		}
		// The failed claim took nothing from the peer's agent.
		echo(t, remotes[0], "still there")
	})
}

func TestShutdownOnSignal(t *testing.T) {
	t.Parallel()
	bin := buildPeer(t)
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGTERM", syscall.SIGTERM}, {"SIGINT", syscall.SIGINT}} {
		t.Run(tc.name, func(t *testing.T) {
			ex := testExchange(t)
			remote := randomName("Remote")
			p := startPeer(t, bin, ex, remote)

			sp := newSpace(t, amqpspace.Config{Exchange: ex})
			ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
			defer cancel()
			got := newResponses()
			local := agency.MustNewAgent(randomName("Local"), agency.Hooks(got))
			if err := sp.Add(ctx, local); err != nil {
				t.Fatal(err)
			}

			id, err := local.Send(ctx, remote, "slow", map[string]any{"ms": 1500})
			if err != nil {
				t.Fatalf("send slow: %v", err)
			}
			p.expect("slow started " + remote)
			if err := p.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			lines, err := p.rest()
			if want := []string{"slow finished " + remote, "closed"}; !slices.Equal(lines, want) {
				t.Errorf("after %s the peer printed %q, want %q", tc.name, lines, want)
			}
			if err != nil {
				t.Errorf("peer exited with %v, want status 0", err)
			}

			for _, q := range []string{remote, remote + "-broadcast"} {
				if err := queueExists(brokerURL(t), q); !isNotFound(err) {
					t.Errorf("queue %s after the peer closed: %v, want NOT_FOUND", q, err)
				}
			}

			// The action's answer went out before the agent left.
			answer, err := agency.Value[bool](got.await(t, id, remote)[remote])
			if err != nil || !answer {
				t.Errorf("slow answered %v, %v; want true", answer, err)
			}
		})
	}
}

// queueExists declares queue q passively: nil means it exists.
func queueExists(url, q string) error {
	c, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer c.Close()
	ch, err := c.Channel() // closed by the broker when q is missing
	if err != nil {
		return err
	}
	_, err = ch.QueueDeclarePassive(q, true, false, false, false, nil)
	return err
}

func isNotFound(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}
