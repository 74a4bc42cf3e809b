package otelagency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/agency/otelagency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
	"github.com/seed72275b23/agency-go/space"
)

// instrumented returns an Instrumentation whose spans go to an in-memory
// exporter and whose metrics to a manual reader.
func instrumented(t *testing.T) (*otelagency.Instrumentation, trace.Tracer, *tracetest.InMemoryExporter, *sdkmetric.ManualReader) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return otelagency.New(otelagency.WithTracerProvider(tp), otelagency.WithMeterProvider(mp)), tp.Tracer("test"), exp, reader
}

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

type checkArgs struct {
	N int `json:"n" validate:"min=0"`
}

// spaces runs f on space.Local and on amqpspace over the real broker.
func spaces(t *testing.T, f func(t *testing.T, add func(*agency.Agent), name func(string) string)) {
	t.Run("Local", func(t *testing.T) {
		sp := space.NewLocal()
		t.Cleanup(func() { _ = sp.Close(context.Background()) })
		f(t, func(a *agency.Agent) {
			if err := sp.Add(context.Background(), a); err != nil {
				t.Fatal(err)
			}
		}, func(s string) string { return s })
	})
	t.Run("AMQP", func(t *testing.T) {
		sp := amqptest.NewSpace(t, amqpspace.Config{})
		f(t, func(a *agency.Agent) {
			if err := sp.Add(context.Background(), a); err != nil {
				t.Fatal(err)
			}
		}, amqptest.Name)
	})
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

// Every hop is a span in the caller's trace: the request (client), its
// handling (consumer, named by agent and action, a child of the
// request), what the handler sends (a child of the handling), and that
// message's handling; each carries the messaging attributes. Failures set
// status Error with the [error] type as error.type, on both sides.
func TestSpansForEveryHop(t *testing.T) {
	spaces(t, func(t *testing.T, add func(*agency.Agent), name func(string) string) {
		in, tracer, exp, reader := instrumented(t)
		hooks := agency.Hooks(in)
		calcID, frontID, userID := name("Calc"), name("Front"), name("User")
		calc := agency.MustNewAgent(calcID, hooks)
		agency.Handle(calc, "add", func(ctx context.Context, a addArgs) (int, error) { return a.A + a.B, nil })
		agency.Handle(calc, "check", func(context.Context, checkArgs) (bool, error) { return true, nil })
		agency.Handle(calc, "fail", func(context.Context, addArgs) (int, error) { return 0, errors.New("broken") })
		agency.Handle(calc, "secret", func(context.Context, addArgs) (int, error) { return 0, nil },
			agency.AccessBySender(nil, agency.Denied))
		front := agency.MustNewAgent(frontID, hooks)
		agency.Handle(front, "sum", func(ctx context.Context, a addArgs) (int, error) {
			return agency.Call[int](ctx, agency.AgentFrom(ctx), calcID, "add", a)
		})
		user := agency.MustNewAgent(userID, hooks)
		for _, a := range []*agency.Agent{calc, front, user} {
			add(a)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ctx, root := tracer.Start(ctx, "root")
		if v, err := agency.Call[int](ctx, user, frontID, "sum", addArgs{A: 1, B: 2}); err != nil || v != 3 {
			t.Fatalf("sum: %v, %v", v, err)
		}
		for action, want := range map[string]error{
			"fail": agency.ErrActionFailed, "secret": agency.ErrPermissionDenied, "nothing": agency.ErrNotFound,
		} {
			if _, err := user.Request(ctx, calcID, action, addArgs{A: 1}); !errors.Is(err, want) {
				t.Errorf("%s: %v", action, err)
			}
		}
		if _, err := user.Request(ctx, calcID, "check", checkArgs{N: -1}); !errors.Is(err, agency.ErrInvalidArgs) {
			t.Errorf("invalid: %v", err)
		}
		root.End()
		rootSC := root.SpanContext()

		// The handling spans end just after the response is sent: wait.
		const want = 1 + 2 + 2 + 2*4 // root, sum, add, and the four failures, each both sides
		deadline := time.Now().Add(10 * time.Second)
		for len(exp.GetSpans()) < want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		spans := exp.GetSpans().Snapshots()
		if len(spans) != want {
			t.Fatalf("%d spans, want %d", len(spans), want)
		}
		byName := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range spans {
			if s.SpanContext().TraceID() != rootSC.TraceID() {
				t.Errorf("span %q is in trace %s, not the caller's", s.Name(), s.SpanContext().TraceID())
			}
			byName[s.Name()] = s
		}
		chain := []struct {
			name   string
			kind   trace.SpanKind
			parent string
		}{
			{"request " + frontID + ".sum", trace.SpanKindClient, "root"},
			{"process " + frontID + ".sum", trace.SpanKindConsumer, "request " + frontID + ".sum"},
			{"request " + calcID + ".add", trace.SpanKindClient, "process " + frontID + ".sum"},
			{"process " + calcID + ".add", trace.SpanKindConsumer, "request " + calcID + ".add"},
		}
		for _, c := range chain {
			s, ok := byName[c.name]
			if !ok {
				t.Errorf("no span %q", c.name)
				continue
			}
			if s.SpanKind() != c.kind {
				t.Errorf("%s: kind %v, want %v", c.name, s.SpanKind(), c.kind)
			}
			if p := byName[c.parent]; p == nil || s.Parent().SpanID() != p.SpanContext().SpanID() {
				t.Errorf("%s: not a child of %s", c.name, c.parent)
			}
			if s.Status().Code == codes.Error {
				t.Errorf("%s: status %v", c.name, s.Status())
			}
		}
		a := attrs(byName["process "+calcID+".add"])
		for k, v := range map[attribute.Key]string{
			"messaging.system": "agency", "messaging.operation.type": "process", "messaging.operation.name": "process",
			"messaging.destination.name": calcID, "agency.agent.id": calcID, "agency.action": "add", "agency.message.from": frontID,
		} {
			if a[k] != v {
				t.Errorf("process span: %s = %q, want %q", k, a[k], v)
			}
		}
		if a["messaging.message.id"] == "" {
			t.Error("process span has no messaging.message.id")
		}
		r := attrs(byName["request "+calcID+".add"])
		if r["messaging.operation.type"] != "send" || r["messaging.destination.name"] != calcID || r["agency.agent.id"] != frontID ||
			r["messaging.message.id"] != a["messaging.message.id"] {
			t.Errorf("request span attributes %v", r)
		}

		for action, kind := range map[string]string{"fail": "action_failed", "secret": "permission_denied", "nothing": "not_found"} {
			for _, n := range []string{"request " + calcID + "." + action, "process " + calcID + "." + action} {
				s := byName[n]
				if s == nil {
					t.Errorf("no span %q", n)
					continue
				}
				if s.Status().Code != codes.Error || attrs(s)["error.type"] != kind {
					t.Errorf("%s: status %v, error.type %q; want Error, %q", n, s.Status(), attrs(s)["error.type"], kind)
				}
			}
		}
		// The invalid add: both sides name invalid_args.
		invalid := 0
		for _, s := range spans {
			if attrs(s)["error.type"] == "invalid_args" && s.Status().Code == codes.Error {
				invalid++
			}
		}
		if invalid != 2 {
			t.Errorf("%d spans with error.type invalid_args, want 2", invalid)
		}

		// Metrics: handled messages and errors by kind.
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		sums := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if h, ok := m.Data.(metricdata.Histogram[int64]); ok && m.Name == "agency.mailbox.depth" {
					for _, dp := range h.DataPoints {
						sums["depth points"] += int64(dp.Count)
					}
				}
				if s, ok := m.Data.(metricdata.Sum[int64]); ok {
					for _, dp := range s.DataPoints {
						var et, op string
						if v, ok := dp.Attributes.Value("error.type"); ok {
							et = v.Emit()
						}
						if v, ok := dp.Attributes.Value("messaging.operation.name"); ok {
							op = v.Emit()
						}
						sums[m.Name+"/"+et+"/"+op] += dp.Value
					}
				}
			}
		}
		for k, v := range map[string]int64{
			"agency.messages.sent//request":           6,
			"agency.errors/permission_denied/process": 1,
			"agency.errors/permission_denied/request": 1,
			"agency.errors/invalid_args/process":      1,
			"agency.messages.handled/action_failed/":  1,
			"agency.messages.handled//":               2,
		} {
			if sums[k] != v {
				t.Errorf("metric %s = %d, want %d (all: %v)", k, sums[k], v, sums)
			}
		}
	})
}

// A broadcast's handlings are spans linked to the sending span.
func TestBroadcastLinks(t *testing.T) {
	spaces(t, func(t *testing.T, add func(*agency.Agent), name func(string) string) {
		in, tracer, exp, _ := instrumented(t)
		hooks := agency.Hooks(in)
		heard := make(chan struct{}, 4)
		var ids []string
		for _, n := range []string{"A", "B"} {
			a := agency.MustNewAgent(name(n), hooks)
			agency.Handle(a, "news", func(context.Context, struct{}) (struct{}, error) {
				heard <- struct{}{}
				return struct{}{}, nil
			})
			add(a)
			ids = append(ids, a.ID())
		}
		sender := agency.MustNewAgent(name("Sender"), hooks)
		add(sender)
		ctx, root := tracer.Start(context.Background(), "root")
		if _, err := sender.Send(ctx, agency.Broadcast, "news", nil); err != nil {
			t.Fatal(err)
		}
		root.End()
		timeout := time.After(20 * time.Second)
		for range ids {
			select {
			case <-heard:
			case <-timeout:
				t.Fatal("the broadcast did not arrive")
			}
		}
		var send sdktrace.ReadOnlySpan
		deadline := time.Now().Add(10 * time.Second)
		for {
			spans := exp.GetSpans().Snapshots()
			processed := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range spans {
				if s.Name() == "send *.news" {
					send = s
				}
				if a := attrs(s); a["messaging.operation.type"] == "process" && a["agency.action"] == "news" {
					processed[a["agency.agent.id"]] = s
				}
			}
			all := true
			for _, id := range ids {
				all = all && processed[id] != nil
			}
			if send != nil && all {
				for _, id := range ids {
					p := processed[id]
					if p == nil {
						t.Fatalf("no process span for %s", id)
					}
					if len(p.Links()) != 1 || p.Links()[0].SpanContext.SpanID() != send.SpanContext().SpanID() {
						t.Errorf("%s: links %v, want one to the send span", id, p.Links())
					}
					if attrs(p)["agency.broadcast"] != "true" {
						t.Errorf("%s: no agency.broadcast", id)
					}
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("spans: %d, send %v, processed %d", len(spans), send != nil, len(processed))
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// ObserveReconnects reports a space's reconnect count as
// agency.space.reconnects.
func TestObserveReconnects(t *testing.T) {
	sp := amqptest.NewSpace(t, amqpspace.Config{})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	reg, err := otelagency.ObserveReconnects(mp, "amqp", sp.Reconnects)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "agency.space.reconnects" {
				continue
			}
			s := m.Data.(metricdata.Sum[int64])
			if len(s.DataPoints) != 1 || s.DataPoints[0].Value != sp.Reconnects() || !s.IsMonotonic {
				t.Errorf("agency.space.reconnects: %+v, want one point of %d", s, sp.Reconnects())
			}
			if v, _ := s.DataPoints[0].Attributes.Value("agency.space"); v.AsString() != "amqp" {
				t.Errorf("agency.space = %q", v.AsString())
			}
			found = true
		}
	}
	if !found {
		t.Error("no agency.space.reconnects")
	}
}
