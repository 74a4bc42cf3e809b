package planhttp_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/actions/plan/planhttp"
	"github.com/seed72275b23/agency-go/internal/testenv"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the browser test's screenshot to docs/img/plans.png")

// browser returns the path of a Chromium, or skips the test (fails it
// under CI=true) when there is none.
func browser(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium on PATH (CI=true): install the Debian package chromium")
	}
	const msg = "no Chromium on PATH; install it (apt-get install chromium) to run the browser test"
	testenv.Note("Chromium", msg)
	t.Skip(msg)
	return ""
}

// A person uses the page in a real browser: creates a task, approves the
// first step, rejects the second with a comment, sees the revised plan,
// approves the rest and sees the plan completed.
func TestBrowser(t *testing.T) {
	exe := browser(t)
	comment := "John starts next month; plan it later"
	f := newFixture(t, []planhttp.Option{planhttp.DevUser("u1")}, append(script(),
		openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
			if !strings.Contains(r.Messages[len(r.Messages)-1].Content, comment) {
				t.Errorf("the replan request lacks the comment")
			}
			return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "GroupChatManager__submit_plan",
				Arguments: `{"replace_from":2,"steps":[{"agent":"HrAgent","action":"create_employee_record","args":{"name":"John Doe"},"text":"Create John Doe's record next month"}]}`}}}
		}},
		openaitest.Step{Text: "Revised: John's record comes later."})...)

	ctx := openBrowser(t, exe)

	step := func(n int) string { return `#steps tr[data-seq="` + string(rune('0'+n)) + `"]` }
	var screenshot []byte
	err := chromedp.Run(ctx,
		chromedp.Navigate(f.srv.URL+"/"),
		chromedp.WaitVisible("#task-description", chromedp.ByQuery),
		chromedp.SendKeys("#task-description", "Onboard Jessica Smith and John Doe", chromedp.ByQuery),
		chromedp.Click("#task-create", chromedp.ByQuery),
		// The plan shows with its first step awaiting feedback.
		chromedp.WaitVisible(step(1)+`[data-status="awaiting_feedback"] button.approve`, chromedp.ByQuery),
		chromedp.WaitVisible(`//li[@data-source="PlannerAgent"][contains(., "Plan submitted.")]`, chromedp.BySearch),
		chromedp.Click(step(1)+" button.approve", chromedp.ByQuery),
		chromedp.WaitVisible(step(1)+`[data-status="completed"]`, chromedp.ByQuery),
		// Step 2: rejected with a comment; the planner revises the plan.
		chromedp.WaitVisible(step(2)+`[data-status="awaiting_feedback"] input.comment`, chromedp.ByQuery),
		chromedp.SendKeys(step(2)+" input.comment", comment, chromedp.ByQuery),
		chromedp.Click(step(2)+" button.reject", chromedp.ByQuery),
		chromedp.WaitVisible(step(2)+`[data-status="rejected"]`, chromedp.ByQuery),
		chromedp.WaitVisible(step(3)+`[data-status="awaiting_feedback"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#messages li[data-source="PlannerAgent"]`, chromedp.ByQuery),
		// Approve the rest: the plan completes.
		chromedp.Click("#approve-all", chromedp.ByQuery),
		chromedp.WaitVisible(`#plan-status.s-completed`, chromedp.ByQuery),
		chromedp.WaitVisible(step(3)+`[data-status="completed"]`, chromedp.ByQuery),
		chromedp.CaptureScreenshot(&screenshot),
	)
	if err != nil {
		t.Fatal(err)
	}
	var feedback string
	if err := chromedp.Run(ctx, chromedp.Text(step(2), &feedback, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(feedback, comment) {
		t.Errorf("step 2 shows %q, want the comment", feedback)
	}
	out := filepath.Join(t.TempDir(), "plans.png")
	if *updateScreenshot {
		out = filepath.Join("..", "..", "..", "docs", "img", "plans.png")
	}
	if err := os.WriteFile(out, screenshot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(screenshot))
}

// openBrowser starts a headless Chromium for the test and returns the
// context to run its actions in; the browser is closed when the test ends.
func openBrowser(t *testing.T, exe string) context.Context {
	t.Helper()
	// A fresh profile, removed once the browser is gone (it may still be
	// writing to it when the test's own TempDir would be removed).
	profile, err := os.MkdirTemp("", "plans-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(profile) })
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1100, 760),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(cancelC)
	t.Cleanup(func() { _ = chromedp.Cancel(ctx) }) // closes the browser and waits for it
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A person answers the planner's question on the page: the question shows,
// the answer goes to the planner, and the plan made from it can be
// approved to completion.
func TestBrowserClarification(t *testing.T) {
	exe := browser(t)
	question, answer := "What is Jessica's start date?", "2025-06-02"
	f := newFixture(t, []planhttp.Option{planhttp.DevUser("u1")},
		openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "GroupChatManager__submit_plan",
			Arguments: `{"steps":[{"agent":"HrAgent","action":"create_employee_record","args":{"name":"Jessica Smith"}}],"clarification_request":"` + question + `"}`}}},
		openaitest.Step{Text: "I asked for the start date."},
		openaitest.Step{Func: func(r openaitest.Request) openaitest.Step {
			if !strings.Contains(r.Messages[len(r.Messages)-1].Content, answer) {
				t.Errorf("the planner's request lacks the answer")
			}
			return openaitest.Step{ToolCalls: []openaitest.ToolCall{{Name: "GroupChatManager__submit_plan",
				Arguments: `{"steps":[{"agent":"HrAgent","action":"create_employee_record","args":{"name":"Jessica Smith"},"text":"Create Jessica's record for 2025-06-02"}]}`}}}
		}},
		openaitest.Step{Text: "Planned for the start date."})
	ctx := openBrowser(t, exe)
	var shown string
	err := chromedp.Run(ctx,
		chromedp.Navigate(f.srv.URL+"/"),
		chromedp.WaitVisible("#task-description", chromedp.ByQuery),
		chromedp.SendKeys("#task-description", "Onboard Jessica Smith", chromedp.ByQuery),
		chromedp.Click("#task-create", chromedp.ByQuery),
		chromedp.WaitVisible("#clarification-answer", chromedp.ByQuery),
		chromedp.Text("#clarification-question", &shown, chromedp.ByQuery),
		chromedp.SendKeys("#clarification-answer", answer, chromedp.ByQuery),
		chromedp.Click("#clarification-send", chromedp.ByQuery),
		chromedp.WaitVisible(`#steps tr[data-seq="2"][data-status="awaiting_feedback"] button.approve`, chromedp.ByQuery),
		chromedp.Click(`#steps tr[data-seq="2"] button.approve`, chromedp.ByQuery),
		chromedp.WaitVisible(`#plan-status.s-completed`, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatal(err)
	}
	if shown != question {
		t.Errorf("the page showed the question %q, want %q", shown, question)
	}
}
