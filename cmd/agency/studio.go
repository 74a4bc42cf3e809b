package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// web holds Studio's page: no CDN, it works offline.
//
//go:embed web
var web embed.FS

// defaultStudioAddr is where Studio listens unless told otherwise: this
// machine only.
const defaultStudioAddr = "127.0.0.1:8420"

// tokenCookie carries Studio's token once a page has shown it.
const tokenCookie = "agency_studio_token"

// maxCallBody bounds the body of a call from the page.
const maxCallBody = 1 << 20

type studioFlags struct {
	addr        string
	token       string
	coordinator string
	approver    string
	store       string
}

func newStudioCmd(o *options) *cobra.Command {
	var sf studioFlags
	cmd := &cobra.Command{
		Use:   "studio",
		Short: "Serve Studio, a web page of the space, live",
		Long: `studio serves a web page, built into this command (it needs no network
beyond the space), that shows the space live: the agents and their actions,
with a form made from each action's argument schema that calls it and shows
the result or the error; a timeline of the messages (who asked whom what,
the answers, the errors, how long they took), with filters; the
conversations, who holds each and its transcript; and, with --coordinator,
the plans of a plan coordinator with their approvals (the demo's own,
with --demo). With --store, the store of a handoff team (actions/handoff),
Studio shows who holds each conversation by the store's record.

It listens on 127.0.0.1 unless --addr names another address; there it
requires a token (--token, or one made up and printed), which the printed
URL carries once and a cookie keeps.`,
		Example: `  agency studio
  agency --demo studio
  agency studio --coordinator GroupChatManager
  agency studio --addr 0.0.0.0:8420 --token "$(openssl rand -hex 16)"`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStudio(cmd.Context(), o, sf)
		},
	}
	f := cmd.Flags()
	f.StringVar(&sf.addr, "addr", defaultStudioAddr, "the address to listen on; any but a loopback one requires a token")
	f.StringVar(&sf.token, "token", "", "the token a page must show (default: one made up when --addr is not a loopback address)")
	f.StringVar(&sf.coordinator, "coordinator", "", "the id of a plan coordinator whose plans and approvals to show")
	f.StringVar(&sf.approver, "approver", "HumanAgent", "with --coordinator: the id Studio joins with to speak for people, one of the coordinator's approvers")
	f.StringVar(&sf.store, "store", "", "a handoff team's store (a SQLite file, or a postgres:// URL) whose record of who holds each conversation to show")
	return cmd
}

// studio serves the page and its API over one session.
type studio struct {
	s       *session
	o       *options
	token   string // empty: no token needed
	local   bool   // bound to a loopback address
	tl      *timeline
	hub     *hub
	convs   *conversations
	plans   http.Handler // nil without --coordinator
	store   store.Store  // a handoff team's store, or nil
	surveyM sync.Mutex   // one survey at a time
}

func runStudio(ctx context.Context, o *options, sf studioFlags) error {
	host, _, err := net.SplitHostPort(sf.addr)
	if err != nil {
		return usageError("--addr %q: %v", sf.addr, err)
	}
	local := isLoopback(host)
	token := sf.token
	if token == "" && !local {
		var b [16]byte
		_, _ = rand.Read(b[:])
		token = hex.EncodeToString(b[:])
	}
	s, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer s.close()

	st := &studio{s: s, o: o, token: token, local: local, tl: newTimeline(), hub: newHub(), convs: newConversations()}
	switch {
	case sf.store != "":
		hs, err := openStore(ctx, sf.store)
		if err != nil {
			return err
		}
		defer hs.Close()
		st.store = hs
	case s.demo != nil:
		st.store = s.demo.store
	}
	switch {
	case s.demo != nil && sf.coordinator == "":
		h, err := planhttp.Handler(s.demo.approver, demoCoordinator, planhttp.DevUser("studio"))
		if err != nil {
			return err
		}
		st.plans = h
	case sf.coordinator != "":
		gw, err := agency.NewAgent(sf.approver)
		if err != nil {
			return usageError("--approver %q: %v", sf.approver, err)
		}
		if err := s.sp.Add(ctx, gw); err != nil {
			return fmt.Errorf("joining as the plans' approver %q: %w", sf.approver, err)
		}
		h, err := planhttp.Handler(gw, sf.coordinator, planhttp.DevUser("studio"))
		if err != nil {
			return err
		}
		st.plans = h
	}

	ln, err := net.Listen("tcp", sf.addr)
	if err != nil {
		return err
	}
	// Requests' contexts end when Studio shuts down, so that the pages'
	// event streams let it.
	base, stopRequests := context.WithCancel(context.Background())
	defer stopRequests()
	srv := &http.Server{Handler: st.handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched := make(chan error, 1)
	ready := make(chan struct{})
	go func() { watched <- st.watch(watchCtx, ready) }()
	select {
	case <-ready:
	case err := <-watched:
		_ = ln.Close()
		return err
	}
	url := "http://" + ln.Addr().String() + "/"
	if token != "" {
		url += "?token=" + token
	}
	fmt.Fprintf(o.stderr, "Studio of %s at %s (Ctrl-C stops)\n", s.where, url)
	if s.demo != nil {
		go s.demo.play(ctx, s.agent, o.stderr)
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case werr := <-watched:
		if werr != nil {
			err = fmt.Errorf("watching the space: %w", werr)
		}
	case err = <-served:
	}
	stopRequests()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	stopWatch()
	return err
}

// watchRetry is how long Studio waits before it watches the exchange
// again after losing the broker.
const watchRetry = 2 * time.Second

// watch feeds the timeline and the conversations from the space until ctx
// ends, closing ready once it first sees every message. On a broker it
// watches again after a lost connection (the space's own agent reconnects
// by itself), saying so on stderr: what passed meanwhile is not shown.
func (st *studio) watch(ctx context.Context, ready chan struct{}) error {
	var once sync.Once
	for {
		err := st.s.watch(ctx, func() { once.Do(func() { close(ready) }) }, func(at time.Time, body []byte) {
			ev := st.tl.event(at, body)
			st.hub.publish(ev)
			if c, ok := st.convs.observe(ev); ok {
				st.hub.publishConversation(c)
			}
		})
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ready:
		default:
			return err // never started: a configuration to fix, not a blip
		}
		fmt.Fprintf(st.o.stderr, "agency: studio: %v; watching again in %v (what passes meanwhile is not shown)\n", err, watchRetry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(watchRetry):
		}
	}
}

// isLoopback reports whether host names this machine only.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// handler returns Studio's routes, behind its guard.
func (st *studio) handler() http.Handler {
	mux := http.NewServeMux()
	page, _ := fs.Sub(web, "web")
	assets := http.FileServerFS(page)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, page, "index.html")
	})
	mux.Handle("GET /studio/assets/", http.StripPrefix("/studio", assets))
	mux.HandleFunc("GET /studio/api/space", st.space)
	mux.HandleFunc("GET /studio/api/agents", st.agents)
	mux.HandleFunc("POST /studio/api/call", st.call)
	mux.HandleFunc("GET /studio/api/events", st.events)
	mux.HandleFunc("GET /studio/api/conversations", st.conversations)
	if st.plans != nil {
		// planhttp's page calls its API at absolute paths: the API is
		// served at the root, beside Studio's, and the page at /plans/.
		mux.HandleFunc("GET /plans/{$}", func(w http.ResponseWriter, r *http.Request) {
			r2 := r.Clone(r.Context())
			r2.URL.Path, r2.URL.RawPath = "/", ""
			st.plans.ServeHTTP(w, r2)
		})
		mux.Handle("GET /plans/assets/", http.StripPrefix("/plans", st.plans))
		mux.Handle("/plans", st.plans) // the API's list, not a redirect to the page
		mux.Handle("/", st.plans)
	}
	return st.guard(mux)
}

// guard lets through the requests Studio's page makes: with the token
// when one is needed; on a loopback address only those that name it as
// their host (a page of another site that a DNS trick points at
// 127.0.0.1 names its own); and for a change, only a JSON body from the
// same origin (a form of another site cannot send one).
func (st *studio) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st.local {
			host, _, err := net.SplitHostPort(r.Host)
			if err != nil {
				host = r.Host
			}
			if !isLoopback(strings.Trim(host, "[]")) {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "Studio on a loopback address answers requests for 127.0.0.1 or localhost only"})
				return
			}
		}
		if st.token != "" {
			switch {
			case sameToken(r.URL.Query().Get("token"), st.token):
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: st.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			case sameToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), st.token):
			default:
				c, err := r.Cookie(tokenCookie)
				if err != nil || !sameToken(c.Value, st.token) {
					writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Studio needs its token: open the URL it printed (…/?token=…), or send Authorization: Bearer TOKEN"})
					return
				}
			}
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if origin := r.Header.Get("Origin"); origin != "" && origin != "http://"+r.Host {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "cross-origin request refused"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func sameToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// space answers what the page shows in its header.
func (st *studio) space(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"where": st.s.where,
		"agent": st.s.agent.ID(),
		"demo":  st.s.demo != nil,
		"plans": st.plans != nil,
	})
}

// agents answers the survey of the space.
func (st *studio) agents(w http.ResponseWriter, r *http.Request) {
	st.surveyM.Lock()
	defer st.surveyM.Unlock()
	agents, err := st.s.survey(r.Context(), st.o)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	if agents == nil {
		agents = map[string]map[string]agency.ActionHelp{}
	}
	writeJSON(w, http.StatusOK, agents)
}

// callRequest is the page's call of an action.
type callRequest struct {
	Agent  string          `json:"agent"`
	Action string          `json:"action"`
	Args   json.RawMessage `json:"args"`
}

// callResult is its outcome: a value, or an error of a type.
type callResult struct {
	OK        bool            `json:"ok"`
	Value     json.RawMessage `json:"value,omitempty"`
	ErrorType string          `json:"error_type,omitempty"`
	Error     string          `json:"error,omitempty"`
	Elapsed   float64         `json:"elapsed_ms"`
}

// call runs an action as the page asks and answers its value or error.
func (st *studio) call(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "send the call as application/json"})
		return
	}
	var req callRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCallBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the call is not {\"agent\", \"action\", \"args\"}: " + err.Error()})
		return
	}
	if len(req.Args) == 0 || string(req.Args) == "null" {
		req.Args = json.RawMessage("{}")
	}
	if _, err := argsObject(string(req.Args)); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	start := time.Now()
	v, err := st.s.call(r.Context(), st.o, req.Agent, req.Action, req.Args)
	res := callResult{OK: err == nil, Value: v, Elapsed: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		var ae *agency.ActionError
		switch {
		case errors.As(err, &ae):
			res.ErrorType, res.Error = string(ae.Type), ae.Text
		case errors.Is(err, agency.ErrNoRecipient):
			res.ErrorType, res.Error = string(agency.TypeNotFound), err.Error()
		default:
			res.ErrorType, res.Error = "failed", err.Error()
		}
	}
	writeJSON(w, http.StatusOK, res)
}

// conversations answers the conversations the messages showed, with what
// the handoff team's store holds of them when Studio reads one.
func (st *studio) conversations(w http.ResponseWriter, r *http.Request) {
	list := st.convs.list()
	if st.store != nil {
		var err error
		if list, err = withStored(r.Context(), st.store, list); err != nil {
			fmt.Fprintf(st.o.stderr, "agency: studio: %v\n", err)
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// events streams the timeline and the conversations to a page, as
// server-sent events: first those of the backlog it has not seen (after
// Last-Event-ID), then each as it comes.
func (st *studio) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	after, _ := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64)
	past, ch := st.hub.subscribe(after)
	defer st.hub.unsubscribe(ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	for _, ev := range past {
		writeEvent(w, ev)
	}
	flusher.Flush()
	keepAlive := time.NewTicker(20 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return // fell behind: the browser reconnects and catches up
			}
			writeEvent(w, ev)
			flusher.Flush()
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		}
	}
}

// writeEvent writes one server-sent event.
func writeEvent(w http.ResponseWriter, ev event) {
	if ev.conversation != nil {
		b, _ := json.Marshal(ev.conversation)
		fmt.Fprintf(w, "event: conversation\ndata: %s\n\n", b)
		return
	}
	b, _ := json.Marshal(ev)
	fmt.Fprintf(w, "id: %d\nevent: message\ndata: %s\n\n", ev.Seq, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
