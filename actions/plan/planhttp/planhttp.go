// Package planhttp serves the HTTP API of the plans of actions/plan, and a
// web page for them, through a gateway agent that speaks for people.
//
// The API is that of the backend of Microsoft's Multi-Agent Custom
// Automation Engine (MACAE) in its AutoGen version: its paths, its JSON
// field names and enums, the user from the x-ms-client-principal-id header,
// so that its own vanilla-JS frontend works against it unmodified.
//
//	gw := agency.MustNewAgent("HumanAgent") // an approver of the coordinator
//	… add gw to the coordinator's space …
//	h, err := planhttp.Handler(gw, "GroupChatManager", planhttp.AllowOrigins("https://app.example"))
//	if err != nil { … }
//	log.Fatal(http.ListenAndServe(":8000", h))
//
// Routes (every API route takes the user from the request, see User):
//
//	POST   /input_task                   a task → a plan (the planner is asked)
//	POST   /human_feedback               approve or reject one step
//	POST   /approve_step_or_steps        the same, or without step_id every step that has not run
//	POST   /human_clarification_on_plan  answer the planner's question
//	GET    /plans                        the user's plans with their steps, newest first (?session_id=, ?limit=)
//	GET    /steps/{plan_id}              a plan's steps
//	GET    /plans/{plan_id}/events       the parts of its steps' answers while they run (server-sent events)
//	GET    /agent_messages/{session_id}  a session's log, oldest first
//	GET    /messages                     every document of the user
//	DELETE /messages                     delete them
//	GET    /api/agent-tools              the actions steps may use
//	GET    /openapi.json                 the API as an OpenAPI 3.1 document
//	GET    /                             the web page
//
// Errors have FastAPI's shape: {"detail": "…"}, or for 422 a list of
// {"loc": ["body", "plan_id"], "msg": …, "type": …}. Without a user: 401.
// Another user's plan: 404. A plan in a state that does not allow the
// request: 409. A body over the limit: 413. The coordinator not in the
// space: 503 with Retry-After.
package planhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// PrincipalHeader is the header that carries the user id: what Azure App
// Service's authentication (EasyAuth) sets, and MACAE's page sends.
const PrincipalHeader = "X-Ms-Client-Principal-Id"

// Defaults of the options.
const (
	DefaultMaxBody = 1 << 20
	DefaultTimeout = 30 * time.Second
	retryAfter     = "5" // seconds, for a 503
)

// Option configures Handler.
type Option func(*config) error

type config struct {
	user    func(*http.Request) (string, error)
	dev     string
	origins []string
	maxBody int64
	wait    time.Duration
	timeout time.Duration
	logger  *slog.Logger
}

// User sets how a request names its user: f returns the user id, "" when
// the request names none. Default: HeaderUser(PrincipalHeader). Put the
// handler behind a proxy that authenticates people and sets the header
// (Azure App Service does), never straight on the internet.
func User(f func(*http.Request) (string, error)) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("planhttp.User: nil")
		}
		c.user = f
		return nil
	}
}

// HeaderUser returns a User function that reads the user id from the
// header name.
func HeaderUser(name string) func(*http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		return strings.TrimSpace(r.Header.Get(name)), nil
	}
}

// DevUser names the user of the requests that name none, instead of
// answering them 401: for development on one machine, without an
// authenticating proxy.
func DevUser(id string) Option {
	return func(c *config) error {
		if id == "" {
			return errors.New("planhttp.DevUser: empty id")
		}
		c.dev = id
		return nil
	}
}

// AllowOrigins lets pages from these origins ("https://app.example", or
// "*" for any) call the API from a browser: CORS, with credentials,
// preflight requests answered on every route.
func AllowOrigins(origins ...string) Option {
	return func(c *config) error {
		c.origins = append(c.origins, origins...)
		return nil
	}
}

// MaxBody bounds a request body (default 1 MiB); a larger one is 413.
func MaxBody(n int64) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("planhttp.MaxBody(%d): at least 1", n)
		}
		c.maxBody = n
		return nil
	}
}

// WaitFor makes POST /input_task and /human_clarification_on_plan wait,
// up to d, for the planner's plan, and approvals wait until the steps they
// approved have run, before they answer: the synchronous behaviour of
// MACAE's backend, which its page, re-reading after each click, expects.
// Without it they answer once the change is committed.
func WaitFor(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 || d > time.Hour {
			return fmt.Errorf("planhttp.WaitFor(%v): between 0 and an hour", d)
		}
		c.wait = d
		return nil
	}
}

// Timeout bounds each call to the coordinator (default 30 s), on top of
// WaitFor's wait; a coordinator that does not answer in time is 504.
func Timeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("planhttp.Timeout(%v): must be positive", d)
		}
		c.timeout = d
		return nil
	}
}

// Logger sets where the handler logs failed requests (5xx). Default:
// nothing is logged.
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("planhttp.Logger: nil")
		}
		c.logger = l
		return nil
	}
}

// handler serves the API through its gateway agent.
type handler struct {
	cfg    config
	client client
	routes []*route
	mux    *http.ServeMux
}

// route is one path with its handlers by method.
type route struct {
	pattern string // as http.ServeMux takes it
	methods map[string]func(w http.ResponseWriter, r *http.Request, user string) *httpError
	public  bool // served without a user
}

func (rt *route) allow() string {
	ms := []string{http.MethodOptions}
	for m := range rt.methods {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return strings.Join(ms, ", ")
}

// Handler returns the HTTP handler of the API and the web page. Its calls
// go through gw, which must be in the coordinator's space and be one of its
// approvers (plan.Approver); the coordinator is named by its id.
func Handler(gw *agency.Agent, coordinator string, opts ...Option) (http.Handler, error) {
	if gw == nil {
		return nil, errors.New("planhttp: nil gateway agent")
	}
	if err := agency.ValidateID(coordinator); err != nil {
		return nil, fmt.Errorf("planhttp: coordinator: %w", err)
	}
	cfg := config{user: HeaderUser(PrincipalHeader), maxBody: DefaultMaxBody, timeout: DefaultTimeout}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("planhttp: nil option")
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("planhttp: %w", err)
		}
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{cfg: cfg, client: client{from: gw, coordinator: coordinator}, mux: http.NewServeMux()}
	h.add("/input_task", false, http.MethodPost, h.inputTask)
	h.add("/human_feedback", false, http.MethodPost, h.humanFeedback)
	h.add("/approve_step_or_steps", false, http.MethodPost, h.approve)
	h.add("/human_clarification_on_plan", false, http.MethodPost, h.clarify)
	h.add("/plans", false, http.MethodGet, h.plans)
	h.add("/steps/{plan_id}", false, http.MethodGet, h.steps)
	h.add("/plans/{plan_id}/events", false, http.MethodGet, h.events)
	h.add("/agent_messages/{session_id}", false, http.MethodGet, h.agentMessages)
	h.add("/messages", false, http.MethodGet, h.messages)
	h.add("/messages", false, http.MethodDelete, h.deleteMessages)
	h.add("/api/agent-tools", false, http.MethodGet, h.agentTools)
	h.add("/openapi.json", true, http.MethodGet, serveOpenAPI)
	h.add("/{$}", true, http.MethodGet, serveStatic)
	h.add("/assets/{file}", true, http.MethodGet, serveStatic)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, "Not Found"))
	})
	return h, nil
}

func (h *handler) add(pattern string, public bool, method string, f func(http.ResponseWriter, *http.Request, string) *httpError) {
	for _, rt := range h.routes {
		if rt.pattern == pattern {
			rt.methods[method] = f
			return
		}
	}
	rt := &route{pattern: pattern, public: public, methods: map[string]func(http.ResponseWriter, *http.Request, string) *httpError{method: f}}
	h.routes = append(h.routes, rt)
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, rt) })
}

// ServeHTTP answers CORS, then routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			writeError(w, h.internal(r, fmt.Sprintf("panic: %v", p)))
		}
	}()
	h.cors(w, r)
	h.mux.ServeHTTP(w, r)
}

// cors sets the CORS headers of an answer to an allowed origin, on every
// answer, errors included.
func (h *handler) cors(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin == "" || !h.allowed(origin) {
		return
	}
	hd := w.Header()
	hd.Set("Access-Control-Allow-Origin", origin)
	hd.Set("Access-Control-Allow-Credentials", "true")
	hd.Set("Access-Control-Expose-Headers", "Retry-After")
	hd.Add("Vary", "Origin")
}

func (h *handler) allowed(origin string) bool {
	return slices.Contains(h.cfg.origins, "*") || slices.Contains(h.cfg.origins, origin)
}

// serve answers a request for route rt: a preflight, a wrong method, a
// missing user, or the method's handler.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, rt *route) {
	if r.Method == http.MethodOptions {
		h.preflight(w, r, rt)
		return
	}
	f := rt.methods[r.Method]
	if f == nil && r.Method == http.MethodHead {
		f = rt.methods[http.MethodGet]
	}
	if f == nil {
		w.Header().Set("Allow", rt.allow())
		writeError(w, errorf(http.StatusMethodNotAllowed, "Method Not Allowed"))
		return
	}
	user := ""
	if !rt.public {
		u, err := h.cfg.user(r)
		if err != nil {
			writeError(w, errorf(http.StatusUnauthorized, "%v", err))
			return
		}
		if u == "" {
			u = h.cfg.dev
		}
		if u == "" {
			writeError(w, errorf(http.StatusUnauthorized, "no user: the request has no %s header", PrincipalHeader))
			return
		}
		if why := checkID("user id", u); why != "" {
			writeError(w, errorf(http.StatusUnauthorized, "the %s header: %s", PrincipalHeader, why))
			return
		}
		user = u
	}
	if e := f(w, r, user); e != nil {
		if e.status >= 500 {
			h.cfg.logger.Warn("planhttp: request failed", "method", r.Method, "path", r.URL.Path, "status", e.status, "detail", e.detail)
		}
		writeError(w, e)
	}
}

// preflight answers a CORS preflight (or a plain OPTIONS) for route rt.
func (h *handler) preflight(w http.ResponseWriter, r *http.Request, rt *route) {
	w.Header().Set("Allow", rt.allow())
	want := r.Header.Get("Access-Control-Request-Method")
	if want == "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if origin := r.Header.Get("Origin"); origin == "" || !h.allowed(origin) {
		writeError(w, errorf(http.StatusBadRequest, "Disallowed CORS origin"))
		return
	}
	hd := w.Header()
	hd.Set("Access-Control-Allow-Methods", rt.allow())
	if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
		hd.Set("Access-Control-Allow-Headers", req)
	}
	hd.Set("Access-Control-Max-Age", "600")
	if _, ok := rt.methods[want]; !ok && want != http.MethodOptions {
		writeError(w, errorf(http.StatusBadRequest, "Disallowed CORS method"))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// fail turns the error of a call to the coordinator into an answer.
func (h *handler) fail(r *http.Request, err error) *httpError {
	var ae *agency.ActionError
	switch {
	case errors.Is(err, errNotFound):
		return errorf(http.StatusNotFound, "%s", err.Error())
	case errors.Is(err, errConflict):
		return errorf(http.StatusConflict, "%s", err.Error())
	case errors.Is(err, agency.ErrNoRecipient), errors.Is(err, agency.ErrNotAdded):
		e := errorf(http.StatusServiceUnavailable, "the coordinator %s is not available; try again later", h.client.coordinator)
		e.header = http.Header{"Retry-After": {retryAfter}}
		return e
	case errors.Is(err, errBusy):
		e := errorf(http.StatusServiceUnavailable, "%s", err.Error())
		e.header = http.Header{"Retry-After": {retryAfter}}
		return e
	case errors.Is(err, agency.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusGatewayTimeout, "the coordinator %s did not answer in time", h.client.coordinator)
	case errors.Is(err, context.Canceled):
		return errorf(499, "the client went away")
	case errors.As(err, &ae) && ae.Type == agency.TypeInvalidArgs:
		return invalid(fieldError{Loc: loc(ae.Text), Msg: ae.Text, Type: "value_error"})
	case errors.As(err, &ae) && ae.Type == agency.TypePermissionDenied:
		return errorf(http.StatusInternalServerError, "the gateway agent %s may not call the coordinator: make it an approver (plan.Approver)", h.client.from.ID())
	}
	return h.internal(r, err)
}

// loc names the field an error text of the coordinator starts with
// ("updated_action: …").
func loc(text string) []string {
	if i := strings.Index(text, ": "); i > 0 && !strings.ContainsAny(text[:i], " \t\"") {
		return []string{"body", text[:i]}
	}
	return []string{"body"}
}
