package openai

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/agency"
)

// clearEnv makes the test independent of the caller's OPENAI_* variables.
func clearEnv(t *testing.T) {
	for _, v := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"} {
		t.Setenv(v, "")
	}
}

func TestNewNoEndpoint(t *testing.T) {
	clearEnv(t)
	if _, err := New("Assistant"); !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("got %v, want ErrNoEndpoint", err)
	}
	if _, err := New("Assistant", Model("m")); !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("got %v, want ErrNoEndpoint", err)
	}
	for _, opt := range []Option{APIKey("k"), BaseURL("http://localhost:11434/v1")} {
		if _, err := New("Assistant", opt); err != nil {
			t.Errorf("one of key and URL is enough: %v", err)
		}
	}
	t.Setenv("OPENAI_API_KEY", "k")
	if _, err := New("Assistant"); err != nil {
		t.Errorf("with OPENAI_API_KEY: %v", err)
	}
}

func TestNewInvalid(t *testing.T) {
	clearEnv(t)
	key := APIKey("k")
	for name, opts := range map[string][]Option{
		"empty key":          {APIKey("")},
		"key twice":          {key, APIKey("j")},
		"relative URL":       {key, BaseURL("localhost:11434/v1")},
		"ftp URL":            {key, BaseURL("ftp://example.com/v1")},
		"URL twice":          {BaseURL("http://a/v1"), BaseURL("http://b/v1")},
		"empty model":        {key, Model("")},
		"prompt twice":       {key, SystemPrompt("a"), SystemPrompt("b")},
		"no steps":           {key, MaxSteps(0)},
		"no history":         {key, History(0)},
		"negative retries":   {key, Retries(-1, time.Second)},
		"no backoff":         {key, Retries(2, 0)},
		"retries twice":      {key, Retries(1, time.Second), Retries(1, time.Second)},
		"zero call timeout":  {key, CallTimeout(0)},
		"nil HTTP client":    {key, HTTPClient(nil)},
		"nil logger":         {key, Logger(nil)},
		"logger twice":       {key, Logger(slog.New(slog.NewTextHandler(io.Discard, nil))), Logger(slog.New(slog.NewTextHandler(io.Discard, nil)))},
		"max steps twice":    {key, MaxSteps(1), MaxSteps(2)},
		"history twice":      {key, History(1), History(2)},
		"call timeout twice": {key, CallTimeout(time.Second), CallTimeout(time.Second)},
	} {
		if _, err := New("Assistant", opts...); !errors.Is(err, agency.ErrInvalidOption) {
			t.Errorf("%s: got %v, want agency.ErrInvalidOption", name, err)
		}
	}
	if _, err := New("bad id", key); !errors.Is(err, agency.ErrInvalidID) {
		t.Errorf("bad id: %v", err)
	}
	if _, err := New("Assistant", key, Retries(0, 0)); err != nil {
		t.Errorf("no retries at all is valid: %v", err)
	}
	t.Setenv("OPENAI_BASE_URL", "not a url")
	if _, err := New("Assistant"); !errors.Is(err, agency.ErrInvalidOption) {
		t.Errorf("bad OPENAI_BASE_URL: %v", err)
	}
}

// The environment supplies key, URL and model; options win over it; the
// default model is gpt-4o-mini.
func TestEnvironment(t *testing.T) {
	clearEnv(t)
	f := newFixture(t, openaitest.Step{Text: "one"}, openaitest.Step{Text: "two"})
	t.Setenv("OPENAI_API_KEY", "env-key")
	t.Setenv("OPENAI_BASE_URL", f.srv.URL)
	t.Setenv("OPENAI_MODEL", "env-model")
	llm, err := New("Assistant", HTTPClient(f.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	f.llm = llm
	f.add(llm.Agent())
	if _, err := f.say(f.user, "hi"); err != nil {
		t.Fatal(err)
	}
	req := f.requests(1)[0]
	if req.Model != "env-model" || req.Header.Get("Authorization") != "Bearer env-key" {
		t.Errorf("model %q, Authorization %q", req.Model, req.Header.Get("Authorization"))
	}

	// A second agent: options over the environment, default model, no
	// system prompt.
	t.Setenv("OPENAI_MODEL", "")
	other, err := New("Other", APIKey("opt-key"), HTTPClient(f.srv.Client()), SystemPrompt(""))
	if err != nil {
		t.Fatal(err)
	}
	f.add(other.Agent())
	if _, err := agency.Call[string](f.ctx, f.user, "Other", "say", SayArgs{Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	req = f.requests(2)[1]
	if req.Model != "gpt-4o-mini" || req.Header.Get("Authorization") != "Bearer opt-key" {
		t.Errorf("model %q, Authorization %q", req.Model, req.Header.Get("Authorization"))
	}
	if len(req.Messages) != 1 || req.Messages[0].Role != "user" {
		t.Errorf("with SystemPrompt(\"\") the messages are %+v", req.Messages)
	}
}
