package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seed72275b23/agency-go/internal/testenv"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the browser test's screenshots to docs/img/studio*.png")

// startStudio runs agency with args (studio among them) and returns the URL it printed
// (with its token, if any).
func startStudio(t *testing.T, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := agencyCmd(ctx, url, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(interrupt) }
	cmd.WaitDelay = 15 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(stderr)
	first, err := lines.ReadString('\n')
	i := strings.LastIndex(first, " at http")
	if err != nil || i < 0 {
		cancel()
		_ = cmd.Wait()
		t.Fatalf("studio said %q (%v)", first, err)
	}
	studioURL := strings.TrimSuffix(strings.TrimSpace(first[i+len(" at "):]), " (Ctrl-C stops)")
	go func() { _, _ = io.Copy(io.Discard, lines) }()
	t.Cleanup(func() {
		cancel()
		if err := cmd.Wait(); err != nil && cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("studio ended with %v", err)
		}
	})
	return studioURL
}

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

// Screenshot size: the browser's window.
const shotW, shotH = 1280, 900

// openBrowser starts a headless Chromium with a fresh profile and no
// background networking; it is closed when the test ends.
func openBrowser(t *testing.T, exe string) context.Context {
	t.Helper()
	profile, err := os.MkdirTemp("", "studio-chromium-")
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
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(shotW, shotH),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(cancelC)
	t.Cleanup(func() { _ = chromedp.Cancel(ctx) })
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A newcomer opens Studio on the demo: sees the agents, calls add through
// the form made from its schema and sees 3, sees a wrong call's teachable
// error, finds both calls in the timeline, filters it, and reads the demo's
// conversation with its holder.
func TestStudioBrowser(t *testing.T) {
	exe := browser(t)
	url := startStudio(t, "", "--demo", "studio", "--addr", "127.0.0.1:0")
	ctx := openBrowser(t, exe)

	add := `form[data-agent="Calculator"][data-action="add"]`
	var result, errText, reqRow, respRow, conv string
	var screenshot, convShot []byte
	err := chromedp.Run(ctx,
		chromedp.EmulateViewport(shotW, shotH),
		chromedp.Navigate(url),
		chromedp.WaitVisible(`article[data-agent="Calculator"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`article[data-agent="Assistant"] details[data-action="say"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#status[data-state="live"]`, chromedp.ByQuery),
		// The form of add, made from its schema: a number field each.
		chromedp.Click(`details[data-key="Calculator.add"] summary`, chromedp.ByQuery),
		chromedp.WaitVisible(add+` input[type="number"][name="a"]`, chromedp.ByQuery),
		chromedp.SendKeys(add+` input[name="a"]`, "1", chromedp.ByQuery),
		chromedp.SendKeys(add+` input[name="b"]`, "2", chromedp.ByQuery),
		chromedp.Click(add+` button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(add+` .result[data-state="ok"]`, chromedp.ByQuery),
		chromedp.Text(add+` .result`, &result, chromedp.ByQuery),
		// The call and its answer in the timeline.
		chromedp.WaitVisible(`#timeline tr[data-kind="request"][data-action="add"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#timeline tr[data-kind="response"][data-action="add"]`, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(result, "3\n") {
		t.Errorf("the form's result reads %q, want 3", result)
	}
	// The same call, with a wrong argument given as JSON: the error's text.
	err = chromedp.Run(ctx,
		chromedp.Click(add+` input.as-json`, chromedp.ByQuery),
		chromedp.SetValue(add+` textarea[name="__raw__"]`, `{"a":"x","b":2}`, chromedp.ByQuery),
		// A survey of the agents meanwhile (every 30 s, or when a new
		// agent shows up) keeps what was typed. Its answer comes later
		// and puts the forms back in new cards: wait for that (the old
		// card, marked, gone) before using them again, or a node found
		// just before may no longer be in the page.
		chromedp.Evaluate(`document.querySelector('article[data-agent="Calculator"]').dataset.before = "refresh"`, nil),
		chromedp.Click(`#refresh`, chromedp.ByQuery),
		chromedp.Poll(`(() => {
			const a = document.querySelector('article[data-agent="Calculator"]');
			return !!a && a.dataset.before !== "refresh" && document.querySelector("#agents-note").textContent === "";
		})()`, nil),
		chromedp.Click(add+` button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(add+` .result[data-state="error"][data-error-type="invalid_args"]`, chromedp.ByQuery),
		chromedp.Text(add+` .result`, &errText, chromedp.ByQuery),
		chromedp.WaitVisible(`#timeline tr[data-kind="error"][data-action="add"]`, chromedp.ByQuery),
		// Only add's traffic, then the latest request and answer.
		chromedp.SendKeys(`#f-action`, "add", chromedp.ByQuery),
		// Read in one step in the page: the demo's traffic re-renders the
		// timeline, and a row found by one command may be gone by the next.
		chromedp.Poll(rowText(`#timeline tr[data-kind="request"][data-action="add"]`), &reqRow),
		chromedp.Poll(rowText(`#timeline tr[data-kind="response"][data-action="add"]`), &respRow),
		chromedp.CaptureScreenshot(&screenshot),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errText, "invalid_args") || !strings.Contains(errText, "a: must be a number, not string") {
		t.Errorf("the form's error reads %q", errText)
	}
	if !strings.Contains(reqRow, `{"a":"x","b":2}`) && !strings.Contains(reqRow, `{"a":1,"b":2}`) {
		t.Errorf("the timeline's add row reads %q", reqRow)
	}
	if !strings.Contains(respRow, "Calculator → ") || !strings.Contains(respRow, "add: ") {
		t.Errorf("the timeline's answer row reads %q", respRow)
	}
	var others int
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll('#timeline tbody tr:not([data-action="add"])').length`, &others)); err != nil {
		t.Fatal(err)
	}
	if others != 0 {
		t.Errorf("with the filter on add, the timeline shows %d rows of other actions", others)
	}
	// The conversation the demo's user had with the Assistant.
	err = chromedp.Run(ctx,
		chromedp.Click(`.tabs button[data-tab="conversations"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#conversations .conversation li[data-kind="say"]`, chromedp.ByQuery),
		// The support team's: handed from Triage to Refunds, who holds it
		// by the team's store too.
		chromedp.WaitVisible(`.conversation[data-conversation="demo-refund"][data-holder="Refunds"] li[data-kind="handoff"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`.conversation[data-conversation="demo-refund"] .stored[data-holder="Refunds"]`, chromedp.ByQuery),
		chromedp.Text(`#conversations`, &conv, chromedp.ByQuery),
		chromedp.CaptureScreenshot(&convShot),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"held by Assistant", "What is 2 + 3?", "The sum is 5.",
		"held by Refunds", "Triage handed over to Refunds", "Refunds here: your refund is on its way.", "store: held by Refunds, active"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the conversation reads %q, without %q", conv, want)
		}
	}
	// The plans' page of planhttp, in the Plans tab, with its task form.
	var planPage bool
	err = chromedp.Run(ctx,
		chromedp.Click(`.tabs button[data-tab="plans"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#plans iframe`, chromedp.ByQuery),
		chromedp.Poll(`(() => { const f = document.querySelector('#plans iframe');
			return !!(f && f.contentDocument && f.contentDocument.querySelector('#task-description')); })()`,
			&planPage, chromedp.WithPollingTimeout(20*time.Second)),
	)
	if err != nil || !planPage {
		t.Errorf("the Plans tab shows no plans page: %v", err)
	}
	checkScreenshot(t, screenshot, "studio.png")
	checkScreenshot(t, convShot, "studio-conversations.png")
}

// checkScreenshot checks that the screenshot is a PNG of the window's
// size with something drawn on it, and keeps it.
func checkScreenshot(t *testing.T, shot []byte, name string) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != shotW || b.Dy() != shotH {
		t.Errorf("the screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), shotW, shotH)
	}
	// A page that failed to render is one colour; Studio's header is dark
	// and its panels are white.
	dark, light := 0, 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			switch l := (r + g + bl) / 3; {
			case l < 0x4000:
				dark++
			case l > 0xf000:
				light++
			}
		}
	}
	if dark == 0 || light == 0 {
		t.Errorf("the screenshot has %d dark and %d light samples: nothing drawn?", dark, light)
	}
	out := filepath.Join(t.TempDir(), name)
	if *updateScreenshot {
		out = filepath.Join("..", "..", "docs", "img", name)
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(shot))
}

// Studio on a broker: the agents of the exchange, a call, and the
// timeline's events, through its HTTP API.
func TestStudioAMQP(t *testing.T) {
	t.Parallel()
	url, exchange, calc := calcSpace(t)
	studio := startStudio(t, url, "--exchange", exchange, "studio", "--addr", "127.0.0.1:0")

	events := make(chan map[string]any, 100)
	req, _ := http.NewRequest("GET", studio+"studio/api/events", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events: content type %q", ct)
	}
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev map[string]any
				if json.Unmarshal([]byte(data), &ev) == nil {
					events <- ev
				}
			}
		}
	}()

	var agents map[string]map[string]json.RawMessage
	getJSON(t, studio+"studio/api/agents", &agents)
	if _, ok := agents[calc]["add"]; !ok || len(agents) != 1 {
		t.Errorf("agents: %v", agents)
	}
	r, err := http.Post(studio+"studio/api/call", "application/json",
		strings.NewReader(`{"agent":"`+calc+`","action":"add","args":{"a":1,"b":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	var res callResult
	if err := json.NewDecoder(r.Body).Decode(&res); err != nil || !res.OK || string(res.Value) != "3" {
		t.Errorf("call: %+v, %v", res, err)
	}
	r.Body.Close()

	var sawReq, sawResp bool
	timeout := time.After(20 * time.Second)
	for !sawReq || !sawResp {
		select {
		case ev := <-events:
			sawReq = sawReq || (ev["kind"] == "request" && ev["action"] == "add" && ev["to"] == calc)
			sawResp = sawResp || (ev["kind"] == "response" && ev["answers"] == "add" && ev["from"] == calc && ev["elapsed_ms"] != nil)
		case <-timeout:
			t.Fatalf("the events lack the call: request %v, response %v", sawReq, sawResp)
		}
	}

	// A form of another site cannot call: no JSON body, or another origin.
	r, err = http.Post(studio+"studio/api/call", "application/x-www-form-urlencoded", strings.NewReader("agent=x"))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a form post: %d", r.StatusCode)
	}
	cross, _ := http.NewRequest("POST", studio+"studio/api/call", strings.NewReader(`{}`))
	cross.Header.Set("Content-Type", "application/json")
	cross.Header.Set("Origin", "https://evil.example")
	r, err = http.DefaultClient.Do(cross)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-origin post: %d", r.StatusCode)
	}
}

// Bound to an address that is not loopback, Studio requires its token.
func TestStudioToken(t *testing.T) {
	studio := startStudio(t, "", "--demo", "studio", "--addr", "0.0.0.0:0")
	withToken := strings.Replace(studio, "0.0.0.0", "127.0.0.1", 1)
	base, token, ok := strings.Cut(withToken, "?token=")
	if !ok || len(token) < 32 {
		t.Fatalf("studio printed %q, without a token", studio)
	}
	r, err := http.Get(base + "studio/api/space")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d", r.StatusCode)
	}
	r, err = http.Get(withToken)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	var cookie *http.Cookie
	for _, c := range r.Cookies() {
		if c.Name == tokenCookie {
			cookie = c
		}
	}
	if r.StatusCode != http.StatusOK || cookie == nil || !cookie.HttpOnly {
		t.Fatalf("with the token: %d, cookie %v", r.StatusCode, cookie)
	}
	req, _ := http.NewRequest("GET", base+"studio/api/space", nil)
	req.AddCookie(cookie)
	r, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Errorf("with the cookie: %d", r.StatusCode)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(r.Body)
		t.Fatalf("GET %s: %d %s", url, r.StatusCode, b)
	}
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// Studio on the demo serves the demo's plans through planhttp: a task
// becomes a plan whose step waits for approval, and once approved runs on
// the Calculator, which the timeline shows.
func TestStudioPlans(t *testing.T) {
	studio := startStudio(t, "", "--demo", "studio", "--addr", "127.0.0.1:0")
	post := func(path, body string, v any) {
		t.Helper()
		r, err := http.Post(studio+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		if r.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(r.Body)
			t.Fatalf("POST %s: %d %s", path, r.StatusCode, b)
		}
		if v != nil {
			if err := json.NewDecoder(r.Body).Decode(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	var created struct {
		PlanID    string `json:"plan_id"`
		SessionID string `json:"session_id"`
	}
	post("input_task", `{"session_id":"s1","description":"Add 4 and 5"}`, &created)
	type plans []struct {
		Status string `json:"overall_status"`
		Steps  []struct {
			Status string  `json:"status"`
			Reply  *string `json:"agent_reply"`
		} `json:"steps"`
	}
	waitPlan := func(cond func(plans) bool) plans {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			var ps plans
			getJSON(t, studio+"plans?session_id=s1", &ps)
			if cond(ps) {
				return ps
			}
			if time.Now().After(deadline) {
				t.Fatalf("the plan is %+v", ps)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitPlan(func(ps plans) bool {
		return len(ps) == 1 && len(ps[0].Steps) == 1 && ps[0].Steps[0].Status == "awaiting_feedback"
	})
	post("approve_step_or_steps", `{"plan_id":"`+created.PlanID+`","session_id":"s1","approved":true}`, nil)
	ps := waitPlan(func(ps plans) bool { return ps[0].Status == "completed" })
	if r := ps[0].Steps[0].Reply; r == nil || !strings.Contains(*r, "9") {
		t.Errorf("the step's reply: %v", r)
	}
	// The page of plans, at /plans/, with its assets.
	for _, path := range []string{"plans/", "plans/assets/app.js"} {
		r, err := http.Get(studio + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, r.StatusCode)
		}
	}
}

// rowText is a script that gives the text of the first element sel
// matches, or null while there is none.
func rowText(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.innerText : null })()`, sel)
}
