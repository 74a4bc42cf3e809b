package agency_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

type pair struct {
	A int `json:"a"`
	B int `json:"b"`
}

func sum(_ context.Context, p pair) (int, error) { return p.A + p.B, nil }

// Programmer errors around Approve are caught by Register.
func TestApproveRegistration(t *testing.T) {
	yes := func(context.Context, pair) (bool, error) { return true, nil }
	other := func(context.Context, struct{ X int }) (bool, error) { return true, nil }
	for _, tc := range []struct {
		name string
		opts []agency.ActionOption
		want string // in the error; "" for none
	}{
		{"alone", []agency.ActionOption{agency.Approve(yes)}, ""},
		{"with a policy that requests", []agency.ActionOption{agency.Approve(yes),
			agency.AccessBySender(map[string]agency.Access{"Boss": agency.Permitted}, agency.Requested)}, ""},
		{"with an AccessFunc", []agency.ActionOption{agency.Approve(yes),
			agency.AccessFunc(func(*agency.Message) agency.Access { return agency.Requested })}, ""},
		{"another argument type", []agency.ActionOption{agency.Approve(other)}, "Approve takes struct { X int }"},
		{"a policy that never requests", []agency.ActionOption{agency.Approve(yes), agency.AccessForAll(agency.Permitted)}, "never asks"},
		{"twice", []agency.ActionOption{agency.Approve(yes), agency.Approve(yes)}, "Approve given twice"},
		{"nil", []agency.ActionOption{agency.Approve[pair](nil)}, "Approve(nil)"},
		{"requested, nothing approves", []agency.ActionOption{agency.AccessForAll(agency.Requested)}, "nothing approves"},
	} {
		a := agency.MustNewAgent("A")
		err := agency.Register(a, "add", sum, tc.opts...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	// A PermissionRequester on the agent is a way to approve.
	a := agency.MustNewAgent("A", agency.Hooks(&gatekeeper{}))
	if err := agency.Register(a, "add", sum, agency.AccessForAll(agency.Requested)); err != nil {
		t.Errorf("requested, with a PermissionRequester: %v", err)
	}
}

// A panicking approver refuses, and the agent serves on.
func TestApprovePanics(t *testing.T) {
	a := agency.MustNewAgent("Guarded")
	agency.Handle(a, "add", sum, agency.Approve(func(_ context.Context, p pair) (bool, error) {
		if p.A < 0 {
			panic("negative")
		}
		return true, nil
	}))
	user := agency.MustNewAgent("User")
	joinLocal(t, a, user)
	ctx := callCtx(t)
	_, err := user.Request(ctx, "Guarded", "add", pair{A: -1})
	wantDenied(t, err, "Guarded.add", "User")
	if v, err := agency.Call[int](ctx, user, "Guarded", "add", pair{A: 1, B: 2}); err != nil || v != 3 {
		t.Errorf("add after a panic: %v, %v", v, err)
	}
}

// events records the hook calls of one hook value.
type events struct {
	name string
	mu   *sync.Mutex
	log  *[]string
	deny bool
}

func (e events) note(s string) {
	e.mu.Lock()
	*e.log = append(*e.log, e.name+":"+s)
	e.mu.Unlock()
}
func (e events) AfterAdd(context.Context)                          { e.note("added") }
func (e events) BeforeAction(_ context.Context, m *agency.Message) { e.note("before " + m.Action) }
func (e events) RequestPermission(context.Context, *agency.Message) bool {
	e.note("asked")
	return !e.deny
}

type panicky struct{}

func (panicky) BeforeAction(context.Context, *agency.Message) { panic("hook bug") }

// Several Hooks values: each gets the events it implements, in order; a
// panic in one does not keep the next from its event; every
// PermissionRequester must agree.
func TestSeveralHooks(t *testing.T) {
	var mu sync.Mutex
	var log []string
	first := events{name: "first", mu: &mu, log: &log}
	second := events{name: "second", mu: &mu, log: &log, deny: true}
	a := agency.MustNewAgent("Hooked", agency.Hooks(first), agency.Hooks(panicky{}), agency.Hooks(second))
	agency.Handle(a, "add", sum)
	agency.Handle(a, "guarded", sum, agency.AccessForAll(agency.Requested))
	user := agency.MustNewAgent("User")
	joinLocal(t, a, user)
	ctx := callCtx(t)
	if _, err := agency.Call[int](ctx, user, "Hooked", "add", pair{A: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := user.Request(ctx, "Hooked", "guarded", pair{A: 1})
	wantDenied(t, err, "Hooked.guarded", "User")
	mu.Lock()
	got := strings.Join(log, ", ")
	mu.Unlock()
	want := "first:added, second:added, first:before add, second:before add, first:asked, second:asked"
	if got != want {
		t.Errorf("hook calls:\n got %s\nwant %s", got, want)
	}

	g := &gatekeeper{}
	if _, err := agency.NewAgent("Twice", agency.Hooks(g), agency.Hooks(g)); !errors.Is(err, agency.ErrInvalidOption) {
		t.Errorf("the same hook value twice: %v, want ErrInvalidOption", err)
	}
}
