package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	a2abridge "github.com/seed72275b23/agency-go/actions/a2a"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/space"
)

// bareAdd is the same function as the Calculator's add, served by a bare
// a2a-go server: an executor that reads the same data part and emits the
// same events (submitted, working, the artifact, completed), with
// a2a-go's own in-memory task store.
type bareAdd struct{}

func (bareAdd) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		var args AddArgs
		for _, p := range ec.Message.Parts {
			if d, ok := p.Data().(map[string]any); ok && d["action"] == "add" {
				b, _ := json.Marshal(d["args"])
				_ = json.Unmarshal(b, &args)
			}
		}
		art := a2a.NewArtifactEvent(ec, a2a.NewDataPart(map[string]any{"result": args.A + args.B}))
		art.Artifact.Name = "result"
		art.LastChunk = true
		if !yield(art, nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (bareAdd) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// sender makes A2A send round trips to one endpoint with a2a-go's client.
type sender struct{ client *a2aclient.Client }

func newSender(b *testing.B, url string) sender {
	c, err := a2aclient.NewFromEndpoints(context.Background(), []*a2a.AgentInterface{{URL: url, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version}})
	if err != nil {
		b.Fatal(err)
	}
	return sender{c}
}

// roundTrip sends add and checks the completed task's result.
func (s sender) roundTrip(ctx context.Context) error {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"action": "add", "args": map[string]any{"a": 1, "b": 2}}))
	res, err := s.client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return err
	}
	t, ok := res.(*a2a.Task)
	if !ok || t.Status.State != a2a.TaskStateCompleted || len(t.Artifacts) != 1 {
		return errors.New("not a completed task")
	}
	if d, _ := t.Artifacts[0].Parts[0].Data().(map[string]any); d["result"] != 3.0 {
		return errors.New("a wrong sum")
	}
	return nil
}

// p50 runs n round trips and returns their median.
func (s sender) p50(b *testing.B, n int) time.Duration {
	ctx := context.Background()
	times := make([]time.Duration, n)
	for i := range times {
		start := time.Now()
		if err := s.roundTrip(ctx); err != nil {
			b.Fatal(err)
		}
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	return times[n/2]
}

// BenchmarkSendRoundTrip compares a send round trip through the bridge
// (HTTP, a2a-go's handler, the task store over actions/store, the caller's
// agent, a Request to the Calculator in a space.Local and back) with the
// same function served by a bare a2a-go server, in interleaved rounds
// (bridge, bare, bare, bridge) of b.N round trips a side. It reports each
// side's median round trip and the median of the rounds' ratios
// (bridge/bare) with their range.
//
//	go test -run '^$' -bench SendRoundTrip -benchtime 400x ./actions/a2a/
func BenchmarkSendRoundTrip(b *testing.B) {
	ctx := context.Background()
	sp := space.NewLocal()
	defer sp.Close(ctx)
	if err := sp.Add(ctx, calculator(newApprovals(), nil, nil)); err != nil {
		b.Fatal(err)
	}
	srv, err := a2abridge.NewServer(ctx, a2abridge.Config{Space: sp, Agents: []string{"Calculator"}, Store: store.NewMemory()})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close(ctx)
	bridgeHTTP := httptest.NewServer(srv)
	defer bridgeHTTP.Close()
	bareHTTP := httptest.NewServer(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(bareAdd{})))
	defer bareHTTP.Close()
	bridge, bare := newSender(b, bridgeHTTP.URL+"/agents/Calculator/"), newSender(b, bareHTTP.URL)
	bridge.p50(b, 50) // warm up both
	bare.p50(b, 50)

	const rounds = 8
	var ratios, bridges, bares []float64
	b.ResetTimer()
	for range rounds {
		x1 := bridge.p50(b, b.N)
		y1 := bare.p50(b, b.N)
		y2 := bare.p50(b, b.N)
		x2 := bridge.p50(b, b.N)
		x, y := (x1+x2)/2, (y1+y2)/2
		bridges, bares = append(bridges, float64(x.Microseconds())), append(bares, float64(y.Microseconds()))
		ratios = append(ratios, float64(x)/float64(y))
	}
	b.StopTimer()
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(med(bridges), "bridge-µs-p50")
	b.ReportMetric(med(bares), "bare-µs-p50")
	b.ReportMetric(med(ratios), "ratio-p50")
	b.ReportMetric(slices.Min(ratios), "ratio-min")
	b.ReportMetric(slices.Max(ratios), "ratio-max")
}
