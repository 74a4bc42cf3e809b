package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/internal/testenv"
)

// exe is the agency command, built once for the tests, which run it as a
// person or a script would.
var exe string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agency-cmd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exe = filepath.Join(dir, "agency")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the agency command:", err)
		os.Exit(1)
	}
	// The slow tests wait on the command's processes and the broker, each
	// test on an exchange of its own: four at a time.
	testenv.WaitingTests(4)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// result is what a run of the command printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// agencyCmd returns the command with args, its environment naming url (no
// AMQP_* of the test's own environment leaks in).
func agencyCmd(ctx context.Context, url string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, exe, args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AMQP_") {
			env = append(env, kv)
		}
	}
	if url != "" {
		env = append(env, "AMQP_URL="+url)
	}
	cmd.Env = env
	return cmd
}

// runAgency runs the command to its end.
func runAgency(t *testing.T, url string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := agencyCmd(ctx, url, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agency %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// addArgs are the arguments of the test Calculator's add.
type addArgs struct {
	A float64 `json:"a" jsonschema:"description=first addend"`
	B float64 `json:"b" jsonschema:"description=second addend"`
}

// calcSpace serves, on an exchange of the test's own, a calculator (with
// an id of its own, since ids are unique on the whole vhost) with add, a
// denied action, one that fails and one that takes its time. It returns
// the broker's URL, the exchange and the calculator's id.
func calcSpace(t *testing.T) (url, exchange, calcID string) {
	t.Helper()
	url = amqptest.URL(t)
	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url})
	calcID = amqptest.Name("Calc")
	calc := agency.MustNewAgent(calcID)
	agency.Handle(calc, "add", func(ctx context.Context, args addArgs) (float64, error) {
		return args.A + args.B, nil
	}, agency.Describe("Adds two numbers"), agency.Returns("the sum"), agency.Example(addArgs{A: 1, B: 2}))
	agency.Handle(calc, "reset", func(ctx context.Context, args struct{}) (string, error) {
		return "reset", nil
	}, agency.Describe("Resets the memory"), agency.AccessFunc(func(m *agency.Message) agency.Access {
		if strings.HasPrefix(m.From, "agency-cli.") {
			return agency.Requested // and it has no approver: denied
		}
		return agency.Permitted
	}))
	agency.Handle(calc, "divide", func(ctx context.Context, args struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}) (float64, error) {
		if args.B == 0 {
			return 0, agency.ActionFailedf("division by zero: give a b other than 0")
		}
		return args.A / args.B, nil
	}, agency.Describe("Divides a by b"))
	agency.Handle(calc, "sleep", func(ctx context.Context, args struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, agency.Describe("Waits until the caller stops waiting"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sp.Add(ctx, calc); err != nil {
		t.Fatal(err)
	}
	return url, sp.Exchange(), calcID
}

// interrupt is how a person stops a command: Ctrl-C.
var interrupt = os.Interrupt
