package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With -demo the example runs end to end with no key and no model server:
// the scripted planner in the process turns the task into steps, which run
// once approved; requests without a user header are the user me's.
func TestDemo(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	p := start(t, "-demo", "-addr", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "p.db"))
	base := p.ready(true)
	post := func(path, body string) map[string]any {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %v", path, resp.StatusCode, v)
		}
		return v
	}
	r := post("/input_task", `{"session_id":"s1","description":"Onboard new employee Jessica Smith, starting 2025-06-02"}`)
	if !strings.HasPrefix(r["status"].(string), "Plan created") {
		t.Fatalf("input_task: %v", r)
	}
	post("/approve_step_or_steps", `{"plan_id":"`+r["plan_id"].(string)+`","session_id":"s1","approved":true}`)
	for _, want := range []string{
		"HrAgent.create_employee_record: employee record created for Jessica Smith",
		"HrAgent.schedule_orientation: ",
		"HrAgent.enroll_in_benefits: ",
		"TechSupportAgent.set_up_laptop: laptop ready for Jessica Smith",
		"TechSupportAgent.create_account: ",
	} {
		if l := p.next(); !strings.HasPrefix(l, want) {
			t.Errorf("printed %q, want %q…", l, want)
		}
	}
	resp, err := http.Get(base + "/plans?session_id=s1")
	if err != nil {
		t.Fatal(err)
	}
	var plans []map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&plans)
	resp.Body.Close()
	if len(plans) != 1 || plans[0]["overall_status"] != "completed" {
		t.Fatalf("plans: %v", plans)
	}

	// A rejected step: the scripted planner puts a buddy in its place.
	r = post("/input_task", `{"session_id":"s2","description":"Onboard new employee Ann Lee"}`)
	planID := r["plan_id"].(string)
	stepsOf := func() []map[string]any {
		resp, err := http.Get(base + "/steps/" + planID)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var steps []map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&steps)
		return steps
	}
	steps := stepsOf()
	if len(steps) != 4 {
		t.Fatalf("steps: %v", steps)
	}
	post("/approve_step_or_steps", `{"plan_id":"`+planID+`","session_id":"s2","step_id":"`+steps[1]["id"].(string)+`","approved":false,"human_feedback":"no benefits yet"}`)
	// The revised plan: the four steps of before and three new ones.
	for deadline := time.Now().Add(30 * time.Second); len(stepsOf()) != 7; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the plan was not revised: %v", stepsOf())
		}
	}
	post("/approve_step_or_steps", `{"plan_id":"`+planID+`","session_id":"s2","approved":true}`)
	for _, want := range []string{
		"HrAgent.create_employee_record: employee record created for Ann Lee",
		"HrAgent.assign_buddy: buddy assigned to Ann Lee",
		"TechSupportAgent.set_up_laptop: laptop ready for Ann Lee",
		"TechSupportAgent.create_account: ",
	} {
		if l := p.next(); !strings.HasPrefix(l, want) {
			t.Errorf("printed %q, want %q…", l, want)
		}
	}
	p.end()
}
