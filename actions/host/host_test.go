package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/actions/host"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// approval records what the approver was asked and answers with ok.
type approval struct {
	mu    sync.Mutex
	ok    bool
	asked []*agency.Message
}

func (a *approval) approve(ctx context.Context, m *agency.Message) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, m)
	return a.ok
}

func (a *approval) messages() []*agency.Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*agency.Message(nil), a.asked...)
}

// setup puts a host agent with opts and a User agent in a new space, and
// returns the User and a context with a safety-net deadline.
func setup(t *testing.T, opts ...host.Option) (context.Context, *agency.Agent) {
	t.Helper()
	h, err := host.New("Host", opts...)
	if err != nil {
		t.Fatal(err)
	}
	user := agency.MustNewAgent("User")
	sp := space.NewLocal()
	t.Cleanup(func() {
		if err := sp.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	for _, a := range []*agency.Agent{h.Agent(), user} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, user
}

func call[R any](t *testing.T, ctx context.Context, user *agency.Agent, action string, args any) R {
	t.Helper()
	r, err := agency.Call[R](ctx, user, "Host", action, args)
	if err != nil {
		t.Fatalf("%s(%v): %v", action, args, err)
	}
	return r
}

func TestShellCommand(t *testing.T) {
	dir := t.TempDir()
	ctx, user := setup(t, host.Approver((&approval{ok: true}).approve), host.Root(dir))

	res := call[host.ShellResult](t, ctx, user, "shell_command",
		host.ShellArgs{Command: `echo out; echo err >&2; pwd; exit 3`})
	want := host.ShellResult{Stdout: "out\n" + dir + "\n", Stderr: "err\n", ExitCode: 3}
	if res != want {
		t.Errorf("got %+v, want %+v", res, want)
	}

	// Arguments as a model sends them, and a command that succeeds.
	res = call[host.ShellResult](t, ctx, user, "shell_command", json.RawMessage(`{"command":"printf '%s' hi > f.txt && cat f.txt"}`))
	if want := (host.ShellResult{Stdout: "hi"}); res != want {
		t.Errorf("got %+v, want %+v", res, want)
	}

	// The command's stdin is empty: cat does not wait for input.
	res = call[host.ShellResult](t, ctx, user, "shell_command", host.ShellArgs{Command: "cat"})
	if want := (host.ShellResult{}); res != want {
		t.Errorf("cat: got %+v, want %+v", res, want)
	}

	_, err := user.Request(ctx, "Host", "shell_command", host.ShellArgs{})
	if !errors.Is(err, agency.ErrInvalidArgs) {
		t.Errorf("empty command: got %v, want invalid_args", err)
	}
}

func TestShellOutputLimit(t *testing.T) {
	ctx, user := setup(t, host.Approver((&approval{ok: true}).approve), host.MaxBytes(4))
	res := call[host.ShellResult](t, ctx, user, "shell_command", host.ShellArgs{Command: "echo 123456789; echo ab >&2"})
	if want := (host.ShellResult{Stdout: "1234", Stderr: "ab\n", Truncated: true}); res != want {
		t.Errorf("got %+v, want %+v", res, want)
	}
}

func TestShellTimeout(t *testing.T) {
	dir := t.TempDir()
	ctx, user := setup(t, host.Approver((&approval{ok: true}).approve), host.ShellTimeout(100*time.Millisecond), host.Root(dir))
	// "late1" needs sh itself to survive; "late2" is touched by a subshell in
	// the background, which outlives a kill of sh alone: only killing the
	// whole process group stops it. Were it not killed, the file would appear
	// once the sleep ends.
	for _, command := range []string{"sleep 1; touch late1", "(sleep 1; touch late2) & wait"} {
		_, err := user.Request(ctx, "Host", "shell_command", host.ShellArgs{Command: command})
		if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "did not finish within 100ms") {
			t.Fatalf("%s: got %v, want action_failed saying the command did not finish", command, err)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	for _, name := range []string{"late1", "late2"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the command's child outlived the timeout: %v", name, err)
		}
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // without Root, paths are relative to the working directory
	ctx, user := setup(t, host.Approver((&approval{ok: true}).approve))

	got := call[string](t, ctx, user, "write_file", host.WriteArgs{Path: "a/b/notes.txt", Content: "héllo\n"})
	if want := "wrote 7 bytes to a/b/notes.txt"; got != want {
		t.Errorf("write_file: got %q, want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a", "b", "notes.txt")); err != nil || string(b) != "héllo\n" {
		t.Errorf("the file holds %q, %v", b, err)
	}
	// Overwritten, not appended; an absolute path works too.
	call[string](t, ctx, user, "write_file", host.WriteArgs{Path: filepath.Join(dir, "a/b/notes.txt"), Content: "bye"})
	if got := call[string](t, ctx, user, "read_file", host.ReadArgs{Path: "a/b/notes.txt"}); got != "bye" {
		t.Errorf("read_file: got %q, want %q", got, "bye")
	}
	// Empty content is a file too.
	call[string](t, ctx, user, "write_file", json.RawMessage(`{"path":"empty","content":""}`))

	entries := call[[]host.Entry](t, ctx, user, "list_files", host.ListArgs{})
	want := []host.Entry{{Name: "a", Dir: true, Size: entries[0].Size}, {Name: "empty", Size: 0}}
	if len(entries) != 2 || entries[0] != want[0] || entries[1] != want[1] {
		t.Errorf("list_files: got %+v, want %+v", entries, want)
	}
	entries = call[[]host.Entry](t, ctx, user, "list_files", host.ListArgs{Path: "a/b"})
	if len(entries) != 1 || entries[0] != (host.Entry{Name: "notes.txt", Size: 3}) {
		t.Errorf("list_files a/b: got %+v", entries)
	}

	for _, tc := range []struct {
		action string
		args   any
		text   string
	}{
		{"read_file", host.ReadArgs{Path: "missing"}, "no such file"},
		{"read_file", host.ReadArgs{Path: "a"}, "is a directory"},
		{"list_files", host.ListArgs{Path: "empty"}, "not a directory"},
		{"list_files", host.ListArgs{Path: "missing"}, "no such file"},
	} {
		_, err := user.Request(ctx, "Host", tc.action, tc.args)
		if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s(%+v): got %v, want action_failed with %q", tc.action, tc.args, err, tc.text)
		}
	}
	for _, args := range []string{`{}`, `{"path":""}`, `{"path":"x"}`} {
		_, err := user.Request(ctx, "Host", "write_file", json.RawMessage(args))
		if !errors.Is(err, agency.ErrInvalidArgs) {
			t.Errorf("write_file %s: got %v, want invalid_args", args, err)
		}
	}
}

func TestReadLimits(t *testing.T) {
	dir := t.TempDir()
	ctx, user := setup(t, host.Approver((&approval{ok: true}).approve), host.Root(dir), host.MaxBytes(10))
	if err := os.WriteFile(filepath.Join(dir, "ten"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "eleven"), []byte("0123456789a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "binary"), []byte{0xff, 0xfe, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := call[string](t, ctx, user, "read_file", host.ReadArgs{Path: "ten"}); got != "0123456789" {
		t.Errorf("got %q", got)
	}
	_, err := user.Request(ctx, "Host", "read_file", host.ReadArgs{Path: "eleven"})
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "limit of 10 bytes") {
		t.Errorf("eleven bytes: got %v, want action_failed naming the limit", err)
	}
	_, err = user.Request(ctx, "Host", "read_file", host.ReadArgs{Path: "binary"})
	if !errors.Is(err, agency.ErrActionFailed) || !strings.Contains(err.Error(), "not UTF-8") {
		t.Errorf("binary: got %v, want action_failed saying it is not UTF-8", err)
	}
}

// everyAction calls each action once; each would leave a trace in dir.
var everyAction = []struct {
	action string
	args   any
}{
	{"shell_command", host.ShellArgs{Command: "touch shell-ran"}},
	{"read_file", host.ReadArgs{Path: "existing"}},
	{"write_file", host.WriteArgs{Path: "written", Content: "x"}},
	{"list_files", host.ListArgs{Path: "."}},
}

func TestDenied(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(*approval) []host.Option
	}{
		{"no approver", func(*approval) []host.Option { return nil }},
		{"approver says no", func(a *approval) []host.Option { return []host.Option{host.Approver(a.approve)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "existing"), []byte("secret"), 0o644); err != nil {
				t.Fatal(err)
			}
			a := &approval{}
			ctx, user := setup(t, append(tc.opts(a), host.Root(dir))...)
			for _, c := range everyAction {
				r, err := user.Request(ctx, "Host", c.action, c.args)
				if !errors.Is(err, agency.ErrPermissionDenied) {
					t.Errorf("%s: got %v, %v; want permission_denied", c.action, r, err)
				}
			}
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 1 {
				t.Errorf("the directory holds %v (%v); want only the file that was there", entries, err)
			}
			// help still lists them, as requested.
			help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Host", "help", nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(help) != 4 {
				t.Errorf("help lists %d actions, want 4", len(help))
			}
		})
	}
}

func TestApproverSeesTheMessage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "existing"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &approval{ok: true}
	ctx, user := setup(t, host.Approver(a.approve), host.Root(dir))
	for _, c := range everyAction {
		if _, err := user.Request(ctx, "Host", c.action, c.args); err != nil {
			t.Errorf("%s: %v", c.action, err)
		}
	}
	asked := a.messages()
	if len(asked) != len(everyAction) {
		t.Fatalf("the approver was asked %d times, want %d", len(asked), len(everyAction))
	}
	for i, m := range asked {
		c := everyAction[i]
		got, err := json.Marshal(m.Args)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(c.args)
		if m.Action != c.action || m.From != "User" || m.To != "Host" || string(got) != string(want) {
			t.Errorf("asked about %s from %s to %s with %s; want %s from User to Host with %s", m.Action, m.From, m.To, got, c.action, want)
		}
	}
	// Each call did its work.
	for _, name := range []string{"shell-ran", "written"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}

// Arguments that repeat a key would show the approver one command while
// another runs (the last value wins when they are decoded): they are refused
// without asking.
func TestRepeatedKeyRefused(t *testing.T) {
	dir := t.TempDir()
	a := &approval{ok: true}
	ctx, user := setup(t, host.Approver(a.approve), host.Root(dir))
	// The framework refuses such arguments where they enter (agency's codec
	// and Send), so no approver is ever shown a value that does not run.
	_, err := user.Request(ctx, "Host", "shell_command", json.RawMessage(`{"command":"echo harmless","command":"touch pwned"}`))
	if !errors.Is(err, agency.ErrMalformedMessage) {
		t.Errorf("got %v, want ErrMalformedMessage", err)
	}
	if n := len(a.messages()); n != 0 {
		t.Errorf("the approver was asked %d times", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the hidden command ran: %v", err)
	}
	// Distinct keys, and the same key in a nested value, still reach the approver.
	res := call[host.ShellResult](t, ctx, user, "shell_command", json.RawMessage(`{"command":"echo '{\"a\":1,\"a\":2}'"}`))
	if res.Stdout != "{\"a\":1,\"a\":2}\n" || len(a.messages()) != 1 {
		t.Errorf("got %+v after %d questions", res, len(a.messages()))
	}
}

func TestRoot(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "root")
	outside := filepath.Join(parent, "outside")
	for _, d := range []string{filepath.Join(dir, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{
		filepath.Join(dir, "inside.txt"):     "in",
		filepath.Join(outside, "secret.txt"): "secret",
	} {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Links that lead out of the root, to a file and to a directory, and
	// one that stays inside.
	for link, target := range map[string]string{
		filepath.Join(dir, "secret-link"): filepath.Join(outside, "secret.txt"),
		filepath.Join(dir, "out-dir"):     outside,
		filepath.Join(dir, "sub", "up"):   "../inside.txt",
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	ctx, user := setup(t, host.Approver((&approval{ok: true}).approve), host.Root(dir))

	// Inside: relative, through a harmless "..", absolute, through an inner link.
	for _, p := range []string{"inside.txt", "sub/../inside.txt", filepath.Join(dir, "inside.txt"), "sub/up"} {
		if got := call[string](t, ctx, user, "read_file", host.ReadArgs{Path: p}); got != "in" {
			t.Errorf("read_file %q: got %q", p, got)
		}
	}
	entries := call[[]host.Entry](t, ctx, user, "list_files", host.ListArgs{Path: filepath.Join(dir, "sub")})
	if len(entries) != 1 || entries[0].Name != "up" {
		t.Errorf("list_files sub: got %+v", entries)
	}
	call[string](t, ctx, user, "write_file", host.WriteArgs{Path: "new/deep/file.txt", Content: "x"})
	if _, err := os.Stat(filepath.Join(dir, "new", "deep", "file.txt")); err != nil {
		t.Error(err)
	}

	// Outside: by "..", by an absolute path, by links.
	for _, c := range []struct {
		action string
		args   any
	}{
		{"read_file", host.ReadArgs{Path: "../outside/secret.txt"}},
		{"read_file", host.ReadArgs{Path: "sub/../../outside/secret.txt"}},
		{"read_file", host.ReadArgs{Path: filepath.Join(outside, "secret.txt")}},
		{"read_file", host.ReadArgs{Path: "secret-link"}},
		{"read_file", host.ReadArgs{Path: "out-dir/secret.txt"}},
		{"list_files", host.ListArgs{Path: ".."}},
		{"list_files", host.ListArgs{Path: "out-dir"}},
		{"list_files", host.ListArgs{Path: outside}},
		{"write_file", host.WriteArgs{Path: "../escaped.txt", Content: "x"}},
		{"write_file", host.WriteArgs{Path: "out-dir/escaped.txt", Content: "x"}},
		{"write_file", host.WriteArgs{Path: "out-dir/deeper/escaped.txt", Content: "x"}},
		{"write_file", host.WriteArgs{Path: "secret-link", Content: "overwritten"}},
		{"write_file", host.WriteArgs{Path: filepath.Join(outside, "escaped.txt"), Content: "x"}},
	} {
		r, err := user.Request(ctx, "Host", c.action, c.args)
		if !errors.Is(err, agency.ErrActionFailed) ||
			!strings.Contains(err.Error(), "outside the root") && !strings.Contains(err.Error(), "escapes from parent") {
			t.Errorf("%s(%+v): got %v, %v; want action_failed saying the path leaves the root", c.action, c.args, r, err)
		} else if testing.Verbose() {
			t.Logf("%s(%+v): %v", c.action, c.args, err)
		}
	}
	entries2, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries2) != 1 {
		t.Errorf("outside the root now holds %v", entries2)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != "secret" {
		t.Errorf("the file outside holds %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(parent, "escaped.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was written beside the root: %v", err)
	}
}

// TestHelp checks that every action and every argument is described, as a
// model needs to use them.
func TestHelp(t *testing.T) {
	ctx, user := setup(t)
	help, err := agency.Call[map[string]agency.ActionHelp](ctx, user, "Host", "help", nil)
	if err != nil {
		t.Fatal(err)
	}
	required := map[string][]string{
		"shell_command": {"command"},
		"read_file":     {"path"},
		"write_file":    {"path", "content"},
		"list_files":    nil,
	}
	for action, req := range required {
		h, ok := help[action]
		if !ok {
			t.Errorf("help lacks %s", action)
			continue
		}
		if h.Access != "requested" || h.Description == "" || len(h.Returns) == 0 || len(h.Examples) == 0 {
			t.Errorf("%s: access %q, description %q, returns %s, %d examples", action, h.Access, h.Description, h.Returns, len(h.Examples))
		}
		var schema struct {
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(h.Args, &schema); err != nil {
			t.Fatal(err)
		}
		if len(schema.Properties) == 0 {
			t.Errorf("%s: no properties in %s", action, h.Args)
		}
		for name, p := range schema.Properties {
			if p.Description == "" {
				t.Errorf("%s: argument %s has no description", action, name)
			}
		}
		if strings.Join(schema.Required, ",") != strings.Join(req, ",") {
			t.Errorf("%s: required %v, want %v", action, schema.Required, req)
		}
	}
	if len(help) != len(required) {
		t.Errorf("help lists %d actions, want %d", len(help), len(required))
	}
	if !strings.Contains(string(help["shell_command"].Args), `"minLength":1`) {
		t.Errorf("shell_command's command may be empty: %s", help["shell_command"].Args)
	}
}

func TestOptions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	approve := func(context.Context, *agency.Message) bool { return true }
	for name, opts := range map[string][]host.Option{
		"Approver(nil)":   {host.Approver(nil)},
		"Approver twice":  {host.Approver(approve), host.Approver(approve)},
		"Root missing":    {host.Root(filepath.Join(t.TempDir(), "missing"))},
		"Root a file":     {host.Root(file)},
		"Root twice":      {host.Root(t.TempDir()), host.Root(t.TempDir())},
		"ShellTimeout(0)": {host.ShellTimeout(0)},
		"ShellTimeout x2": {host.ShellTimeout(time.Second), host.ShellTimeout(time.Second)},
		"MaxBytes(-1)":    {host.MaxBytes(-1)},
		"MaxBytes twice":  {host.MaxBytes(1), host.MaxBytes(1)},
		"nil option":      {nil},
	} {
		if _, err := host.New("Host", opts...); !errors.Is(err, agency.ErrInvalidOption) {
			t.Errorf("%s: got %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := host.New("a b"); !errors.Is(err, agency.ErrInvalidID) {
		t.Errorf("bad id: got %v, want ErrInvalidID", err)
	}
}
