package planhttp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/pgstore/pgtest"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
)

// byteStores are the stores the byte tests run on: what PostgreSQL
// cannot store (invalid UTF-8, NUL) must be answered as SQLite's is.
func byteStores(t *testing.T) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"SQLite": func(t *testing.T) store.Store {
			st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "p.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"PostgreSQL": func(t *testing.T) store.Store { return pgtest.New(t) },
	}
}

// Bytes no store can keep (invalid UTF-8, NUL) in the user, a path, a
// query or a body are refused before the store is touched: 401 for the
// user, 400 for the rest, with a JSON error that carries no internal
// error's text; alike on SQLite and PostgreSQL.
func TestBadBytes(t *testing.T) {
	for name, open := range byteStores(t) {
		t.Run(name, func(t *testing.T) {
			f := newFixtureOn(t, open(t), nil, nil, script()...)
			planID, steps := f.start()
			step := steps[0]["id"].(string)
			bad := map[string]string{"x-ms-client-principal-id": "\xff\xfe", "Content-Type": "application/json"}
			cases := []struct {
				method, path, body string
				header             map[string]string
				code               int
				want               string
			}{
				{"GET", "/plans", "", bad, 401, "user"},
				{"POST", "/input_task", `{"session_id":"s7","description":"x"}`, bad, 401, "user"},
				{"GET", "/messages", "", bad, 401, "user"},
				{"DELETE", "/messages", "", bad, 401, "user"},
				{"GET", "/api/agent-tools", "", bad, 401, "user"},
				{"GET", "/steps/a%00b", "", u1, 400, "plan_id"},
				{"GET", "/steps/%FF%FE", "", u1, 400, "plan_id"},
				{"GET", "/steps/" + strings.Repeat("x", 300), "", u1, 400, "plan_id"},
				{"GET", "/agent_messages/%FF%FE", "", u1, 400, "session_id"},
				{"GET", "/agent_messages/s%00", "", u1, 400, "session_id"},
				{"GET", "/plans?session_id=%FF%FE", "", u1, 400, "session_id"},
				{"GET", "/plans?session_id=s%00", "", u1, 400, "session_id"},
				{"POST", "/input_task", `{"session_id":"s\u0000","description":"x"}`, u1, 400, "session_id"},
				{"POST", "/input_task", "{\"session_id\":\"s\xff\xfe\",\"description\":\"x\"}", u1, 400, "UTF-8"},
				{"POST", "/approve_step_or_steps", `{"plan_id":"p\u0000","session_id":"s1","approved":true}`, u1, 400, "plan_id"},
				{"POST", "/approve_step_or_steps", fmt.Sprintf(`{"plan_id":%q,"session_id":"s\u0000","approved":true}`, planID), u1, 400, "session_id"},
				{"POST", "/human_feedback", fmt.Sprintf(`{"step_id":"%s\u0000","plan_id":%q,"session_id":"s1","approved":true}`, step, planID), u1, 400, "step_id"},
				{"POST", "/human_clarification_on_plan", `{"plan_id":"\u0000","session_id":"s1","human_clarification":"x"}`, u1, 400, "plan_id"},
				{"POST", "/input_task", `{"session_id":"s7","description":"lone \ud800 surrogate"}`, u1, 400, "surrogate"},
				{"POST", "/input_task", `{"session_id":"s7","description":"lone \udc00 low"}`, u1, 400, "surrogate"},
				{"POST", "/input_task", `{"session_id":"s7","description":"high \ud800\u0041 then not low"}`, u1, 400, "surrogate"},
				{"POST", "/input_task", `{"session_id":"s7","description":"a\u0000b"}`, u1, 400, "description: holds a NUL byte"},
				{"POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true,"human_feedback":"a\u0000"}`, step, planID), u1, 400, "human_feedback: holds a NUL byte"},
				{"POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true,"updated_action":"\u0000"}`, step, planID), u1, 400, "updated_action: holds a NUL byte"},
				{"POST", "/human_clarification_on_plan", fmt.Sprintf(`{"plan_id":%q,"session_id":"s1","human_clarification":"x\u0000"}`, planID), u1, 400, "human_clarification: holds a NUL byte"},
				{"POST", "/input_task", fmt.Sprintf(`{"session_id":%q,"description":"x"}`, strings.Repeat("é", 200)), u1, 422, "at most 255 bytes"},
			}
			for _, c := range cases {
				resp, data := f.request(c.method, c.path, c.body, c.header)
				var v struct {
					Detail any `json:"detail"`
				}
				if resp.StatusCode != c.code || resp.Header.Get("Content-Type") != "application/json" ||
					json.Unmarshal(data, &v) != nil || !strings.Contains(fmt.Sprint(v.Detail), c.want) {
					t.Errorf("%s %q %q: %d %s, want %d with a JSON detail naming %s", c.method, c.path, c.body, resp.StatusCode, data, c.code, c.want)
				}
				if bytes.Contains(data, []byte("SQLSTATE")) || bytes.Contains(data, []byte("invalid byte sequence")) {
					t.Errorf("%s %q: the answer carries the database's error: %s", c.method, c.path, data)
				}
			}
			// The plan is as it was.
			var got []map[string]any
			_ = json.Unmarshal(f.ok("GET", "/steps/"+planID, ""), &got)
			if len(got) != 2 || got[0]["status"] != "awaiting_feedback" {
				t.Errorf("the plan changed: %v", got)
			}
		})
	}
}

// A body that is not valid UTF-8 is refused as it is (400), not read with
// its bad bytes replaced by U+FFFD.
func TestBodyNotUTF8(t *testing.T) {
	f := newFixture(t, []planhttp.Option{}, script()...)
	for _, body := range []string{
		"{\"session_id\":\"s2\",\"description\":\"Onboard \xff\xfe Jessica\"}",
		"{\"session_id\":\"s2\",\"description\":\"x\",\"other\":\"\xc3\"}",
		"{\"session_id\":\"s2\",\"description\":\"x\xed\xa0\x80\"}",
	} {
		resp, data := f.request("POST", "/input_task", body, u1)
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(data, []byte(`"detail":"body: not valid UTF-8`)) {
			t.Errorf("POST /input_task %q: %d %s, want 400 body: not valid UTF-8", body, resp.StatusCode, data)
		}
	}
	resp, data := f.request("GET", "/plans?session_id=s2", "", u1)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a plan was created: %d %s", resp.StatusCode, data)
	}
	// A surrogate pair, escaped, is one character and is taken.
	resp, data = f.request("POST", "/input_task", `{"session_id":"s3","description":"smile \ud83d\ude00"}`, u1)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), "smile \U0001F600") {
		t.Errorf("POST /input_task with an escaped surrogate pair: %d %s", resp.StatusCode, data)
	}
}

// A 5xx answer carries no internal error's text: the error is logged
// with a request id, and the answer carries that id.
func TestInternalErrorHidden(t *testing.T) {
	var log syncBuffer
	st := store.NewMemory()
	f := newFixtureOn(t, st, nil, []planhttp.Option{planhttp.Logger(slog.New(slog.NewTextHandler(&log, nil)))}, script()...)
	f.start()
	st.Close() // every call of the coordinator now fails with store: closed
	resp, data := f.request("GET", "/plans", "", u1)
	var v struct {
		Detail    string `json:"detail"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(data, &v); err != nil || resp.StatusCode != http.StatusInternalServerError || v.RequestID == "" {
		t.Fatalf("GET /plans on a closed store: %d %s, want 500 with a request id", resp.StatusCode, data)
	}
	if bytes.Contains(data, []byte("store")) || !strings.Contains(v.Detail, v.RequestID) {
		t.Errorf("the answer %s says more than the request id", data)
	}
	if l := log.String(); !strings.Contains(l, "request_id="+v.RequestID) || !strings.Contains(l, "store: closed") {
		t.Errorf("the log does not hold the error with its request id:\n%s", l)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
