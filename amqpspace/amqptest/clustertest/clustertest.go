// Package clustertest runs a RabbitMQ cluster of extra nodes on this
// machine for tests: each node is a rabbitmq-server process with a node
// name, AMQP port, distribution port and data directory of its own, so
// that the machine's own broker (on 5672) is left alone. Start forms the
// cluster with rabbitmqctl join_cluster; a test stops, kills (SIGKILL) and
// restarts nodes; everything is killed and removed when the test ends.
//
// It needs the rabbitmq-server and rabbitmqctl of a RabbitMQ installation
// (Debian's package: /usr/lib/rabbitmq/bin) and to run as root or as the
// user the installation runs the broker as (rabbitmq), whose Erlang cookie
// the nodes share. Without them Start skips the test, or fails it under
// CI=true. Each node takes about 150 MiB; three form a cluster in about
// 30 s on a busy machine.
package clustertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Timeouts of the helpers: safety nets for a busy machine.
const (
	bootTimeout = 3 * time.Minute
	ctlTimeout  = 2 * time.Minute
)

// Cluster is a running cluster of nodes.
type Cluster struct {
	Nodes []*Node
	t     testing.TB
	dir   string
	run   runner
}

// Node is one node of a Cluster. Its methods are for the test's goroutine.
type Node struct {
	Name string // Erlang node name, e.g. agency-1a2b3c-1@localhost
	Port int    // AMQP port on 127.0.0.1
	c    *Cluster
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited
}

// URL is the node's AMQP address, guest/guest on the default vhost.
func (n *Node) URL() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.Port) }

// URLs returns the addresses of every node.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.URL()
	}
	return out
}

// runner runs the installation's programs as the broker's user.
type runner struct {
	server, ctlPath string
	cred            *syscall.Credential // nil: as we are
	uid, gid        int
	home            string
}

func findRunner() (runner, error) {
	var r runner
	for _, dir := range []string{os.Getenv("RABBITMQ_BIN"), "/usr/lib/rabbitmq/bin"} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "rabbitmq-server")); err == nil {
			r.server, r.ctlPath = filepath.Join(dir, "rabbitmq-server"), filepath.Join(dir, "rabbitmqctl")
			break
		}
	}
	if r.server == "" {
		return r, errors.New("no RabbitMQ installation (rabbitmq-server in /usr/lib/rabbitmq/bin or $RABBITMQ_BIN)")
	}
	u, err := user.Lookup("rabbitmq")
	if err != nil {
		return r, fmt.Errorf("no rabbitmq user: %v", err)
	}
	r.uid, _ = strconv.Atoi(u.Uid)
	r.gid, _ = strconv.Atoi(u.Gid)
	r.home = u.HomeDir
	switch os.Getuid() {
	case r.uid:
	case 0:
		r.cred = &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid)}
	default:
		return r, errors.New("the nodes run as the rabbitmq user: run as root or as rabbitmq")
	}
	if _, err := os.Stat(filepath.Join(r.home, ".erlang.cookie")); err != nil {
		return r, fmt.Errorf("no Erlang cookie for the rabbitmq user (start the machine's broker once): %v", err)
	}
	return r, nil
}

func (r runner) command(ctx context.Context, env []string, prog string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + r.home, "LANG=C.UTF-8", "LC_ALL=C.UTF-8"}, env...)
	// A process group of its own: Kill ends the node's every process (the
	// script, beam, its port helpers) and nothing else. epmd, which the
	// first node on the machine starts, daemonizes out of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: r.cred}
	cmd.Dir = r.home
	return cmd
}

// ctl runs rabbitmqctl against node name.
func (r runner) ctl(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	cmd := r.command(ctx, nil, r.ctlPath, append([]string{"-q", "-n", name}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("rabbitmqctl -n %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// skip skips t, or fails it under CI=true, where the cluster test must run.
func skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("clustertest: "+format, args...)
	}
	t.Skipf("clustertest: "+format, args...)
}

// Start starts n nodes, joins them into one cluster, and waits until every
// node serves AMQP. The nodes are killed and their directories removed
// when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	r, err := findRunner()
	if err != nil {
		skip(t, "%v", err)
	}
	dir, err := os.MkdirTemp("", "agency-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, dir: dir, run: r}
	t.Cleanup(c.cleanup)
	if err := os.Chown(dir, r.uid, r.gid); err != nil {
		t.Fatal(err)
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	prefix := "agency-" + hex.EncodeToString(b[:])
	ports, err := freePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		nd := &Node{
			Name: fmt.Sprintf("%s-%d@localhost", prefix, i+1),
			Port: ports[2*i],
			c:    c,
			dir:  filepath.Join(dir, strconv.Itoa(i+1)),
		}
		if err := nd.prepare(ports[2*i+1]); err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, nd)
	}
	// Booting is the slow part: all at once.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range c.Nodes {
		wg.Go(func() { errs[i] = nd.start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Joining is not: one after the other, to the first node.
	for _, nd := range c.Nodes[1:] {
		for _, args := range [][]string{{"stop_app"}, {"join_cluster", c.Nodes[0].Name}, {"start_app"}} {
			if err := r.ctl(nd.Name, args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, nd := range c.Nodes {
		if err := nd.awaitAMQP(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// freePorts returns n TCP ports that nothing listens on now.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// prepare writes the node's configuration and makes its directories.
func (n *Node) prepare(distPort int) error {
	r := n.c.run
	for _, d := range []string{n.dir, filepath.Join(n.dir, "mnesia"), filepath.Join(n.dir, "log")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf("listeners.tcp.default = %d\n", n.Port)
	files := map[string]string{"rabbitmq.conf": conf, "enabled_plugins": "[].\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(body), 0o640); err != nil {
			return err
		}
	}
	env := []string{
		"RABBITMQ_NODENAME=" + n.Name,
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(n.Port),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(distPort),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(n.dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(n.dir, "log"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(n.dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(n.dir, "enabled_plugins"),
		"RABBITMQ_PID_FILE=" + filepath.Join(n.dir, "pid"),
	}
	if err := os.WriteFile(filepath.Join(n.dir, "env"), []byte(strings.Join(env, "\n")), 0o640); err != nil {
		return err
	}
	return filepath.Walk(n.dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, r.uid, r.gid)
	})
}

// start runs the node and waits until it has booted.
func (n *Node) start() error {
	env, err := os.ReadFile(filepath.Join(n.dir, "env"))
	if err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(n.dir, "out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := n.c.run.command(context.Background(), strings.Split(string(env), "\n"), n.c.run.server)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %v", n.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	// await_startup fails at once while the node has not registered its
	// name yet: tried again until the node is up, exits, or time is out.
	deadline := time.Now().Add(bootTimeout)
	for {
		err := n.c.run.ctl(n.Name, "await_startup", "--timeout", strconv.Itoa(int(bootTimeout/time.Second)))
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited while starting: %v\n%s", n.Name, err, n.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v\n%s", err, n.logTail())
		}
		time.Sleep(time.Second)
	}
}

// awaitAMQP waits until the node accepts TCP connections on its AMQP port.
func (n *Node) awaitAMQP() error {
	deadline := time.Now().Add(bootTimeout)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not listen on %d: %v\n%s", n.Name, n.Port, err, n.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logTail is the end of the node's output, for an error message.
func (n *Node) logTail() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "out"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// Start starts a stopped or killed node again on its data directory: it
// rejoins the cluster by itself. It returns once the node serves AMQP.
func (n *Node) Start() {
	n.c.t.Helper()
	if err := n.start(); err != nil {
		n.c.t.Fatal(err)
	}
	if err := n.awaitAMQP(); err != nil {
		n.c.t.Fatal(err)
	}
}

// Kill ends the node at once with SIGKILL, as a crash or a power cut
// would: its connections drop, and the other nodes see it go.
func (n *Node) Kill() {
	n.c.t.Helper()
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(ctlTimeout):
		n.c.t.Fatalf("%s did not exit after SIGKILL", n.Name)
	}
}

// Stop stops the node cleanly (rabbitmqctl stop) and waits for it to exit.
func (n *Node) Stop() {
	n.c.t.Helper()
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if err := n.c.run.ctl(n.Name, "stop"); err != nil {
		n.c.t.Fatal(err)
	}
	if done != nil {
		select {
		case <-done:
		case <-time.After(ctlTimeout):
			n.c.t.Fatalf("%s did not exit after rabbitmqctl stop", n.Name)
		}
	}
}

// cleanup kills every node and removes the cluster's directories.
func (c *Cluster) cleanup() {
	for _, n := range c.Nodes {
		n.mu.Lock()
		cmd, done := n.cmd, n.done
		n.mu.Unlock()
		if cmd == nil {
			continue
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			c.t.Errorf("clustertest: %s did not exit after SIGKILL", n.Name)
		}
	}
	if os.Getenv("AGENCY_CLUSTER_KEEP") == "1" {
		c.t.Logf("clustertest: AGENCY_CLUSTER_KEEP=1: the nodes' directories stay in %s", c.dir)
		return
	}
	if err := os.RemoveAll(c.dir); err != nil {
		c.t.Errorf("clustertest: removing %s: %v", c.dir, err)
	}
}
