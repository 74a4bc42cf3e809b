package testenv

import (
	"bytes"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Long skips a test unless AGENCY_LONG_TESTS turns it on.
func TestLong(t *testing.T) {
	for _, c := range []struct {
		env  string
		runs bool
	}{{"", false}, {"0", false}, {"1", !testing.Short()}, {"true", !testing.Short()}} {
		t.Setenv(LongEnv, c.env)
		var ran bool
		t.Run("env="+c.env, func(t *testing.T) {
			Long(t)
			ran = true
		})
		if ran != c.runs {
			t.Errorf("%s=%q: the long test ran: %v, want %v", LongEnv, c.env, ran, c.runs)
		}
	}
}

type buffer struct{ bytes.Buffer }

func (*buffer) Close() error { return nil }

// Note writes one line per what, and nothing with -v.
func TestNote(t *testing.T) {
	var out buffer
	defer func(v func() bool, o func() (io.WriteCloser, error)) { verbose, output = v, o }(verbose, output)
	output = func() (io.WriteCloser, error) { return &out, nil }

	verbose = func() bool { return true }
	Note("skipping the tests that need X", "no X at x://here")
	if out.Len() != 0 {
		t.Fatalf("with -v, Note wrote %q", out.String())
	}
	verbose = func() bool { return false }
	for range 3 {
		Note("skipping the tests that need Y", "no Y at y://here")
	}
	Note("skipping the tests that need Z", "no Z at z://here")
	want := "testenv: skipping the tests that need Y: no Y at y://here\n" +
		"testenv: skipping the tests that need Z: no Z at z://here\n"
	if got := out.String(); got != want {
		t.Errorf("Note wrote %q, want %q", got, want)
	}
}

// fakeProc makes a /proc with a parent named comm whose standard output is
// target, opened with the given flags (octal, as in fdinfo).
func fakeProc(t *testing.T, comm, target, flags string) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "4242")
	for _, d := range []string{"fd", "fdinfo"} {
		if err := os.MkdirAll(filepath.Join(p, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(p, "comm"), []byte(comm+"\n"), 0o644))
	must(t, os.Symlink(target, filepath.Join(p, "fd", "1")))
	must(t, os.WriteFile(filepath.Join(p, "fdinfo", "1"), []byte("pos:\t0\nflags:\t"+flags+"\nmnt_id:\t1\n"), 0o644))
	oldDir, oldParent := procDir, parent
	procDir, parent = dir, func() int { return 4242 }
	t.Cleanup(func() { procDir, parent = oldDir, oldParent })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The note goes to the go command's standard output when that is a pipe,
// or a file it appends to; not to a file it writes at its own offset, nor
// to a parent that is not the go command.
func TestGoStdout(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	t.Run("pipe", func(t *testing.T) {
		r, w, err := os.Pipe()
		must(t, err)
		defer r.Close()
		defer w.Close()
		fakeProc(t, "go", "/proc/self/fd/"+strconv.Itoa(int(w.Fd())), "01")
		out, err := goStdout()
		if err != nil {
			t.Fatalf("goStdout: %v", err)
		}
		_, _ = io.WriteString(out, "a note\n")
		out.Close()
		w.Close()
		got, _ := io.ReadAll(r)
		if string(got) != "a note\n" {
			t.Errorf("the pipe got %q", got)
		}
	})
	t.Run("file appended to", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "log")
		must(t, os.WriteFile(f, []byte("ok  \tearlier\n"), 0o644))
		fakeProc(t, "go", f, "0102001")
		out, err := goStdout()
		if err != nil {
			t.Fatalf("goStdout: %v", err)
		}
		_, _ = io.WriteString(out, "a note\n")
		out.Close()
		if got, _ := os.ReadFile(f); string(got) != "ok  \tearlier\na note\n" {
			t.Errorf("the file holds %q", got)
		}
	})
	t.Run("file not appended to", func(t *testing.T) {
		fakeProc(t, "go", filepath.Join(t.TempDir(), "log"), "0100001")
		if _, err := goStdout(); err == nil {
			t.Error("goStdout opened a file that the go command writes at its own offset")
		}
	})
	t.Run("not the go command", func(t *testing.T) {
		r, w, err := os.Pipe()
		must(t, err)
		defer r.Close()
		defer w.Close()
		fakeProc(t, "bash", "/proc/self/fd/"+strconv.Itoa(int(w.Fd())), "01")
		if _, err := goStdout(); err == nil {
			t.Error("goStdout opened the standard output of a parent that is not the go command")
		}
	})
}

// TestNoteHelper writes a note when TESTENV_NOTE_HELPER is set; it is what
// TestNoteShownByGoTest runs.
func TestNoteHelper(t *testing.T) {
	if os.Getenv("TESTENV_NOTE_HELPER") == "" {
		t.Skip("run by TestNoteShownByGoTest")
	}
	Note("skipping the tests that need a service", "none answers")
	t.Skip("no service")
}

// go test ./... without -v, its output a pipe (as under tee, an editor or a
// CI runner), shows the note of a package whose tests all skipped.
func TestNoteShownByGoTest(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the note reaches a pipe through /proc, on Linux only")
	}
	if testing.Short() {
		t.Skip("builds and runs a test binary")
	}
	// go test puts its own go first on the PATH of the tests it runs.
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestNoteHelper$", "github.com/seed72275b23/agency-go/internal/testenv")
	cmd.Env = append(os.Environ(), "TESTENV_NOTE_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	want := "testenv: skipping the tests that need a service: none answers\n"
	if !strings.Contains(string(out), want) || strings.Count(string(out), want) != 1 {
		t.Errorf("go test printed\n%s\nwant one line %q", out, want)
	}
	if !strings.Contains(string(out), "ok  \tgithub.com/seed72275b23/agency-go/internal/testenv") {
		t.Errorf("go test printed\n%s\nwant the package's ok line", out)
	}
}

// Program builds a program once per test binary, and RemovingPrograms
// removes it once the tests have run.
func TestProgram(t *testing.T) {
	bin := Program(t, "./testdata/hello")
	if again := Program(t, "./testdata/hello"); again != bin {
		t.Errorf("a second Program built %s again, as %s", bin, again)
	}
	if plain := ProgramNoRace(t, "./testdata/hello"); RaceEnabled() == (plain == bin) {
		t.Errorf("ProgramNoRace gave %s, Program %s, with the race detector %v", plain, bin, RaceEnabled())
	}
	out, err := exec.Command(bin).Output()
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("the program printed %q, %v", out, err)
	}
	ran := false
	if code := RemovingPrograms(runner(func() int { ran = true; return 3 })).Run(); code != 3 || !ran {
		t.Errorf("RemovingPrograms's Run returned %d (ran: %v), want the tests' 3", code, ran)
	}
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Errorf("after the tests, the program is still there: %v", err)
	}
}

type runner func() int

func (r runner) Run() int { return r() }

// WaitingTests raises -parallel, unless the command line set it.
func TestWaitingTests(t *testing.T) {
	f := flag.Lookup("test.parallel")
	before := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(before) })
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	want := before
	if !set && runtime.GOMAXPROCS(0) < 1000 {
		want = "1000"
	}
	WaitingTests(1000)
	if got := f.Value.String(); got != want {
		t.Errorf("-parallel is %s after WaitingTests(1000), want %s (set on the command line: %v)", got, want, set)
	}
}
