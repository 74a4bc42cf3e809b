package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/store"
)

// tableID is the id of the table of dispatcher i of an agent in a
// conversation, by the conversation's key (openai.ConversationKey).
func tableID(agent string, i int, key string) string {
	return fmt.Sprintf("%s %d %s", agent, i, key)
}

// table returns the handoffs of dispatcher i in a conversation (by its
// key): its own table once the model changed it there, else the
// dispatcher's handoffs; only those whose target the dispatcher
// authorizes now. dropped are the others: entries of a stored table whose
// target the dispatcher no longer authorizes (it was built again, after a
// restart, with a shorter list). They are never offered, never followed.
func (p *Policy) table(ctx context.Context, i int, key string) (t, dropped []entry, err error) {
	t, dropped, _, err = p.loadTable(ctx, i, key)
	return t, dropped, err
}

func (p *Policy) loadTable(ctx context.Context, i int, key string) (t, dropped []entry, doc store.Doc, err error) {
	d, err := p.cfg.store.Get(ctx, kindDispatch, tableID(p.self, i, key))
	if errors.Is(err, store.ErrNotFound) {
		t, dropped = p.dispatch[i].authorizedOnly(p.dispatch[i].table())
		return t, dropped, store.Doc{}, nil
	}
	if err != nil {
		return nil, nil, d, err
	}
	var all []entry
	if err := json.Unmarshal(d.Body, &all); err != nil {
		return nil, nil, d, fmt.Errorf("handoff: dispatcher table %q: %w", d.ID, err)
	}
	t, dropped = p.dispatch[i].authorizedOnly(all)
	return t, dropped, d, nil
}

// drop reports the handoffs of dispatcher i in turn t's conversation
// whose target is no longer authorized, and marks them revoked in the
// table, so that each is reported once and stays revoked. A table that
// changed meanwhile is left as it is: the next offer tries again.
func (p *Policy) drop(ctx context.Context, t *openai.Turn, i int, key string) {
	kept, dropped, doc, err := p.loadTable(ctx, i, key)
	if err != nil || doc.ID == "" {
		return // an error reads again at the call; the dispatcher's own handoffs are all authorized
	}
	table := kept
	for _, e := range dropped {
		if !e.Revoked {
			p.ev.emit(ctx, p.droppedEvent(t, e.Handoff))
			e.Revoked = true
		}
		table = append(table, e)
	}
	body, err := json.Marshal(table)
	if err == nil {
		doc.Body = body
		err = p.cfg.store.Apply(ctx, store.Changes{Put: []store.Doc{doc}})
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		p.cfg.logger.Warn("handoff: could not mark revoked handoffs in the table", "conversation", t.Conversation, "agent", p.self, "error", err)
	}
}

func (p *Policy) droppedEvent(t *openai.Turn, h Handoff) Event {
	return Event{Kind: EventDropped, Conversation: t.Conversation, Agent: p.self, From: p.self, To: h.Target, Name: h.Name,
		Err: revoked(h)}
}

// revoked is why a handoff whose target is no longer authorized is not
// made, in words the model can act on.
func revoked(h Handoff) error {
	return fmt.Errorf("%w: the handoff %s was dropped: %s is no longer authorized; do not call it again", ErrRevoked, h.Name, h.Target)
}

// entry finds the enabled handoff of that name in turn t's dispatcher
// tables. One whose target is no longer authorized is an error (and an
// event), never a handoff.
func (p *Policy) entry(ctx context.Context, t *openai.Turn, name string) (Handoff, bool, error) {
	key := openai.ConversationKey(t.Owner, t.Conversation)
	for i := range p.dispatch {
		table, dropped, err := p.table(ctx, i, key)
		if err != nil {
			return Handoff{}, false, err
		}
		for _, e := range table {
			if e.Name == name && e.Enabled {
				return e.Handoff, true, nil
			}
		}
		for _, e := range dropped {
			if e.Name == name {
				p.ev.emit(ctx, p.droppedEvent(t, e.Handoff))
				return Handoff{}, false, revoked(e.Handoff)
			}
		}
	}
	return Handoff{}, false, nil
}

// manage runs a call of a management tool on the managed dispatcher's
// table of the turn's conversation.
func (p *Policy) manage(ctx context.Context, t *openai.Turn, c openai.ToolCall) (string, error) {
	var h Handoff
	var fields []string
	switch c.Name {
	case toolCreate:
		fields = []string{"name", "target", "description", "message"}
	default:
		fields = []string{"name"}
	}
	if err := decodeArgs(c.Arguments, &h, fields); err != nil {
		return "", err
	}
	key := openai.ConversationKey(t.Owner, t.Conversation)
	var result any
	change := func(table []entry) ([]entry, error) {
		switch c.Name {
		case toolCreate:
			for i := range p.dispatch {
				if i == p.managed {
					continue
				}
				other, _, err := p.table(ctx, i, key)
				if err != nil {
					return nil, err
				}
				if slices.ContainsFunc(other, func(e entry) bool { return e.Name == h.Name }) {
					return nil, invalidf("name: %q is the name of another handoff", h.Name)
				}
			}
			if p.static[h.Name] {
				return nil, invalidf("name: %q is the name of another of your tools", h.Name)
			}
			result = struct {
				Created string `json:"created"`
				Target  string `json:"target"`
				Enabled bool   `json:"enabled"`
			}{h.Name, h.Target, true}
			return p.dispatch[p.managed].add(table, h, true)
		case toolEnable:
			result = map[string]string{"enabled": h.Name}
			return setEnabled(table, h.Name, true)
		case toolDisable:
			result = map[string]string{"disabled": h.Name}
			return setEnabled(table, h.Name, false)
		default:
			result = map[string]string{"deleted": h.Name}
			return del(table, h.Name)
		}
	}
	err := store.ApplyRetrying(ctx, p.cfg.store, func(ctx context.Context) (store.Changes, error) {
		table, _, doc, err := p.loadTable(ctx, p.managed, key)
		if err != nil {
			return store.Changes{}, err
		}
		table, err = change(table)
		if err != nil {
			return store.Changes{}, err
		}
		if table == nil {
			table = []entry{}
		}
		body, err := json.Marshal(table)
		if err != nil {
			return store.Changes{}, err
		}
		return store.Changes{Put: []store.Doc{{
			Kind: kindDispatch, ID: tableID(p.self, p.managed, key), Parent: key,
			Session: t.Conversation, User: t.Owner, Version: doc.Version, Body: body,
		}}}, nil
	})
	var de *dispatchError
	if errors.As(err, &de) {
		return "", errors.New(de.forModel())
	}
	if err != nil {
		return "", err
	}
	p.ev.emit(ctx, Event{Kind: EventDispatch, Conversation: t.Conversation, Agent: p.self, Name: c.Name + " " + h.Name, To: h.Target})
	b, err := json.Marshal(result)
	return string(b), err
}

// decodeArgs decodes a tool call's arguments into v, refusing unknown
// fields and requiring the fields named (as invalid_args, which the model
// reads).
func decodeArgs(args string, v any, required []string) error {
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &present); err != nil {
		return fmt.Errorf("invalid_args: the arguments must be a JSON object: %v", err)
	}
	var missing []string
	for _, f := range required {
		if _, ok := present[f]; !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("invalid_args: missing required field%s %s", plural(len(missing)), strings.Join(missing, ", "))
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid_args: %v", err)
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
