package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// callerAgent is the agent a caller speaks through: its id is the caller's,
// so the agents served see the caller as the sender of its messages. It has
// no actions of its own.
type callerAgent struct {
	a     *agency.Agent
	ready chan struct{} // closed once a and err are set
	err   error
}

// caller returns the agent the caller speaks through, adding it to the
// space the first time.
func (s *Server) caller(ctx context.Context, name string) (*agency.Agent, error) {
	id := name
	if s.cfg.CallerAgent != nil {
		id = s.cfg.CallerAgent(name)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("the server is shutting down: send the message again later")
	}
	c := s.callers[id]
	if c == nil {
		c = &callerAgent{ready: make(chan struct{})}
		s.callers[id] = c
		s.mu.Unlock()
		c.a, c.err = agency.NewAgent(id)
		if c.err == nil {
			c.err = s.cfg.Space.Add(ctx, c.a)
		}
		if c.err != nil {
			c.err = fmt.Errorf("the caller %q cannot speak in the space: %w", id, c.err)
			s.mu.Lock()
			if s.callers != nil {
				delete(s.callers, id) // the next call tries again
			}
			s.mu.Unlock()
		}
		close(c.ready)
	} else {
		s.mu.Unlock()
	}
	select {
	case <-c.ready:
		return c.a, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// helpTTL is how long the server trusts what help said.
const helpTTL = 5 * time.Second

// helpEntry is an agent's help as one caller saw it.
type helpEntry struct {
	at      time.Time
	actions map[string]agency.ActionHelp
}

// help returns agent's actions as the caller proxy sees them.
func (s *Server) help(ctx context.Context, proxy *agency.Agent, agent string) (map[string]agency.ActionHelp, error) {
	key := [2]string{proxy.ID(), agent}
	s.mu.Lock()
	e, ok := s.helps[key]
	s.mu.Unlock()
	if ok && time.Since(e.at) < helpTTL {
		return e.actions, nil
	}
	raw, err := agency.Call[map[string]json.RawMessage](ctx, proxy, agent, agency.HelpAction, nil)
	if err != nil {
		return nil, err
	}
	actions := make(map[string]agency.ActionHelp, len(raw))
	for name, b := range raw {
		var h agency.ActionHelp
		_ = json.Unmarshal(b, &h) // a custom entry keeps what fits
		actions[name] = h
	}
	s.mu.Lock()
	if len(s.helps) > 4096 {
		clear(s.helps)
	}
	s.helps[key] = helpEntry{at: time.Now(), actions: actions}
	s.mu.Unlock()
	return actions, nil
}

// requested reports whether the call of action waits for approval when
// the caller proxy makes it. When help cannot tell, the call is made
// straight away: the agent decides all the same.
func (s *Server) requested(ctx context.Context, proxy *agency.Agent, agent, action string) bool {
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	actions, err := s.help(hctx, proxy, agent)
	if err != nil {
		return false
	}
	return actions[action].Access == "requested"
}
