package handoff

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/actions/human"
	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/internal/testenv"
	"github.com/seed72275b23/agency-go/space"
)

// TestMain fails the package's tests if any goroutine outlives them:
// agents, relays, turns and HTTP connections must be gone once the spaces
// close.
func TestMain(m *testing.M) {
	// The slow tests wait on processes killed and started again, on the
	// broker and on the stores, each on its own: four at a time.
	testenv.WaitingTests(4)
	goleak.VerifyTestMain(testenv.RemovingPrograms(m))
}

// safety bounds every wait of a test; no test sleeps to synchronise.
const safety = 20 * time.Second

// The prompts of the support seed.
const (
	triagePrompt  = "You are a customer service bot for ACME Inc. Introduce yourself. Always be very brief. Gather information to direct the customer to the right department. But make your questions subtle and natural."
	salesPrompt   = "You are a sales agent for ACME Inc. Always answer in a sentence or less. Follow the following routine with the user: 1. Ask them about any problems in their life related to catching roadrunners. 2. Casually mention one of ACME's crazy made-up products can help. - Don't mention price. 3. Once the user is bought in, drop a ridiculous price. 4. Only after everything, and if the user says yes, tell them a crazy caveat and execute their order."
	refundsPrompt = "You are a customer support agent for ACME Inc. Always answer in a sentence or less. Follow the following routine with the user: 1. First, ask probing questions and understand the user's problem deeper. - unless the user has already provided a reason. 2. Propose a fix (make one up). 3. ONLY if not satisfied, offer a refund. 4. If accepted, search for the ID and then execute refund."
)

// The shop's tools, with the seed's parameters.
type searchArgs struct {
	Query string `json:"search_query" jsonschema:"description=a description or keywords"`
}
type refundArgs struct {
	ItemID string `json:"item_id"`
	Reason string `json:"reason,omitempty"`
}
type orderArgs struct {
	Product string `json:"product"`
	Price   int    `json:"price" validate:"min=0"`
}

// call is a call a tool agent received.
type call struct {
	Action string
	Args   string
	Meta   map[string]any
}

// calls records the calls of a tool agent.
type calls struct {
	mu   sync.Mutex
	list []call
}

func (c *calls) add(ctx context.Context, action string, args any) {
	m := agency.MessageFrom(ctx)
	b, _ := json.Marshal(args)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, call{Action: action, Args: string(b), Meta: m.Meta})
}

func (c *calls) get() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list)
}

// newShop is the seed's tools as the actions of one agent, each open only
// to the agent that may use it.
func newShop(id, refunds, sales string, rec *calls) *agency.Agent {
	only := func(id string) agency.ActionOption {
		return agency.AccessBySender(map[string]agency.Access{id: agency.Permitted}, agency.Denied)
	}
	shop := agency.MustNewAgent(id)
	agency.Handle(shop, "look_up_item", func(ctx context.Context, a searchArgs) (string, error) {
		rec.add(ctx, "look_up_item", a)
		return "item_132612938", nil
	}, only(refunds), agency.Describe("Use to find item ID. Search query can be a description or keywords."))
	agency.Handle(shop, "execute_refund", func(ctx context.Context, a refundArgs) (string, error) {
		rec.add(ctx, "execute_refund", a)
		return "success", nil
	}, only(refunds))
	agency.Handle(shop, "execute_order", func(ctx context.Context, a orderArgs) (string, error) {
		rec.add(ctx, "execute_order", a)
		return "Success", nil
	}, only(sales), agency.Describe("Price should be in USD."))
	return shop
}

// recorder records events.
type recorder struct {
	mu      sync.Mutex
	events  []Event
	changed chan struct{}
	on      func(ctx context.Context, e Event) // called with each event, if set
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Event(ctx context.Context, e Event) {
	if r.on != nil {
		r.on(ctx, e)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) of(kind EventKind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// wait waits until n events of the kind have come.
func (r *recorder) wait(t *testing.T, ctx context.Context, kind EventKind, n int) []Event {
	t.Helper()
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		if got := r.of(kind); len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waited in vain for %d %s events; got %+v", n, kind, r.of(kind))
		}
	}
}

// llmOptions points an LLM agent at its scripted server.
func llmOptions(srv *openaitest.Server) []openai.Option {
	return []openai.Option{openai.APIKey("test-key"), openai.BaseURL(srv.URL), openai.HTTPClient(srv.Client()),
		openai.Retries(0, 0), openai.CallTimeout(safety)}
}

// support is the program of the support seed (triage, sales, refunds, a
// person) with scripted model servers and fronts.
type support struct {
	t         *testing.T
	ctx       context.Context
	st        store.Store
	maxHops   int
	triageSrv *openaitest.Server
	refundSrv *openaitest.Server
	salesSrv  *openaitest.Server
	operator  *human.Script
	screen    *human.Script
	shopCalls *calls
	events    *recorder

	members []string // of the team, beside its agents

	sp     *space.Local
	team   *Team
	user   *human.User
	triage *openai.Agent
}

func newSupport(t *testing.T, st store.Store, maxHops int) *support {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	if st == nil {
		st = store.NewMemory()
	}
	return &support{
		t: t, ctx: ctx, st: st, maxHops: maxHops,
		triageSrv: openaitest.NewServer(t), refundSrv: openaitest.NewServer(t), salesSrv: openaitest.NewServer(t),
		operator: human.NewScript(), screen: human.NewScript(), shopCalls: &calls{}, events: newRecorder(),
	}
}

// build makes every agent and adds it to a new space; the user speaks
// first to start (the holder the store names, when it knows one).
func (s *support) build(start string) {
	t := s.t
	t.Helper()
	opts := []Option{WithStore(s.st), DefaultAfterWork(RevertToUser()), Observe(s.events)}
	if s.maxHops != 0 {
		opts = append(opts, MaxHops(s.maxHops))
	}
	s.team = &Team{
		UserID: "User", Options: opts, Members: s.members,
		AgentLLM: map[string][]openai.Option{
			"Triage": llmOptions(s.triageSrv), "Refunds": llmOptions(s.refundSrv), "Sales": llmOptions(s.salesSrv),
		},
	}
	back := OnLLM(To("Triage"), "Call this if the user brings up a topic outside of your purview,\nincluding escalating to human.",
		Name("transfer_back_to_triage"))
	triage, err := s.team.Agent("Triage", triagePrompt,
		OnLLM(To("Refunds"), "Use for issues, repairs, or refunds.", Name("transfer_to_issues_and_repairs")),
		OnLLM(To("Sales"), "Use for anything sales or buying related.", Name("transfer_to_sales_agent")),
		OnLLM(To("Human"), "Only call this if explicitly asked to.", Name("escalate_to_human")))
	if err != nil {
		t.Fatal(err)
	}
	s.triage = triage
	sales, err := s.team.Agent("Sales", salesPrompt, back)
	if err != nil {
		t.Fatal(err)
	}
	refunds, err := s.team.Agent("Refunds", refundsPrompt, back)
	if err != nil {
		t.Fatal(err)
	}
	manager, err := s.team.Human("Human", s.operator)
	if err != nil {
		t.Fatal(err)
	}
	if holder, err := s.team.Holder(s.ctx, "c1"); err != nil {
		t.Fatal(err)
	} else if holder != "" {
		start = holder
	}
	s.user, err = human.NewUser("User", s.screen, human.StartWith(start), human.Conversation("c1"))
	if err != nil {
		t.Fatal(err)
	}
	s.sp = space.NewLocal()
	sp := s.sp
	t.Cleanup(func() { _ = sp.Close(context.Background()) })
	shop := newShop("Shop", "Refunds", "Sales", s.shopCalls)
	for _, a := range []*agency.Agent{shop, triage.Agent(), sales.Agent(), refunds.Agent(), manager.Agent(), s.user.Agent()} {
		if err := s.sp.Add(s.ctx, a); err != nil {
			t.Fatal(err)
		}
	}
}

// say says a line as the user and waits for the answer.
func (s *support) say(line string) {
	s.t.Helper()
	if err := s.user.Say(s.ctx, line); err != nil {
		s.t.Fatalf("saying %q: %v", line, err)
	}
}

// shown returns what the user was shown, as "From: Text".
func shown(f *human.Script) []string {
	var out []string
	for _, l := range f.Shown() {
		out = append(out, l.From+": "+l.Text)
	}
	return out
}

// toolNames returns the names of a request's tools.
func toolNames(r openaitest.Request) []string {
	var out []string
	for _, x := range r.Tools {
		out = append(out, x.Name)
	}
	return out
}

// text is a model's text answer; calls a reply with tool calls.
func textStep(s string) openaitest.Step { return openaitest.Step{Text: s} }
func calls1(name, args string) openaitest.Step {
	return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: name, Arguments: args}}}
}

// msg is a message of a request as a test writes it.
type msg struct{ role, name, content, call, callID string }

// messages returns a request's messages after the system message, in a
// form tests compare: the role, the name, the content, the name of the
// one tool call (or the tool call id of a result).
func messages(r openaitest.Request) []msg {
	var out []msg
	for _, m := range r.Messages {
		if m.Role == "system" {
			continue
		}
		x := msg{role: m.Role, name: m.Name, content: m.Content}
		for _, c := range m.ToolCalls {
			if x.call != "" {
				x.call += ","
			}
			x.call += c.Name
		}
		if m.Role == "tool" {
			x.callID = "tool"
		}
		out = append(out, x)
	}
	return out
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// canon is v as canonical JSON bytes, for comparison.
func canon(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
