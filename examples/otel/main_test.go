package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The program prints the spans of every hop, all in one trace, the failed
// call's with status Error, then the answers and the metric names.
func TestRun(t *testing.T) {
	for _, useAMQP := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var out bytes.Buffer
		if err := run(ctx, &out, useAMQP, amqptest.Name("agency-otel-example")); err != nil {
			t.Fatalf("run (amqp %v): %v\n%s", useAMQP, err, out.String())
		}
		cancel()
		dec := json.NewDecoder(&out)
		type span struct {
			Name        string
			SpanContext struct{ TraceID string }
			Status      struct{ Code string }
			Attributes  []struct {
				Key   string
				Value struct{ Value any }
			}
		}
		byName := map[string]span{}
		for {
			var s span
			if err := dec.Decode(&s); err != nil {
				break // the summary after the spans
			}
			byName[s.Name] = s
		}
		rest, _ := io.ReadAll(io.MultiReader(dec.Buffered(), &out))
		root, ok := byName["User asks"]
		if !ok {
			t.Fatalf("no root span among %v", byName)
		}
		for _, n := range []string{"request Front.sum", "process Front.sum", "request Calculator.add", "process Calculator.add",
			"request Calculator.divide", "process Calculator.divide"} {
			s, ok := byName[n]
			if !ok {
				t.Errorf("amqp %v: no span %q", useAMQP, n)
				continue
			}
			if s.SpanContext.TraceID != root.SpanContext.TraceID {
				t.Errorf("amqp %v: %s is not in the root's trace", useAMQP, n)
			}
			if failed := strings.HasSuffix(n, "divide"); failed != (s.Status.Code == "Error") {
				t.Errorf("amqp %v: %s status %q", useAMQP, n, s.Status.Code)
			}
		}
		for _, want := range []string{"sum: 3", "divide: action_failed: division is not implemented", "metric agency.errors ({error})"} {
			if !bytes.Contains(rest, []byte(want)) {
				t.Errorf("amqp %v: the output has no %q:\n%s", useAMQP, want, rest)
			}
		}
	}
}
