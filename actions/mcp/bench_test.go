package mcp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// addOut is the bare tool's structured result, as the bridge gives it.
type addOut struct {
	Result float64 `json:"result"`
}

// bareServer is the function the bridge serves, as a plain go-sdk tool:
// typed, validated input and output, the way go-sdk's AddTool does it.
func bareServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "bare"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "Calculator.add", Description: "Adds two numbers"},
		func(_ context.Context, _ *sdk.CallToolRequest, a sumIn) (*sdk.CallToolResult, addOut, error) {
			return nil, addOut{a.A + a.B}, nil
		})
	return s
}

// bridgeServer is the same function as a Calculator agent on space.Local,
// served by the bridge.
func bridgeServer(b *testing.B) *mcp.Server {
	ctx := context.Background()
	sp := space.NewLocal()
	b.Cleanup(func() { sp.Close(context.Background()) })
	calc := agency.MustNewAgent("Calculator", agency.Concurrency(4))
	agency.Handle(calc, "add", func(_ context.Context, a AddArgs) (float64, error) { return a.A + a.B, nil },
		agency.Describe("Adds two numbers"))
	srv, err := mcp.NewServer("Bridge", mcp.Rediscover(0, 50*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range []*agency.Agent{calc, srv.Agent()} {
		if err := sp.Add(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
	if err := srv.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	return srv
}

// pipes returns a client transport and a server's reader and writer
// joined by real in-process pipes, as a command's stdin and stdout are.
func pipes() (client sdk.Transport, in io.ReadCloser, out io.WriteCloser) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	return &sdk.IOTransport{Reader: outR, Writer: inW}, inR, outW
}

func connect(b *testing.B, t sdk.Transport) *sdk.ClientSession {
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench"}, nil).Connect(context.Background(), t, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// ratio runs bare and ours alternately, one call each per round, and
// reports the median of each and their ratio.
func ratio(b *testing.B, bare, ours func() error) {
	var tb, to []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if err := bare(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := ours(); err != nil {
			b.Fatal(err)
		}
		tb, to = append(tb, t1.Sub(t0)), append(to, time.Since(t1))
	}
	pb, po := median(tb), median(to)
	b.ReportMetric(float64(pb.Microseconds()), "bare-p50-µs")
	b.ReportMetric(float64(po.Microseconds()), "ours-p50-µs")
	b.ReportMetric(float64(po)/float64(pb), "p50-ratio")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func callAdd(cs *sdk.ClientSession) func() error {
	ctx := context.Background()
	params := &sdk.CallToolParams{Name: "Calculator.add", Arguments: map[string]any{"a": 1, "b": 2}}
	return func() error {
		res, err := cs.CallTool(ctx, params)
		if err == nil && res.IsError {
			err = res.GetError()
		}
		return err
	}
}

// BenchmarkToolsCall: tools/call of Calculator.add through the bridge to
// an agent on space.Local ("ours"), against the same function as a plain
// go-sdk tool ("bare"), over stdio (real pipes, in process) and over
// streamable HTTP (httptest, loopback), one call of each per round.
func BenchmarkToolsCall(b *testing.B) {
	b.Run("stdio", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		ct, in, out := pipes()
		go bareServer().Run(ctx, &sdk.IOTransport{Reader: in, Writer: out})
		bare := connect(b, ct)
		ct2, in2, out2 := pipes()
		go bridgeServer(b).Run(ctx, &mcp.StdioTransport{In: in2, Out: out2})
		ours := connect(b, ct2)
		ratio(b, callAdd(bare), callAdd(ours))
	})
	b.Run("http", func(b *testing.B) {
		bs := bareServer()
		hb := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return bs }, nil))
		b.Cleanup(hb.Close)
		ho := httptest.NewServer(bridgeServer(b).Handler())
		b.Cleanup(ho.Close)
		bare := connect(b, &sdk.StreamableClientTransport{Endpoint: hb.URL})
		ours := connect(b, &sdk.StreamableClientTransport{Endpoint: ho.URL})
		ratio(b, callAdd(bare), callAdd(ours))
	})
}

// BenchmarkJoinedServer: an agency call through a Client to a go-sdk
// server ("ours": the request in space.Local, the arguments validated
// against the tool's schema, the call over an in-memory transport),
// against calling the same server with go-sdk's client directly ("bare"),
// one call of each per round.
func BenchmarkJoinedServer(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	s := bareServer()
	serve := func() sdk.Transport {
		st, ct := sdk.NewInMemoryTransports()
		go s.Run(ctx, st)
		return ct
	}
	bare := connect(b, serve())
	c, err := mcp.NewClient(ctx, "Calculator", func() (sdk.Transport, error) { return serve(), nil })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	sp := space.NewLocal()
	b.Cleanup(func() { sp.Close(context.Background()) })
	user := agency.MustNewAgent("User")
	for _, a := range []*agency.Agent{c.Agent(), user} {
		if err := sp.Add(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
	args := map[string]any{"a": 1, "b": 2}
	ratio(b, callAdd(bare), func() error {
		_, err := agency.Call[addOut](ctx, user, "Calculator", "Calculator.add", args)
		return err
	})
}
