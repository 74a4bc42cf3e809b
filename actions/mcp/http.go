package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where ListenAndServe serves MCP's streamable HTTP transport.
const Path = "/mcp"

// Handler returns an http.Handler that serves the server over MCP's
// streamable HTTP transport, checking bearer tokens if BearerToken was
// given. A request body over MaxArgBytes (plus 64 KiB for the JSON-RPC
// envelope) is refused with 413, one that is not JSON with 400; both get a
// JSON-RPC error that says what was wrong, without repeating the body.
func (s *Server) Handler() http.Handler {
	limit := int64(s.cfg.maxArgs) + 64<<10
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.mcp }, &sdk.StreamableHTTPOptions{
		Logger:              s.cfg.sdkLogger,
		MaxRequestBodyBytes: limit,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.token != nil {
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || token == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
				http.Error(w, "a bearer token is required (Authorization: Bearer …)", http.StatusUnauthorized)
				return
			}
			if err := s.cfg.token(r.Context(), token); err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp", error="invalid_token"`)
				http.Error(w, "the bearer token was refused: "+err.Error(), http.StatusUnauthorized)
				return
			}
		}
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				rpcError(w, http.StatusRequestEntityTooLarge, -32600, fmt.Sprintf("request too large: the body is over %d bytes; a tool's arguments may be at most %d bytes", limit, s.cfg.maxArgs))
				return
			case err != nil:
				rpcError(w, http.StatusBadRequest, -32600, "the request body could not be read: "+err.Error())
				return
			case !json.Valid(body):
				rpcError(w, http.StatusBadRequest, -32700, "parse error: the body is not JSON; it must be one JSON-RPC message")
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

// rpcError writes a JSON-RPC error response, with id null, and status.
func rpcError(w http.ResponseWriter, status, code int, text string) {
	msg, _ := json.Marshal(text)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":%s}}`+"\n", code, msg)
}

// ListenAndServe serves the server over streamable HTTP at Path on addr
// until ctx is done. An addr without a host ("" or ":8931") listens on
// 127.0.0.1; a host that is not a loopback address needs BearerToken. The
// address it listens on is passed to ready, if not nil, once it does.
func (s *Server) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	host, port, err := net.SplitHostPort(addr)
	if addr == "" {
		host, port, err = "", "0", nil
	}
	if err != nil {
		return fmt.Errorf("mcp: listen address %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !loopback(host) && s.cfg.token == nil {
		return fmt.Errorf("mcp: listening on %q, beyond this host, needs a bearer token check (mcp.BearerToken)", host)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(Path, s.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
