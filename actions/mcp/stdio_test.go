package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/mcp"
	"github.com/seed72275b23/agency-go/space"
)

// TestStdioBadFrames writes frames to the server's stdin as a client
// would, bad ones among them, over real pipes.
func TestStdioBadFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sp := space.NewLocal()
	defer sp.Close(context.Background())
	if err := sp.Add(ctx, calculator(t, nil)); err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.NewServer("Bridge", mcp.Rediscover(0, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Add(ctx, srv.Agent()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, &mcp.StdioTransport{In: inR, Out: outW, MaxFrameBytes: 1 << 20}) }()
	out := bufio.NewReader(outR)
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() map[string]any {
		t.Helper()
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		return m
	}
	errorOf := func(m map[string]any) (float64, string) {
		e, _ := m["error"].(map[string]any)
		code, _ := e["code"].(float64)
		msg, _ := e["message"].(string)
		return code, msg
	}

	send(`{not json`)
	if code, msg := errorOf(recv()); code != -32700 || !strings.Contains(msg, "not JSON") {
		t.Fatalf("malformed frame: %v %q", code, msg)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`)
	if r := recv(); r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"hello":"world","id":7}`)
	if r := recv(); r["id"] != float64(7) {
		t.Fatalf("not JSON-RPC: %v", r)
	} else if code, _ := errorOf(r); code != -32600 {
		t.Fatalf("not JSON-RPC: %v", r)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Calculator.add","arguments":{"a":1,"b":2,"pad":"` + strings.Repeat("x", 2<<20) + `"}}}`)
	r := recv()
	if code, msg := errorOf(r); code != -32600 || !strings.Contains(msg, "more than 1048576 bytes") {
		t.Fatalf("frame over the limit: %v %q", code, msg)
	}
	if r["id"] != float64(2) {
		t.Errorf("frame over the limit, id first: the error's id is %v, want 2 (the client's call would never end)", r["id"])
	}
	// The TypeScript SDK writes the id last.
	send(`{"method":"tools/call","params":{"name":"Calculator.add","arguments":{"a":1,"b":2,"id":9,"pad":"` + strings.Repeat("x", 2<<20) + `"}},"jsonrpc":"2.0","id":"req-4"}`)
	r = recv()
	if code, _ := errorOf(r); code != -32600 || r["id"] != "req-4" {
		t.Errorf("frame over the limit, id last: %v, want the error for id \"req-4\"", r)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"Calculator.add","arguments":{"a":1,"b":2}}}`)
	r = recv()
	if r["id"] != float64(3) || !strings.Contains(jsonText(r), `"text":"3"`) {
		t.Fatalf("add after bad frames: %v", r)
	}
	inW.Close()
	if err := <-done; err != nil && err != io.EOF {
		t.Logf("Run ended with %v", err)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
