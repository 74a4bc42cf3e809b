// Package testenv holds what the module's tests share about where they run:
// the one switch that turns on the long tests, the note a package writes
// when its tests skip for want of a service (RabbitMQ, PostgreSQL), the
// helper programs that multi-process tests build once per test binary, and
// how many tests that only wait run at once.
//
// Long tests (10,000 agents, re-subscription under load, soak, kill loops)
// call Long first; they run only with AGENCY_LONG_TESTS=1, which .ci/run
// sets:
//
//	AGENCY_LONG_TESTS=1 go test ./...
package testenv

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// LongEnv is the environment variable that turns the long tests on.
const LongEnv = "AGENCY_LONG_TESTS"

// LongEnabled reports whether the long tests run: AGENCY_LONG_TESTS is 1
// (or true) and go test was not given -short.
func LongEnabled() bool {
	if testing.Short() {
		return false
	}
	v, _ := strconv.ParseBool(os.Getenv(LongEnv))
	return v
}

// Long skips t unless the long tests run (see LongEnabled).
func Long(t testing.TB) {
	t.Helper()
	if !LongEnabled() {
		t.Skip("a long test: " + LongEnv + "=1 runs it")
	}
}

// CI reports whether CI is "true": a missing service fails the tests that
// need it instead of skipping them.
func CI() bool { return os.Getenv("CI") == "true" }

// Variables, for this package's tests.
var (
	notes   sync.Map // what → struct{}: the notes already written
	verbose = testing.Verbose
	output  = Output
	parent  = os.Getppid
	procDir = "/proc"
	command = func() string { return filepath.Base(os.Args[0]) }
)

// Note writes one line, "PACKAGE: what: msg", where go test shows it, once
// per test binary for each what, so that a run of go test ./... that skips
// tests for want of a service says so, once per package. With -v (and
// -json) it writes nothing: go test shows the skip messages themselves.
func Note(what, msg string) {
	if verbose() {
		return
	}
	if _, done := notes.LoadOrStore(what, struct{}{}); done {
		return
	}
	w, err := output()
	if err != nil {
		return // nowhere to write: the skip messages remain, with -v
	}
	defer w.Close()
	fmt.Fprintf(w, "%s: %s: %s\n", strings.TrimSuffix(command(), ".test"), what, msg)
}

// Output opens where go test shows a line from a passing package's test
// binary. go test ./... keeps the output of a passing package to itself
// unless -v, even what TestMain prints, so the line goes to the standard
// output of the go command that started the binary, where go test prints
// its own "ok" lines: a terminal, a pipe (| tee, an editor, a CI log) or a
// file opened for appending. Where that cannot be done (another system, a
// file the go command writes at its own offset, a parent that is not the
// go command) it is the terminal, if there is one.
func Output() (io.WriteCloser, error) {
	if w, err := goStdout(); err == nil {
		return w, nil
	}
	return os.OpenFile("/dev/tty", os.O_WRONLY, 0)
}

// goStdout opens the standard output of the go command that runs this test
// binary, through /proc.
func goStdout() (io.WriteCloser, error) {
	if runtime.GOOS != "linux" && runtime.GOOS != "android" {
		return nil, fmt.Errorf("no /proc on %s", runtime.GOOS)
	}
	dir := filepath.Join(procDir, strconv.Itoa(parent()))
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(comm)) != "go" {
		return nil, fmt.Errorf("the parent is %q, not the go command", strings.TrimSpace(string(comm)))
	}
	fd := filepath.Join(dir, "fd", "1")
	fi, err := os.Stat(fd)
	if err != nil {
		return nil, err
	}
	switch mode := fi.Mode(); {
	case mode&(os.ModeNamedPipe|os.ModeCharDevice) != 0:
	case mode.IsRegular():
		// A file of our own opening has an offset of its own: unless the
		// go command appends too, its next line would overwrite ours.
		if !appending(filepath.Join(dir, "fdinfo", "1")) {
			return nil, fmt.Errorf("go test writes to a file it does not append to")
		}
	default:
		return nil, fmt.Errorf("go test writes to a %v", mode.Type())
	}
	return os.OpenFile(fd, os.O_WRONLY|os.O_APPEND, 0)
}

// appending reports whether the file descriptor that fdinfo describes was
// opened with O_APPEND.
func appending(fdinfo string) bool {
	b, err := os.ReadFile(fdinfo)
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&uint64(os.O_APPEND) != 0
		}
	}
	return false
}

// WaitingTests lets a package's parallel tests run n at a time, not one
// per CPU, unless the command line sets -parallel: for tests that spend
// their time waiting on a broker, on other processes or on deadlines, not
// on the CPU. TestMain calls it before m.Run.
func WaitingTests(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && runtime.GOMAXPROCS(0) < n {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// Programs built by Program, by package and race detector, and the
// directory that holds them, which removePrograms removes.
var programs struct {
	sync.Mutex
	dir   string
	built map[string]string
}

// Program builds the main package pkg (a path as go build takes it, from
// the test's package directory), with the race detector when the test
// binary has it, and returns the program's path. It builds each once per
// test binary: the tests that run the program share it, instead of each
// linking a binary of its own. TestMain removes them (RemovingPrograms).
// Without a go command the test skips.
func Program(t testing.TB, pkg string) string {
	t.Helper()
	return program(t, pkg, RaceEnabled())
}

// ProgramNoRace is Program without the race detector, for a program
// whose own speed or memory the test measures.
func ProgramNoRace(t testing.TB, pkg string) string {
	t.Helper()
	return program(t, pkg, false)
}

func program(t testing.TB, pkg string, race bool) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to build %s: %v", pkg, err)
	}
	programs.Lock()
	defer programs.Unlock()
	key := fmt.Sprintf("%s race=%v", pkg, race)
	if bin, ok := programs.built[key]; ok {
		return bin
	}
	if programs.dir == "" {
		dir, err := os.MkdirTemp("", "agency-test-programs-")
		if err != nil {
			t.Fatal(err)
		}
		programs.dir, programs.built = dir, map[string]string{}
	}
	bin := filepath.Join(programs.dir, strconv.Itoa(len(programs.built)), filepath.Base(pkg))
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
	}
	programs.built[key] = bin
	return bin
}

// Runner is what TestMain runs: a *testing.M, or what wraps one.
type Runner interface{ Run() int }

// RemovingPrograms returns m, made to remove what Program built once its
// tests have run; for TestMain, as in
// goleak.VerifyTestMain(testenv.RemovingPrograms(m)).
func RemovingPrograms(m Runner) Runner { return removing{m} }

type removing struct{ m Runner }

func (r removing) Run() int {
	defer removePrograms()
	return r.m.Run()
}

// removePrograms removes what Program built.
func removePrograms() {
	programs.Lock()
	defer programs.Unlock()
	if programs.dir != "" {
		_ = os.RemoveAll(programs.dir)
		programs.dir, programs.built = "", nil
	}
}

// RaceEnabled reports whether the test binary was built with the race
// detector.
func RaceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
