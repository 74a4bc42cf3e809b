package sqlitestore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/agency"
)

// childEnv names the file a child process works on; set, the test binary
// is a child (see TestChildProcess).
const childEnv = "SQLITESTORE_TEST_CHILD_FILE"

// counterTarget is the version the processes race the counter up to.
const counterTarget = 150

// TestSeveralProcesses runs three processes on one file: they race a
// counter up by compare-and-set, then claim the outbox in small batches
// and mark what they claimed sent. Each version is won by one write, each
// entry claimed by one process, and the entries to each recipient in the
// order queued.
func TestSeveralProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	st := open(t, path)
	c := store.Changes{Put: []store.Doc{{Kind: "counter", ID: "c", Body: []byte(`0`)}}}
	const entries, recipients = 300, 10
	for i := range entries {
		o, err := store.NewOutgoing("Coordinator", &agency.Message{To: fmt.Sprintf("Agent%d", i%recipients), Action: "run", Args: map[string]int{"n": i}})
		if err != nil {
			t.Fatal(err)
		}
		c.Send = append(c.Send, o)
	}
	if err := st.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	st.Close()

	const procs = 3
	outs := make([]bytes.Buffer, procs)
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), childEnv+"="+path)
		cmds[i].Stdout = &outs[i]
		cmds[i].Stderr = &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i].String())
		}
	}
	wins := make(map[int]int)
	claimed := make(map[int64]int)
	perProc := make([]string, procs)
	for i := range outs {
		var w, c int
		sc := bufio.NewScanner(&outs[i])
		for sc.Scan() {
			var n int64
			if _, err := fmt.Sscanf(sc.Text(), "won %d", &n); err == nil {
				wins[int(n)]++
				w++
			} else if _, err := fmt.Sscanf(sc.Text(), "claimed %d", &n); err == nil {
				claimed[n]++
				c++
			}
		}
		perProc[i] = fmt.Sprintf("%d writes won, %d entries claimed", w, c)
	}
	for v := 1; v <= counterTarget; v++ {
		if wins[v] != 1 {
			t.Errorf("version %d won by %d writes, want 1", v, wins[v])
		}
	}
	if len(claimed) != entries {
		t.Errorf("%d entries claimed, want %d", len(claimed), entries)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("entry %d claimed %d times", id, n)
		}
	}
	t.Logf("per process: %q", perProc)
}

// TestChildProcess is the work of one process of TestSeveralProcesses.
func TestChildProcess(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("runs as a child of TestSeveralProcesses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		d, err := st.Get(ctx, "counter", "c")
		if err != nil {
			t.Fatal(err)
		}
		if d.Version > counterTarget {
			break
		}
		n, _ := strconv.Atoi(string(d.Body))
		d.Body = []byte(strconv.Itoa(n + 1))
		err = st.Apply(ctx, store.Changes{Put: []store.Doc{d}})
		if err == nil {
			fmt.Printf("won %d\n", d.Version)
		} else if !errors.Is(err, store.ErrConflict) {
			t.Fatal(err)
		}
	}
	for {
		got, err := st.Claim(ctx, "Coordinator", 4, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			return
		}
		ids := make([]int64, len(got))
		for i, o := range got {
			fmt.Printf("claimed %d\n", o.ID)
			ids[i] = o.ID
		}
		if err := st.Sent(ctx, ids...); err != nil {
			t.Fatal(err)
		}
	}
}
