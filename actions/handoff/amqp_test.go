package handoff

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/internal/testenv"
)

// peerTimeout bounds each wait for the peer process: a safety net.
const peerTimeout = 90 * time.Second

// buildPeer returns the program of internal/peer, built once for the
// test binary, with the race detector when it has it.
func buildPeer(t *testing.T) string {
	t.Helper()
	return testenv.Program(t, "./internal/peer")
}

// peerReport is what the peer's agents received (internal/peer's report).
type peerReport struct {
	Accepted []Event      `json:"accepted"`
	Made     []Event      `json:"made"`
	Shop     []peerCall   `json:"shop"`
	Shown    []human.Line `json:"shown"`
	Asked    []human.Line `json:"asked"`
}

type peerCall struct {
	Action, Args, Conversation string
}

// The seed's conversation with its agents split over two processes on
// RabbitMQ: Triage and the user here, Refunds, Sales, the person and the
// shop in a peer process. Each handoff is a message across the broker,
// with everything the conversation needs; the scripted models receive
// what they receive in one process.
func TestSupportAcrossProcesses(t *testing.T) {
	url := amqptest.URL(t)
	bin := buildPeer(t)
	ex := amqptest.Exchange(t)
	sp := amqptest.NewSpace(t, amqpspace.Config{URL: url, Exchange: ex})
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	sfx := strings.TrimPrefix(amqptest.Name(""), "-")
	id := func(name string) string { return name + "-" + sfx }

	triageSrv, refundSrv, salesSrv := openaitest.NewServer(t), openaitest.NewServer(t), openaitest.NewServer(t)
	triageSrv.Add(textStep(triage1), calls1("transfer_to_issues_and_repairs", "{}"), calls1("escalate_to_human", "{}"))
	refundSrv.Add(textStep(refunds1), textStep(refunds2),
		calls1(id("Shop")+"__look_up_item", `{"search_query":"shoes"}`),
		calls1(id("Shop")+"__execute_refund", `{"item_id":"item_132612938","reason":"not provided"}`),
		textStep(refunds5), textStep(refunds6), calls1("transfer_back_to_triage", "{}"))

	// The peer, with its stdout read line by line.
	cmd := exec.Command(bin, "-url", url, "-exchange", ex, "-suffix", sfx, "-refunds-url", refundSrv.URL, "-sales-url", salesSrv.URL,
		"-operator", "Hello this is manager|Thanks.")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range lines {
		}
	})
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the peer ended: %v", <-exited)
			}
			return l
		case <-time.After(peerTimeout):
			t.Fatal("the peer printed nothing")
		}
		return ""
	}
	if l := next(); l != "ready" {
		t.Fatalf("the peer printed %q", l)
	}

	events := newRecorder()
	team := &Team{UserID: id("User"), Options: []Option{DefaultAfterWork(RevertToUser()), MaxHops(6), Observe(events)},
		Members: []string{id("Refunds"), id("Sales"), id("Human")},
		LLM: []openai.Option{openai.APIKey("test-key"), openai.BaseURL(triageSrv.URL), openai.HTTPClient(triageSrv.Client()),
			openai.Retries(0, 0), openai.CallTimeout(peerTimeout)}}
	triage, err := team.Agent(id("Triage"), triagePrompt,
		OnLLM(To(id("Refunds")), "Use for issues, repairs, or refunds.", Name("transfer_to_issues_and_repairs")),
		OnLLM(To(id("Sales")), "Use for anything sales or buying related.", Name("transfer_to_sales_agent")),
		OnLLM(To(id("Human")), "Only call this if explicitly asked to.", Name("escalate_to_human")))
	if err != nil {
		t.Fatal(err)
	}
	screen := human.NewScript(append(slices.Clone(userLines), "exit")...)
	user, err := human.NewUser(id("User"), screen, human.StartWith(id("Triage")), human.Conversation("c1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*agency.Agent{triage.Agent(), user.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := user.Run(ctx); err != nil {
		t.Fatal(err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rep peerReport
	if err := json.Unmarshal([]byte(next()), &rep); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "closed" {
		t.Fatalf("the peer printed %q", l)
	}

	want := []string{
		id("Triage") + ": " + triage1, id("Refunds") + ": " + refunds1, id("Refunds") + ": " + refunds2, id("Refunds") + ": " + refunds5,
		id("Refunds") + ": " + refunds6, id("Human") + ": Hello this is manager", id("Human") + ": Thanks.",
	}
	if got := shown(screen); !slices.Equal(got, want) {
		t.Errorf("the user was shown\n%q\nwant\n%q", got, want)
	}
	tr := triageSrv.Requests()
	if len(tr) != 3 || !slices.Equal(toolNames(tr[0]), []string{"transfer_to_issues_and_repairs", "transfer_to_sales_agent", "escalate_to_human"}) ||
		tr[0].ParallelToolCalls == nil || *tr[0].ParallelToolCalls {
		t.Errorf("Triage's requests: %d, tools %v", len(tr), toolNames(tr[0]))
	}
	// The handoffs: Refunds took over in the peer with hops 1, the
	// person with hops 2; Triage took the conversation back here.
	if len(rep.Accepted) != 2 || rep.Accepted[0].To != id("Refunds") || rep.Accepted[0].Hops != 1 ||
		!slices.Equal(rep.Accepted[0].Path, []string{id("Triage")}) || rep.Accepted[0].From != id("Triage") ||
		rep.Accepted[1].To != id("Human") || rep.Accepted[1].Hops != 2 || !slices.Equal(rep.Accepted[1].Path, []string{id("Refunds"), id("Triage")}) {
		t.Errorf("the peer's agents took over %+v", rep.Accepted)
	}
	if acc := events.of(EventAccepted); len(acc) != 1 || acc[0].From != id("Refunds") || acc[0].To != id("Triage") {
		t.Errorf("Triage took over %+v", acc)
	}
	rr := refundSrv.Requests()
	if len(rr) != 7 {
		t.Fatalf("Refunds' model got %d requests", len(rr))
	}
	wantR1 := []msg{
		{role: "user", name: id("User"), content: "I want a refund"},
		{role: "assistant", name: id("Triage"), content: triage1},
		{role: "user", name: id("User"), content: "A pair of shoes I bought"},
		{role: "assistant", name: id("Triage"), call: "transfer_to_issues_and_repairs"},
		{role: "tool", content: "Transferred to " + id("Refunds") + ". Adopt persona immediately.", callID: "tool"},
	}
	if got := messages(rr[0]); !slices.Equal(got, wantR1) {
		t.Errorf("Refunds' request 1:\n%+v\nwant\n%+v", got, wantR1)
	}
	for _, m := range messages(tr[2]) {
		if strings.Contains(m.call, "__") {
			t.Errorf("Triage's request 3 holds %+v", m)
		}
	}
	if len(rep.Shop) != 2 || rep.Shop[1].Action != "execute_refund" || rep.Shop[1].Conversation != "c1" {
		t.Errorf("the shop's calls %+v", rep.Shop)
	}
	var briefing []string
	for _, l := range rep.Shown {
		if l.From != "" {
			briefing = append(briefing, l.From+": "+l.Text)
		}
	}
	if len(briefing) != 11 || briefing[0] != id("User")+": I want a refund" || briefing[10] != id("User")+": Okay" {
		t.Errorf("the person was shown %q", briefing)
	}
	if len(rep.Asked) != 2 || rep.Asked[1].Text != userLines[6] {
		t.Errorf("the person was asked %+v", rep.Asked)
	}
	if triageSrv.Left()+refundSrv.Left() != 0 || len(salesSrv.Requests()) != 0 {
		t.Errorf("steps left: %d, %d; Sales asked %d times", triageSrv.Left(), refundSrv.Left(), len(salesSrv.Requests()))
	}
}
