package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// Space is what the server needs of a space: it adds an agent for each
// caller, whose id is the sender of that caller's messages. space.Local and
// amqpspace are Spaces.
type Space interface {
	Add(ctx context.Context, a *agency.Agent) error
	Remove(ctx context.Context, id string) error
}

// DefaultMaxBody is the default bound on a request body, in bytes: a
// message's own size limit (4 MiB) plus room for its JSON-RPC envelope.
const DefaultMaxBody = 4<<20 + 64<<10

// DefaultCaller is the sender id of callers when the server checks no
// token.
const DefaultCaller = "a2a"

// DefaultCallTimeout bounds a call that waits for no approval.
const DefaultCallTimeout = 10 * time.Minute

// Config configures a Server. Space and Agents are required.
type Config struct {
	// Space holds the agents served. The server adds one agent of its own
	// per caller to it (see Authenticate) and removes them on Close.
	Space Space
	// Agents are the ids of the agents served, each at /agents/{id}/ with
	// its card at /agents/{id}/.well-known/agent-card.json.
	Agents []string
	// Root, when set, names one of Agents whose card is also served at
	// /.well-known/agent-card.json.
	Root string
	// Store keeps the tasks: sqlitestore for one process, pgstore for
	// several. Nil keeps them in memory, lost on restart.
	Store store.Store
	// BaseURL is where callers reach the server ("https://agents.example.com"),
	// for the cards' URLs. Empty takes it from each card request's Host.
	BaseURL string
	// Authenticate, when set, checks the bearer token of every request to
	// an agent and returns the caller's agent id (see agency.ValidateID),
	// which becomes the sender of the caller's messages: access policies
	// apply to it, and a caller reads only its own tasks. An error refuses
	// the request (401). The cards declare the bearer scheme. When nil,
	// every caller is DefaultCaller (or Anonymous).
	Authenticate func(ctx context.Context, token string) (caller string, err error)
	// CallerAgent, when set, names the agent a caller speaks through (the
	// sender of its calls); by default the caller's own id. Several server
	// processes on amqpspace need it: an agent id is one agent on the
	// broker, so each process gives its callers ids of its own
	// (caller+"@"+instance, matched in access policies by "alice@*").
	CallerAgent func(caller string) string
	// Instance names this server process among several on one store: a
	// starting server sends again only the calls waiting for approval
	// that a server of its own Instance took (a restarted process keeps
	// its name). Empty by default, for one process.
	Instance string
	// Anonymous is the sender id of callers when Authenticate is nil, and
	// the caller whose view of help makes the public card: DefaultCaller
	// when empty.
	Anonymous string
	// Descriptions gives the agents' descriptions on their cards, by id.
	Descriptions map[string]string
	// Version is the agents' version on their cards: "1.0.0" when empty.
	Version string
	// MaxBody bounds a request body in bytes (DefaultMaxBody when 0): a
	// larger one is refused with HTTP 413 and a JSON-RPC error, unread.
	MaxBody int64
	// CallTimeout bounds a call that waits for no approval
	// (DefaultCallTimeout when 0); calls that wait for approval wait as
	// long as the approver takes.
	CallTimeout time.Duration
	// Compat03 also serves A2A 0.3 JSON-RPC callers, at /agents/{id}/v0.3,
	// and makes the cards readable by them (a card both versions read, as
	// a2a-go's compatibility layer writes it). It does not go with
	// Authenticate: in that card the security schemes take their 0.3 shape,
	// which 1.0 parsers refuse.
	Compat03 bool
	// Logger receives the server's diagnostics; silent when nil.
	Logger *slog.Logger
}

// Server serves agents of a space over A2A: it is an http.Handler. Its
// methods are safe for concurrent use.
type Server struct {
	cfg    Config
	mux    *http.ServeMux
	agents map[string]*served
	logger *slog.Logger

	ctx  context.Context // the server's lifetime: ends on Close
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	callers map[string]*callerAgent
	running map[a2a.TaskID]context.CancelFunc // calls under way, by task
	staged  map[a2a.TaskID]*pending           // calls put to approval, started once their task says so
	helps   map[[2]string]helpEntry           // caller, agent → help as the caller sees it
	closed  bool
}

// served is one agent served.
type served struct {
	id    string
	tasks *tasks
	rpc   http.Handler // A2A 1.0 JSON-RPC
	rpc03 http.Handler // A2A 0.3 JSON-RPC, with Compat03
}

// NewServer returns a server of cfg.Agents. It resumes the calls that
// waited for approval when a server on the same store stopped: each is
// sent again, and its task goes on when the approver decides. Close it
// when done.
func NewServer(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Space == nil {
		return nil, errors.New("a2a: Config.Space is required")
	}
	if len(cfg.Agents) == 0 {
		return nil, errors.New("a2a: Config.Agents names no agent to serve")
	}
	if cfg.Compat03 && cfg.Authenticate != nil {
		return nil, errors.New("a2a: Compat03 with Authenticate: the card 0.3 callers read declares security schemes in a shape 1.0 callers refuse; serve 0.3 callers from a server without tokens")
	}
	if cfg.Store == nil {
		cfg.Store = store.NewMemory()
	}
	if cfg.Anonymous == "" {
		cfg.Anonymous = DefaultCaller
	}
	if err := agency.ValidateID(cfg.Anonymous); err != nil {
		return nil, fmt.Errorf("a2a: Config.Anonymous: %w", err)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Version == "" {
		cfg.Version = "1.0.0"
	}
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		mux:     http.NewServeMux(),
		agents:  make(map[string]*served),
		logger:  logger,
		callers: make(map[string]*callerAgent),
		running: make(map[a2a.TaskID]context.CancelFunc),
		staged:  make(map[a2a.TaskID]*pending),
		helps:   make(map[[2]string]helpEntry),
	}
	s.ctx, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	for _, id := range cfg.Agents {
		if err := agency.ValidateID(id); err != nil {
			return nil, fmt.Errorf("a2a: Config.Agents: %w", err)
		}
		if s.agents[id] != nil {
			return nil, fmt.Errorf("a2a: Config.Agents names %q twice", id)
		}
		sv := &served{id: id, tasks: &tasks{st: cfg.Store, agent: id, instance: cfg.Instance}}
		h := a2asrv.NewHandler(&executor{s: s, agent: id},
			a2asrv.WithTaskStore(sv.tasks),
			a2asrv.WithCallInterceptors(identify{tasks: sv.tasks}),
			a2asrv.WithLogger(logger),
			a2asrv.WithCapabilityChecks(&a2a.AgentCapabilities{Streaming: true}),
		)
		sv.rpc = a2asrv.NewJSONRPCHandler(h)
		if cfg.Compat03 {
			sv.rpc03 = a2av0.NewJSONRPCHandler(h)
		}
		s.agents[id] = sv
	}
	if cfg.Root != "" && s.agents[cfg.Root] == nil {
		return nil, fmt.Errorf("a2a: Config.Root %q is not one of Config.Agents", cfg.Root)
	}
	s.mux.HandleFunc("GET /agents/{id}/.well-known/agent-card.json", s.serveCard)
	s.mux.HandleFunc("POST /agents/{id}/{$}", s.serveRPC)
	s.mux.HandleFunc("POST /agents/{id}/v0.3", s.serveRPC)
	s.mux.HandleFunc("GET /.well-known/agent-card.json", s.serveCard)
	if err := s.resume(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// ServeHTTP serves the agents' cards and their A2A JSON-RPC endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops the calls under way (those that wait for approval are sent
// again by the next server on the store) and removes the callers' agents
// from the space. It does not close the store. Close is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	callers := s.callers
	s.callers = nil
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	var errs []error
	for id, c := range callers {
		<-c.ready
		if c.err == nil {
			if err := s.cfg.Space.Remove(ctx, id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// callerKey carries the caller's id from the HTTP layer to the handler.
type callerKey struct{}

// identify gives A2A's call context the caller the HTTP layer found, so
// that the task store knows whose tasks are whose. It also checks that a
// subscription is to one of the caller's tasks: a2a-go streams the events
// of a running task to whoever names it.
type identify struct {
	a2asrv.PassthroughCallInterceptor
	tasks *tasks
}

func (i identify) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	if id, ok := ctx.Value(callerKey{}).(string); ok {
		cc.User = a2asrv.NewAuthenticatedUser(id, nil)
	}
	if sub, ok := req.Payload.(*a2a.SubscribeToTaskRequest); ok && sub != nil {
		if _, err := i.tasks.Get(ctx, sub.ID); err != nil {
			return ctx, nil, err
		}
	}
	return ctx, nil, nil
}

// serveRPC bounds the body, checks the caller, and hands the request to
// the agent's JSON-RPC handler.
func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request) {
	sv := s.agents[r.PathValue("id")]
	if sv == nil {
		writeRPCError(w, http.StatusNotFound, -32601, fmt.Sprintf("no agent %q is served here; the served agents are %s", r.PathValue("id"), strings.Join(s.cfg.Agents, ", ")))
		return
	}
	rpc := sv.rpc
	if strings.HasSuffix(r.URL.Path, "/v0.3") {
		if rpc = sv.rpc03; rpc == nil {
			http.NotFound(w, r)
			return
		}
	}
	if r.ContentLength > s.cfg.MaxBody {
		s.tooLarge(w)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			s.tooLarge(w)
			return
		}
		writeRPCError(w, http.StatusBadRequest, -32700, "reading the request body: "+err.Error())
		return
	}
	caller, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r = r.WithContext(context.WithValue(r.Context(), callerKey{}, caller))
	rpc.ServeHTTP(w, r)
}

func (s *Server) tooLarge(w http.ResponseWriter) {
	writeRPCError(w, http.StatusRequestEntityTooLarge, -32600,
		fmt.Sprintf("the request body is over this server's limit of %d bytes", s.cfg.MaxBody))
}

// authenticate returns the caller of r, or writes a 401 and returns false.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	if s.cfg.Authenticate == nil {
		return s.cfg.Anonymous, true
	}
	token, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="a2a"`)
		writeRPCError(w, http.StatusUnauthorized, -31401, "this agent needs a bearer token: send the header Authorization: Bearer TOKEN")
		return "", false
	}
	caller, err := s.cfg.Authenticate(r.Context(), token)
	if err == nil {
		err = agency.ValidateID(caller)
	}
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="a2a", error="invalid_token"`)
		writeRPCError(w, http.StatusUnauthorized, -31401, "the bearer token was refused: "+err.Error())
		return "", false
	}
	return caller, true
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	t := strings.TrimSpace(h[7:])
	return t, t != ""
}

// writeRPCError writes a JSON-RPC error response with no id.
func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": code, "message": msg},
	})
}
