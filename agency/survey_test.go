package agency_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// surveyed returns an agent with one action whose access policy reports,
// on seen, each help probe from asker: the agent has answered a survey.
func surveyed(id, asker string, seen chan<- struct{}) *agency.Agent {
	a := agency.MustNewAgent(id)
	agency.Handle(a, "ping", func(context.Context, struct{}) (string, error) { return "pong", nil },
		agency.AccessFunc(func(m *agency.Message) agency.Access {
			if m.From == asker {
				select {
				case seen <- struct{}{}:
				default:
				}
			}
			return agency.Permitted
		}))
	return a
}

// person returns an agent whose action "ask" waits for release, as one
// that waits for a person's answer does, heedless of its context; started
// is told when it begins waiting.
func person(id string, started chan<- struct{}, release <-chan struct{}) *agency.Agent {
	a := agency.MustNewAgent(id)
	agency.Handle(a, "ask", func(context.Context, struct{}) (string, error) {
		started <- struct{}{}
		<-release
		return "yes", nil
	})
	return a
}

// survey runs agency.Survey with a context without a deadline and returns
// what it returned, failing the test if it has not returned within the
// safety net.
func survey(t *testing.T, asker *agency.Agent, begun func()) (map[string]map[string]agency.ActionHelp, error) {
	t.Helper()
	type result struct {
		got map[string]map[string]agency.ActionHelp
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := agency.Survey(context.Background(), asker)
		done <- result{got, err}
	}()
	begun()
	select {
	case r := <-done:
		return r.got, r.err
	case <-time.After(10 * time.Second): // a safety net: the bound is far shorter
		t.Fatal("Survey without a deadline has not returned")
		return nil, nil
	}
}

// A Survey whose context has no deadline ends after DefaultSurveyTimeout
// with the answers that came and a timeout, rather than wait for ever for
// an agent that answers late or never: one busy with a person, one taken
// out with a context that ran out (which drops the help it had queued).
func TestSurveyBoundWithoutDeadline(t *testing.T) {
	defer agency.SetSurveyTimeout(300 * time.Millisecond)()

	for _, removed := range []bool{false, true} {
		name := "busy"
		if removed {
			name = "removed"
		}
		t.Run(name, func(t *testing.T) {
			started, release := make(chan struct{}, 1), make(chan struct{})
			seen := make(chan struct{}, 1)
			busy := person("Busy", started, release)
			idle := surveyed("Idle", "Asker", seen)
			asker, user := agency.MustNewAgent("Asker"), agency.MustNewAgent("User")
			sp := joinLocal(t, busy, idle, asker, user)
			t.Cleanup(func() { close(release) }) // before the space closes
			if _, err := user.Send(callCtx(t), "Busy", "ask", nil); err != nil {
				t.Fatal(err)
			}
			<-started

			got, err := survey(t, asker, func() {
				if !removed {
					return
				}
				<-seen
				// Idle has the broadcast, so the space has begun handing
				// it out; an Add waits until it has finished, so Busy has
				// it queued.
				if err := sp.Add(callCtx(t), agency.MustNewAgent("Fence")); err != nil {
					t.Error(err)
				}
				gone, cancel := context.WithCancel(context.Background())
				cancel()
				if err := sp.Remove(gone, "Busy"); !errors.Is(err, context.Canceled) {
					t.Errorf("Remove with a cancelled context: %v", err)
				}
			})
			if !errors.Is(err, agency.ErrTimeout) || !strings.Contains(err.Error(), "without a deadline") {
				t.Errorf("Survey: %v, want a timeout that says the context had no deadline", err)
			}
			if names := slices.Sorted(maps.Keys(got)); !slices.Contains(names, "Idle") || slices.Contains(names, "Busy") {
				t.Errorf("Survey listed %v, want Idle and not Busy", names)
			}
		})
	}
}

// The framework's own meta keys cannot be set through SurveyMeta.
func TestSurveyMetaRefusesFrameworkKeys(t *testing.T) {
	asker := agency.MustNewAgent("Asker")
	joinLocal(t, asker)
	_, err := agency.Survey(callCtx(t), asker, agency.SurveyMeta(map[string]any{"deadline": "soon"}))
	if !errors.Is(err, agency.ErrMalformedMessage) {
		t.Errorf("SurveyMeta with deadline: %v, want ErrMalformedMessage", err)
	}
}

// A quiet period that is not positive is a mistake Survey reports, naming
// the option, before it broadcasts anything.
func TestSurveyQuietMustBePositive(t *testing.T) {
	asker := agency.MustNewAgent("Asker")
	seen := make(chan struct{}, 1)
	joinLocal(t, asker, surveyed("Other", "Asker", seen))
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := agency.Survey(callCtx(t), asker, agency.SurveyQuiet(d))
		if !errors.Is(err, agency.ErrInvalidOption) || !strings.Contains(err.Error(), "SurveyQuiet") {
			t.Errorf("SurveyQuiet(%v): %v, want ErrInvalidOption naming SurveyQuiet", d, err)
		}
	}
	select {
	case <-seen:
		t.Error("Other was asked for help: Survey broadcast despite its invalid option")
	default:
	}
}
