package planhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

type Person struct {
	Name string `json:"name" validate:"min=1"`
}

// fixture is a coordinator on the memory store with a scripted planner, one
// specialist, and the handler on an httptest server.
type fixture struct {
	t      *testing.T
	srv    *httptest.Server
	sp     *space.Local
	coord  *plan.Coordinator
	events chan plan.Event
	pl     *openaitest.Server
}

const onePlan = `{"steps":[{"agent":"HrAgent","action":"create_employee_record","args":{"name":"Jessica Smith"}},` +
	`{"agent":"HrAgent","action":"create_employee_record","args":{"name":"John Doe"}}],"summary":"Two records"}`

func newFixture(t *testing.T, hopts []planhttp.Option, script ...openaitest.Step) *fixture {
	return newFixtureWith(t, nil, hopts, script...)
}

// newFixtureWith is newFixture with more options for the coordinator.
func newFixtureWith(t *testing.T, copts []plan.Option, hopts []planhttp.Option, script ...openaitest.Step) *fixture {
	return newFixtureOn(t, store.NewMemory(), copts, hopts, script...)
}

// newFixtureOn is newFixtureWith on the store st.
func newFixtureOn(t *testing.T, st store.Store, copts []plan.Option, hopts []planhttp.Option, script ...openaitest.Step) *fixture {
	ctx := context.Background()
	pl := openaitest.NewServer(t, script...)
	f := &fixture{t: t, sp: space.NewLocal(), events: make(chan plan.Event, 256), pl: pl}
	coord, err := plan.NewCoordinator("GroupChatManager", st, append([]plan.Option{plan.Logger(testLogger(t)), plan.Observe(func(_ context.Context, e plan.Event) {
		select {
		case f.events <- e:
		default:
		}
	})}, copts...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.coord = coord
	planner, err := openai.New("PlannerAgent", openai.Logger(testLogger(t)), openai.BaseURL(pl.URL), openai.APIKey("test"), openai.HTTPClient(pl.Client()))
	if err != nil {
		t.Fatal(err)
	}
	hr := agency.MustNewAgent("HrAgent")
	agency.Handle(hr, "create_employee_record", plan.Idempotent(st, func(ctx context.Context, p Person) (string, error) {
		return "Record of " + p.Name, nil
	}), agency.Describe("Creates an employee record"), agency.AccessBySender(map[string]agency.Access{"GroupChatManager": agency.Permitted}, agency.Denied))
	gw := agency.MustNewAgent("HumanAgent")
	for _, a := range []*agency.Agent{coord.Agent(), planner.Agent(), hr, gw} {
		if err := f.sp.Add(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = f.sp.Close(ctx)
	})
	h, err := planhttp.Handler(gw, "GroupChatManager", hopts...)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) wait(what string, match func(plan.Event) bool) {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-f.events:
			if match(e) {
				return
			}
		case <-deadline:
			f.t.Fatalf("no event: %s", what)
		}
	}
}

// request sends a request with the given headers and returns the answer.
func (f *fixture) request(method, path string, body string, header map[string]string) (*http.Response, []byte) {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp, data
}

var u1 = map[string]string{"x-ms-client-principal-id": "u1", "Content-Type": "application/json"}

func (f *fixture) ok(method, path, body string) []byte {
	f.t.Helper()
	resp, data := f.request(method, path, body, u1)
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return data
}

// start creates a plan in session s1 and waits for its steps.
func (f *fixture) start() (planID string, steps []map[string]any) {
	data := f.ok("POST", "/input_task", `{"session_id":"s1","description":"Onboard two people"}`)
	var r map[string]any
	_ = json.Unmarshal(data, &r)
	planID = r["plan_id"].(string)
	f.wait("submitted", func(e plan.Event) bool { return e.Kind == plan.PlanSubmitted })
	f.wait("the planner's answer", func(e plan.Event) bool { return e.Kind == plan.PlannerSaid })
	_ = json.Unmarshal(f.ok("GET", "/steps/"+planID, ""), &steps)
	return planID, steps
}

func script() []openaitest.Step {
	return []openaitest.Step{
		{ToolCalls: []openaitest.ToolCall{{Name: "GroupChatManager__submit_plan", Arguments: onePlan}}},
		{Text: "Plan submitted."},
	}
}

// The API's answers have MACAE's shapes, as the OpenAPI document states
// them: every field present, null when unset, ts an integer, no id that
// looks like a number.
func TestShapes(t *testing.T) {
	f := newFixture(t, []planhttp.Option{planhttp.WaitFor(10 * time.Second)}, append(script(),
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "GroupChatManager__submit_plan",
			Arguments: `{"replace_from":2,"steps":[{"agent":"HrAgent","action":"create_employee_record","args":{"name":"John Doe"},"text":"John's record, later"}]}`}}},
		openaitest.Step{Text: "Revised."})...)
	f.pl.Add(script()...) // for the task of session s2
	doc := loadOpenAPI(t, f)
	planID, steps := f.start()
	f.ok("POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, steps[0]["id"], planID))
	f.ok("POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":false,"human_feedback":"not now"}`, steps[1]["id"], planID))
	f.wait("revised", func(e plan.Event) bool { return e.Kind == plan.PlanSubmitted })
	f.wait("the planner's answer", func(e plan.Event) bool { return e.Kind == plan.PlannerSaid })

	for _, c := range []struct{ method, path, body string }{
		{"POST", "/input_task", `{"session_id":"s2","description":"x"}`},
		{"GET", "/plans", ""},
		{"GET", "/plans?session_id=s1", ""},
		{"GET", "/steps/" + planID, ""},
		{"GET", "/agent_messages/s1", ""},
		{"GET", "/messages", ""},
		{"GET", "/api/agent-tools", ""},
	} {
		data := f.ok(c.method, c.path, c.body)
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		path, _, _ := strings.Cut(c.path, "?")
		if strings.HasPrefix(path, "/steps/") {
			path = "/steps/{plan_id}"
		}
		if strings.HasPrefix(path, "/agent_messages/") {
			path = "/agent_messages/{session_id}"
		}
		schema := doc.response(t, path, strings.ToLower(c.method), "200")
		if errs := doc.validate(schema, v, "$"); len(errs) > 0 {
			t.Errorf("%s %s: %s\n%s", c.method, c.path, strings.Join(errs, "\n"), data)
		}
		checkValues(t, c.path, v)
	}

	// Newest first, and limit.
	var all []map[string]any
	_ = json.Unmarshal(f.ok("GET", "/plans", ""), &all)
	if len(all) != 2 || all[0]["session_id"] != "s2" || all[1]["session_id"] != "s1" {
		t.Errorf("GET /plans: sessions %v, %v; want s2, s1", all[0]["session_id"], all[1]["session_id"])
	}
	_ = json.Unmarshal(f.ok("GET", "/plans?limit=1", ""), &all)
	if len(all) != 1 || all[0]["session_id"] != "s2" {
		t.Errorf("GET /plans?limit=1: %d plans", len(all))
	}

	// The rejection's feedback is kept on the step and shown as a message
	// of the person with the step's id; a step without a reply has null.
	var got []map[string]any
	_ = json.Unmarshal(f.ok("GET", "/steps/"+planID, ""), &got)
	if got[1]["human_feedback"] != "not now" || got[1]["status"] != "rejected" || got[1]["human_approval_status"] != "rejected" {
		t.Errorf("rejected step: %v", got[1])
	}
	if got[0]["agent_reply"] != "Record of Jessica Smith" || got[0]["human_feedback"] != nil || got[0]["human_approval_status"] != "accepted" ||
		got[0]["auto_approved"] != false {
		t.Errorf("approved step: %v", got[0])
	}
	var msgs []map[string]any
	_ = json.Unmarshal(f.ok("GET", "/agent_messages/s1", ""), &msgs)
	found := false
	for _, m := range msgs {
		if m["source"] == "HumanAgent" && m["content"] == "not now" && m["step_id"] == steps[1]["id"] {
			found = true
		}
	}
	if !found {
		t.Errorf("no message with the feedback and the step's id: %v", msgs)
	}
}

var integer = regexp.MustCompile(`^[+-]?[0-9]+$`)

// checkValues checks what a schema cannot: ts is a plausible integer
// number of seconds, and ids are never integer-looking.
func checkValues(t *testing.T, path string, v any) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			checkValues(t, path, e)
		}
	case map[string]any:
		for k, e := range x {
			switch {
			case k == "ts" || k == "updated_ts":
				n, ok := e.(float64)
				if !ok || n != float64(int64(n)) || n < 1.7e9 || n > 1e10 {
					t.Errorf("%s: %s = %v, want whole seconds since 1970", path, k, e)
				}
			case k == "id" || strings.HasSuffix(k, "_id"):
				if s, ok := e.(string); ok && integer.MatchString(s) {
					t.Errorf("%s: %s = %q looks like an integer", path, k, s)
				}
			}
			checkValues(t, path, e)
		}
	}
}

// Every API route needs a user: 401 without one (unless DevUser names
// one), and the user's documents only.
func TestIdentity(t *testing.T) {
	f := newFixture(t, nil, script()...)
	planID, _ := f.start()
	for _, r := range apiRoutes(planID) {
		resp, data := f.request(r.method, r.path, r.body, map[string]string{"Content-Type": "application/json"})
		if resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(data, []byte(`"detail"`)) {
			t.Errorf("%s %s without a user: %d %s", r.method, r.path, resp.StatusCode, data)
		}
	}
	dev := newFixture(t, []planhttp.Option{planhttp.DevUser("u1")}, script()...)
	resp, data := dev.request("POST", "/input_task", `{"description":"x"}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with DevUser: %d %s", resp.StatusCode, data)
	}
	var r map[string]any
	_ = json.Unmarshal(data, &r)
	if r["user_id"] != "u1" || r["session_id"] == "" {
		t.Errorf("with DevUser: %v", r)
	}
	// Another user's documents are not deleted, nor listed.
	resp, data = f.request("DELETE", "/messages", "", map[string]string{"x-ms-client-principal-id": "u2"})
	if resp.StatusCode != http.StatusOK || !bytes.Contains(data, []byte(`"deleted":0`)) {
		t.Errorf("DELETE /messages as u2: %d %s", resp.StatusCode, data)
	}
	var all []any
	_ = json.Unmarshal(f.ok("GET", "/messages", ""), &all)
	if len(all) == 0 {
		t.Fatal("u1 has no documents")
	}
	_ = json.Unmarshal(f.ok("DELETE", "/messages", ""), &r)
	if int(r["deleted"].(float64)) != len(all) {
		t.Errorf("deleted %v of %d documents", r["deleted"], len(all))
	}
	resp, _ = f.request("GET", "/plans?session_id=s1", "", u1)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("after DELETE /messages: %d", resp.StatusCode)
	}
}

type apiRoute struct{ method, path, body string }

func apiRoutes(planID string) []apiRoute {
	return []apiRoute{
		{"POST", "/input_task", `{"description":"x"}`},
		{"POST", "/human_feedback", `{"step_id":"a","plan_id":"b","session_id":"s1","approved":true}`},
		{"POST", "/approve_step_or_steps", `{"plan_id":"b","session_id":"s1","approved":true}`},
		{"POST", "/human_clarification_on_plan", `{"plan_id":"b","session_id":"s1","human_clarification":"x"}`},
		{"GET", "/plans", ""},
		{"GET", "/steps/" + planID, ""},
		{"GET", "/plans/" + planID + "/events", ""},
		{"GET", "/agent_messages/s1", ""},
		{"GET", "/messages", ""},
		{"DELETE", "/messages", ""},
		{"GET", "/api/agent-tools", ""},
	}
}

// CORS: preflight on every route, and the headers on errors too.
func TestCORS(t *testing.T) {
	f := newFixture(t, []planhttp.Option{planhttp.AllowOrigins("https://app.example")}, script()...)
	for _, r := range apiRoutes("p") {
		resp, data := f.request("OPTIONS", r.path, "", map[string]string{"Origin": "https://app.example",
			"Access-Control-Request-Method": r.method, "Access-Control-Request-Headers": "x-ms-client-principal-id, content-type"})
		h := resp.Header
		if resp.StatusCode != http.StatusOK || h.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			!strings.Contains(h.Get("Access-Control-Allow-Methods"), r.method) ||
			h.Get("Access-Control-Allow-Headers") != "x-ms-client-principal-id, content-type" || h.Get("Access-Control-Allow-Credentials") != "true" {
			t.Errorf("preflight %s %s: %d %v %s", r.method, r.path, resp.StatusCode, h, data)
		}
		resp, _ = f.request("OPTIONS", r.path, "", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": r.method})
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from another origin %s: %d %v", r.path, resp.StatusCode, resp.Header)
		}
		// An error answer (no user) carries the CORS headers.
		resp, _ = f.request(r.method, r.path, r.body, map[string]string{"Origin": "https://app.example"})
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
			t.Errorf("%s %s error: %d without CORS headers %v", r.method, r.path, resp.StatusCode, resp.Header)
		}
	}
}

// Bad requests: FastAPI's shapes and codes, naming the field.
func TestErrors(t *testing.T) {
	f := newFixture(t, []planhttp.Option{planhttp.MaxBody(1024)}, script()...)
	planID, steps := f.start()
	cases := []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/input_task", `{"session_id":"s9"`, 400, `"detail":"body: not valid JSON`},
		{"POST", "/input_task", `[1]`, 400, `must be a JSON object`},
		{"POST", "/input_task", `{"session_id":"s9"}`, 422, `"loc":["body","description"],"msg":"field required"`},
		{"POST", "/input_task", `{"description":7}`, 422, `"loc":["body","description"],"msg":"str type expected"`},
		{"POST", "/input_task", `{"description":"` + strings.Repeat("x", 2000) + `"}`, 413, `"detail":"body: larger than the limit of 1024 bytes"`},
		{"POST", "/input_task", `{"session_id":"s1","description":"again"}`, 409, `already has a plan`},
		{"POST", "/human_feedback", `{"plan_id":"p","session_id":"s1","approved":"yes"}`, 422, `"loc":["body","step_id"]`},
		{"POST", "/human_feedback", `{"step_id":"x","plan_id":"p","session_id":"s1","approved":"yes"}`, 422, `"loc":["body","approved"],"msg":"value could not be parsed to a boolean"`},
		{"POST", "/human_feedback", fmt.Sprintf(`{"step_id":"nope","plan_id":%q,"session_id":"s1","approved":true}`, planID), 404, `"detail":"Step not found"`},
		{"POST", "/approve_step_or_steps", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true,"updated_action":"not json"}`, steps[0]["id"], planID), 422, `"loc":["body","updated_action"]`},
		{"POST", "/approve_step_or_steps", `{"plan_id":"nope","session_id":"nope","approved":true}`, 404, `"detail":"Plan not found"`},
		{"GET", "/plans?session_id=nope", "", 404, `{"detail":"Plan not found"}`},
		{"GET", "/plans?limit=zero", "", 422, `"loc":["query","limit"]`},
		{"GET", "/steps/nope", "", 404, `"detail":"Plan not found"`},
		{"GET", "/agent_messages/nope", "", 404, `"detail":"Session not found"`},
		{"GET", "/nowhere", "", 404, `{"detail":"Not Found"}`},
		{"PUT", "/plans", "", 405, `{"detail":"Method Not Allowed"}`},
	}
	for _, c := range cases {
		resp, data := f.request(c.method, c.path, c.body, u1)
		if resp.StatusCode != c.code || !bytes.Contains(data, []byte(c.want)) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s %.40s: %d %s, want %d with %s", c.method, c.path, c.body, resp.StatusCode, data, c.code, c.want)
		}
	}
	// A step that has run cannot be approved again.
	f.ok("POST", "/approve_step_or_steps", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, steps[0]["id"], planID))
	f.wait("step 1 completed", func(e plan.Event) bool { return e.StepID == steps[0]["id"] && e.Status == "completed" })
	resp, data := f.request("POST", "/approve_step_or_steps", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, steps[0]["id"], planID), u1)
	if resp.StatusCode != http.StatusConflict || !bytes.Contains(data, []byte("step 1 is completed")) {
		t.Errorf("approving a completed step: %d %s", resp.StatusCode, data)
	}
}

// Without the coordinator: 503 with Retry-After (and CORS headers).
func TestCoordinatorAbsent(t *testing.T) {
	f := newFixture(t, []planhttp.Option{planhttp.AllowOrigins("*")}, script()...)
	if err := f.sp.Remove(t.Context(), "GroupChatManager"); err != nil {
		t.Fatal(err)
	}
	for _, r := range apiRoutes("p") {
		h := map[string]string{"x-ms-client-principal-id": "u1", "Origin": "https://any.example"}
		resp, data := f.request(r.method, r.path, r.body, h)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			resp.Header.Get("Access-Control-Allow-Origin") != "https://any.example" || !bytes.Contains(data, []byte(`"detail"`)) {
			t.Errorf("%s %s: %d %v %s", r.method, r.path, resp.StatusCode, resp.Header, data)
		}
	}
}

// An approval is committed before the answer; with WaitFor, the approved
// steps have run too.
func TestApprovalCommittedBeforeAnswer(t *testing.T) {
	for _, wait := range []time.Duration{0, 10 * time.Second} {
		f := newFixture(t, []planhttp.Option{planhttp.WaitFor(wait)}, script()...)
		planID, steps := f.start()
		f.ok("POST", "/approve_step_or_steps", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, steps[0]["id"], planID))
		var got []map[string]any
		_ = json.Unmarshal(f.ok("GET", "/steps/"+planID, ""), &got)
		st := got[0]["status"]
		if wait == 0 && !slices.Contains([]any{"approved", "action_requested", "completed"}, st) {
			t.Errorf("right after the approval, step 1 is %v", st)
		}
		if wait > 0 && (st != "completed" || got[1]["status"] != "awaiting_feedback") {
			t.Errorf("with WaitFor, right after the approval the steps are %v, %v", st, got[1]["status"])
		}
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// An approval with updated_action runs the step with those arguments.
func TestUpdatedAction(t *testing.T) {
	f := newFixture(t, []planhttp.Option{planhttp.WaitFor(10 * time.Second)}, script()...)
	planID, steps := f.start()
	f.ok("POST", "/approve_step_or_steps", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true,"updated_action":"{\"name\":\"Jane Roe\"}"}`, steps[0]["id"], planID))
	var got []map[string]any
	_ = json.Unmarshal(f.ok("GET", "/steps/"+planID, ""), &got)
	if got[0]["agent_reply"] != "Record of Jane Roe" || got[0]["updated_action"] != `{"name":"Jane Roe"}` {
		t.Errorf("step 1: %v", got[0])
	}
}
