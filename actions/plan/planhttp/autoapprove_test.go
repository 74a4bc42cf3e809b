package planhttp_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
)

// A step the coordinator's AutoApprove rule approved shows as approved
// (accepted) with auto_approved true, in every answer that has steps and
// as the OpenAPI document says; a step a person approved has it false.
func TestAutoApprovedShape(t *testing.T) {
	jessica := func(s plan.Step) bool { return strings.Contains(string(s.Args), "Jessica") }
	f := newFixtureWith(t, []plan.Option{plan.AutoApprove(jessica)}, []planhttp.Option{planhttp.WaitFor(10 * time.Second)}, script()...)
	doc := loadOpenAPI(t, f)
	planID, _ := f.start()

	stepsOf := func() []map[string]any {
		var steps []map[string]any
		data := f.ok("GET", "/steps/"+planID, "")
		var v any
		_ = json.Unmarshal(data, &v)
		if errs := doc.validate(doc.response(t, "/steps/{plan_id}", "get", "200"), v, "$"); len(errs) > 0 {
			t.Errorf("GET /steps: %s\n%s", strings.Join(errs, "\n"), data)
		}
		_ = json.Unmarshal(data, &steps)
		return steps
	}
	// Step 1 runs without a person, then step 2 waits for one (start may
	// have seen its event go by).
	steps := stepsOf()
	for deadline := time.Now().Add(10 * time.Second); steps[1]["status"] != "awaiting_feedback"; steps = stepsOf() {
		if time.Now().After(deadline) {
			t.Fatalf("step 2 never awaited a person: %v", steps)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := steps[0]; s["status"] != "completed" || s["human_approval_status"] != "accepted" || s["auto_approved"] != true ||
		s["human_feedback"] != nil || s["agent_reply"] != "Record of Jessica Smith" {
		t.Errorf("the rule's step: %v", s)
	}
	if s := steps[1]; s["status"] != "awaiting_feedback" || s["human_approval_status"] != "requested" || s["auto_approved"] != false {
		t.Errorf("the person's step: %v", s)
	}
	// The other answers with steps say the same.
	for _, c := range []struct{ path, schema string }{{"/plans?session_id=s1", "/plans"}, {"/messages", "/messages"}} {
		data := f.ok("GET", c.path, "")
		var v any
		_ = json.Unmarshal(data, &v)
		if errs := doc.validate(doc.response(t, c.schema, "get", "200"), v, "$"); len(errs) > 0 {
			t.Errorf("GET %s: %s\n%s", c.path, strings.Join(errs, "\n"), data)
		}
		if !strings.Contains(string(data), `"auto_approved":true`) {
			t.Errorf("GET %s does not show the automatic approval: %s", c.path, data)
		}
	}
	// The log says it, in the coordinator's name.
	var msgs []map[string]any
	_ = json.Unmarshal(f.ok("GET", "/agent_messages/s1", ""), &msgs)
	found := false
	for _, m := range msgs {
		if m["source"] == "GroupChatManager" && m["step_id"] == steps[0]["id"] && strings.Contains(m["content"].(string), "approved automatically") {
			found = true
		}
	}
	if !found {
		t.Errorf("no log entry of the automatic approval: %v", msgs)
	}

	f.ok("POST", "/human_feedback", fmt.Sprintf(`{"step_id":%q,"plan_id":%q,"session_id":"s1","approved":true}`, steps[1]["id"], planID))
	steps = stepsOf()
	if s := steps[1]; s["status"] != "completed" || s["human_approval_status"] != "accepted" || s["auto_approved"] != false {
		t.Errorf("the person's step after the approval: %v", s)
	}
}

// The page in a real browser: the step the rule approved shows as
// completed and "Approved automatically", with no buttons; the person's
// step waits with its buttons, and once approved is not marked automatic.
func TestBrowserAutoApproved(t *testing.T) {
	exe := browser(t)
	jessica := func(s plan.Step) bool { return strings.Contains(string(s.Args), "Jessica") }
	f := newFixtureWith(t, []plan.Option{plan.AutoApprove(jessica)}, []planhttp.Option{planhttp.DevUser("u1")}, script()...)
	ctx := openBrowser(t, exe)
	step := func(n int) string { return fmt.Sprintf(`#steps tr[data-seq="%d"]`, n) }
	var first, second string
	var buttons int
	err := chromedp.Run(ctx,
		chromedp.Navigate(f.srv.URL+"/"),
		chromedp.WaitVisible("#task-description", chromedp.ByQuery),
		chromedp.SendKeys("#task-description", "Onboard Jessica Smith and John Doe", chromedp.ByQuery),
		chromedp.Click("#task-create", chromedp.ByQuery),
		chromedp.WaitVisible(step(2)+`[data-status="awaiting_feedback"] button.approve`, chromedp.ByQuery),
		chromedp.WaitVisible(step(1)+`[data-status="completed"][data-auto="true"] .auto`, chromedp.ByQuery),
		chromedp.Text(step(1), &first, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#steps tr[data-seq="1"] button').length`, &buttons),
		chromedp.Click(step(2)+" button.approve", chromedp.ByQuery),
		chromedp.WaitVisible(`#plan-status.s-completed`, chromedp.ByQuery),
		chromedp.WaitVisible(step(2)+`[data-status="completed"]:not([data-auto])`, chromedp.ByQuery),
		chromedp.Text(step(2), &second, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first, "Approved automatically") || !strings.Contains(first, "Record of Jessica Smith") {
		t.Errorf("step 1 shows %q", first)
	}
	if buttons != 0 {
		t.Errorf("step 1 shows %d buttons", buttons)
	}
	if strings.Contains(second, "automatically") || !strings.Contains(second, "Record of John Doe") {
		t.Errorf("step 2 shows %q", second)
	}
}
