package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
)

// killEnv carries to a child process of TestKillAtEachInstant its
// arguments and the instant at which it kills itself.
const killEnv = "PLANS_KILL_CHILD"

type killSpec struct {
	Args []string `json:"args"`
	At   string   `json:"at"` // one of killPoints, or "" to run until stopped
}

// killPoints are the instants of a step's run, around the transactions
// that make it, at which the child kills itself with SIGKILL:
//
//   - after-claim: the step's key is claimed for the run, the handler has
//     not run;
//   - before-effect: the handler has run and its effect is about to be
//     written;
//   - after-effect: the effect is written, the answer not sent.
var killPoints = []string{"after-claim", "before-effect", "after-effect"}

// killer is the store of a child: at its instant it kills the process, as
// a power cut would.
type killer struct {
	store.Store
	at string
}

func (k *killer) Apply(ctx context.Context, c store.Changes) error {
	effect, claim := false, false
	for _, d := range c.Put {
		switch {
		case d.Kind == kindRecord:
			effect = true
		case d.Kind == "plan_idempotency" && d.Version == 0:
			claim = true
		}
	}
	if effect && k.at == "before-effect" {
		die()
	}
	err := k.Store.Apply(ctx, c)
	if err == nil && ((effect && k.at == "after-effect") || (claim && k.at == "after-claim")) {
		die()
	}
	return err
}

func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// TestKillChild is the program in a child process of TestKillAtEachInstant.
func TestKillChild(t *testing.T) {
	env := os.Getenv(killEnv)
	if env == "" {
		t.Skip("runs as a child of TestKillAtEachInstant")
	}
	var spec killSpec
	if err := json.Unmarshal([]byte(env), &spec); err != nil {
		t.Fatal(err)
	}
	if spec.At != "" {
		wrapStore = func(st store.Store) store.Store { return &killer{Store: st, at: spec.At} }
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := run(ctx, spec.Args, os.Stdout, os.Stderr); err != nil {
		t.Fatal(err)
	}
}

// child is a run of the program in a process of its own.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, spec killSpec) *child {
	t.Helper()
	env, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killEnv+"="+string(env))
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c
}

// base waits for the child's "listening on" line and returns its URL.
func (c *child) base(t *testing.T) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatal("the program ended before it listened")
			}
			if u, ok := strings.CutPrefix(l, "listening on "); ok {
				return u
			}
		case <-deadline:
			t.Fatal("the program did not listen")
		}
	}
}

// killed waits for the child to end and checks that it killed itself.
func (c *child) killed(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the program did not reach the instant it was to die at")
	}
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the program ended with %v, not killed at its instant", c.cmd.ProcessState)
	}
}

// stop ends the child as an operator would (SIGTERM) and waits for it.
func (c *child) stop(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
}

// planSteps polls GET /plans until f holds for the session's plan. It
// gives up after 20 s, less than the 30 s a claim of a run holds its key:
// a restart that waited for the claim of the process it replaced fails.
func planSteps(t *testing.T, base, what string, f func(steps []map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest("GET", base+"/plans?session_id=s1", nil)
		req.Header.Set("x-ms-client-principal-id", "u1")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			var plans []struct {
				ID    string           `json:"id"`
				Steps []map[string]any `json:"steps"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&plans)
			resp.Body.Close()
			if len(plans) == 1 && f(plans[0].Steps) {
				for _, s := range plans[0].Steps {
					s["plan_id"] = plans[0].ID
				}
				return plans[0].Steps
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited in vain for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func post(base, path, body string) {
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("x-ms-client-principal-id", "u1")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil { // the answer may be lost with the process
		resp.Body.Close()
	}
}

// The README's promise under SIGKILL: the program is killed at each
// instant of step 1's run (after its key is claimed, before and after its
// effect is written) and started again on the same store; step 1
// completes, and its effect, a record in the store, is there once. On
// SQLite and on PostgreSQL, with a lease of a second so that the step is
// sent again soon after the restart.
func TestKillAtEachInstant(t *testing.T) {
	stores := map[string]func(t *testing.T) (args []string, open func() (store.Store, error)){
		"SQLite": func(t *testing.T) ([]string, func() (store.Store, error)) {
			path := filepath.Join(t.TempDir(), "p.db")
			return []string{"-db", path}, func() (store.Store, error) { return sqlitestore.Open(t.Context(), path) }
		},
		"PostgreSQL": func(t *testing.T) ([]string, func() (store.Store, error)) {
			dsn := pgtest.DSN(t)
			t.Setenv("DATABASE_URL", dsn) // -pg reads it, in the child too
			return []string{"-pg"}, func() (store.Store, error) { return pgstore.Open(t.Context(), dsn) }
		},
	}
	for _, name := range []string{"SQLite", "PostgreSQL"} {
		for _, at := range killPoints {
			t.Run(name+"/"+at, func(t *testing.T) {
				modelServer(t)
				dbArgs, open := stores[name](t)
				args := append(dbArgs, "-addr", "127.0.0.1:0", "-user", "u1", "-lease", "1s", "-wait", "0")

				first := startChild(t, killSpec{Args: args, At: at})
				base := first.base(t)
				post(base, "/input_task", `{"session_id":"s1","description":"Onboard Jessica Smith"}`)
				steps := planSteps(t, base, "the plan's steps", func(s []map[string]any) bool {
					return len(s) == 2 && s[0]["status"] == "awaiting_feedback"
				})
				step := steps[0]["id"].(string)
				post(base, "/approve_step_or_steps", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, step, steps[0]["plan_id"]))
				first.killed(t)

				second := startChild(t, killSpec{Args: args})
				base = second.base(t)
				planSteps(t, base, "step 1 completed after the restart", func(s []map[string]any) bool {
					return len(s) == 2 && s[0]["status"] == "completed"
				})
				st, err := open()
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				recs, err := st.List(t.Context(), store.Query{Kind: kindRecord, Parent: step})
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) != 1 {
					var bodies []string
					for _, r := range recs {
						bodies = append(bodies, string(r.Body))
					}
					t.Errorf("killed %s: step 1's effect is in the store %d times, want once: %v", at, len(recs), bodies)
				}
				second.stop(t)
			})
		}
	}
}
