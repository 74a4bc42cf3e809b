package plan_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/internal/front"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// benchSteps is the length of the plans the benchmarks run.
const benchSteps = 50

type Item struct {
	N int `json:"n"`
}

// stores gives each benchmark a fresh store of every kind.
var stores = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"Memory", func(b *testing.B) store.Store { return store.NewMemory() }},
	{"SQLite", func(b *testing.B) store.Store {
		st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		return st
	}},
	{"Postgres", func(b *testing.B) store.Store { return pgtest.New(b) }},
}

// worker is a specialist whose action is idempotent per key, as steps'
// are.
func worker(st store.Store) *agency.Agent {
	a := agency.MustNewAgent("Worker")
	agency.Handle(a, "work", plan.Idempotent(st, func(ctx context.Context, it Item) (int, error) { return it.N, nil }))
	return a
}

// BenchmarkPlanSteps runs plans of 50 steps end to end: a task, the
// scripted planner's plan, every step approved at once, each step sent to
// the worker, answered, recorded, the next one sent. It reports the steps
// executed per second, from the task to the plan's completion.
func BenchmarkPlanSteps(b *testing.B) {
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			st := s.open(b)
			defer st.Close()
			done := make(chan string, 16)
			coord, err := plan.NewCoordinator("GroupChatManager", st, plan.Observe(func(_ context.Context, e plan.Event) {
				if e.Kind == plan.PlanStatusEvent && e.Status == string(plan.PlanCompleted) {
					done <- e.PlanID
				}
			}))
			if err != nil {
				b.Fatal(err)
			}
			pl := openaitest.Serve()
			defer pl.Close()
			planner, err := openai.New("PlannerAgent", openai.BaseURL(pl.URL), openai.APIKey("test"), openai.HTTPClient(pl.Client()))
			if err != nil {
				b.Fatal(err)
			}
			gw := agency.MustNewAgent("HumanAgent")
			sp := space.NewLocal()
			defer sp.Close(ctx)
			for _, a := range []*agency.Agent{coord.Agent(), planner.Agent(), gw, worker(st)} {
				if err := sp.Add(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for left, i := b.N, 0; left > 0; i++ {
				n := min(left, benchSteps)
				left -= n
				var steps []string
				for j := 0; j < n; j++ {
					steps = append(steps, fmt.Sprintf(`{"agent":"Worker","action":"work","args":{"n":%d}}`, j))
				}
				pl.Add(openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "GroupChatManager__submit_plan",
					Arguments: `{"steps":[` + strings.Join(steps, ",") + `]}`}}}, openaitest.Step{Text: "ok"})
				r, err := agency.Call[front.Receipt](ctx, gw, "GroupChatManager", "input_task", front.InputTask{UserID: "u", SessionID: fmt.Sprint("s", i), Description: "work", Wait: 60})
				if err != nil || !strings.HasPrefix(r.Status, "Plan created") {
					b.Fatalf("input_task: %v %+v (%v)", err, r, pl.Err())
				}
				if _, err := agency.Call[front.Receipt](ctx, gw, "GroupChatManager", "approve_step_or_steps", front.Feedback{UserID: "u", PlanID: r.PlanID, Approved: true}); err != nil {
					b.Fatal(err)
				}
				select {
				case <-done:
				case <-time.After(time.Minute):
					b.Fatal("the plan did not complete")
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// BenchmarkPlanStepsBaseline does what each step needs, by hand, with the
// same guarantees and nothing else: the step marked sent and its message
// queued in one Apply, the message sent to the same idempotent worker and
// marked sent, the answer recorded in one more Apply.
func BenchmarkPlanStepsBaseline(b *testing.B) {
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			st := s.open(b)
			defer st.Close()
			me := agency.MustNewAgent("Runner")
			sp := space.NewLocal()
			defer sp.Close(ctx)
			for _, a := range []*agency.Agent{me, worker(st)} {
				if err := sp.Add(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := fmt.Sprint("step-", i)
				body, _ := json.Marshal(map[string]any{"status": "action_requested", "n": i})
				m := &agency.Message{ID: id, To: "Worker", Action: "work", Args: Item{N: i}, Meta: map[string]any{"idempotency_key": id}}
				out, err := store.NewOutgoing("Runner", m)
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: "step", ID: id, Body: body}}, Send: []store.Outgoing{out}}); err != nil {
					b.Fatal(err)
				}
				claimed, err := st.Claim(ctx, "Runner", 10, 10*time.Second)
				if err != nil || len(claimed) != 1 {
					b.Fatal(err, len(claimed))
				}
				resp, err := me.RequestMessage(ctx, m)
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Sent(ctx, claimed[0].ID); err != nil {
					b.Fatal(err)
				}
				v, _ := agency.Value[int](resp)
				body, _ = json.Marshal(map[string]any{"status": "completed", "reply": v})
				if err := st.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: "step", ID: id, Version: 1, Body: body}}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
