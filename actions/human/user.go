package human

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/seed72275b23/agency-go/agency"
)

// User speaks for a person in one conversation, which belongs to it: it
// says each of their lines to the agent that holds the conversation, and
// shows them every say it receives. The agent that holds the conversation
// is the one given by StartWith (or, without it, the first agent named
// with AcceptFrom that says something in the conversation; without
// either, none: Say fails until one is named); then an agent that answers one of the
// User's own says (its __meta__.in_reply_to names one: an agent that took
// the conversation over by a handoff answers so, and holds it from then
// on), or the agent that the holder names in __meta__.handed_to (such a
// say is shown, and the answer still awaited comes from that agent).
// Another agent that says something in the conversation is shown, as the
// conversation of its own that it is (Line.Owner), but neither answers
// the person nor takes the conversation over: only the holder and the
// agents it hands over to ever read the person's next line.
//
// When its Front cannot show a say (Show fails: a Terminal was closed),
// the person can no longer follow the conversation: that say fails with
// the Front's error (its sender reads action_failed), and Say and Run
// return it from then on.
type User struct {
	agent *agency.Agent
	front Front
	conv  string

	mu      sync.Mutex
	holder  string
	accept  []string // who may become the first holder (AcceptFrom)
	said    []string // ids of the last says sent to a holder
	answers int      // says received in the conversation (but those handing it on)
	handed  int      // says received that hand the conversation on
	final   bool     // one of them carried __meta__.final
	broken  error    // why a say could not be shown, once one could not

	streaming chan struct{} // while Say shows an answer's parts: closed when it ends
	changed   chan struct{}
}

// UserOption configures a User in NewUser.
type UserOption func(*userConfig) error

type userConfig struct {
	start, conv string
	accept      []string // who may become the first holder (AcceptFrom)
	agentOpts   []agency.Option
}

// StartWith names the agent the first line goes to.
func StartWith(agent string) UserOption {
	return func(c *userConfig) error {
		if c.start != "" {
			return fmt.Errorf("%w: human: StartWith given twice", agency.ErrInvalidOption)
		}
		if err := agency.ValidateID(agent); err != nil {
			return fmt.Errorf("%w: human: StartWith: %v", agency.ErrInvalidOption, err)
		}
		c.start = agent
		return nil
	}
}

// AcceptFrom names the agents that may become the conversation's first
// holder by saying something in it, when StartWith names none: the first
// of them to speak holds it. Without StartWith or AcceptFrom nobody
// does: a say from any agent is shown as a conversation of its own, and
// Say fails until an agent named holds the conversation, so that no
// stranger reads the person's next line by speaking first.
func AcceptFrom(ids ...string) UserOption {
	return func(c *userConfig) error {
		if c.accept != nil {
			return fmt.Errorf("%w: human: AcceptFrom given twice", agency.ErrInvalidOption)
		}
		if len(ids) == 0 {
			return fmt.Errorf("%w: human: AcceptFrom(): name at least one agent", agency.ErrInvalidOption)
		}
		for _, id := range ids {
			if err := agency.ValidateID(id); err != nil {
				return fmt.Errorf("%w: human: AcceptFrom: %v", agency.ErrInvalidOption, err)
			}
		}
		c.accept = slices.Clone(ids)
		return nil
	}
}

// Conversation sets the conversation's id (default: the User's id). Every
// say the User sends carries it as __meta__.conversation.
func Conversation(id string) UserOption {
	return func(c *userConfig) error {
		if c.conv != "" {
			return fmt.Errorf("%w: human: Conversation given twice", agency.ErrInvalidOption)
		}
		if id == "" {
			return fmt.Errorf("%w: human: Conversation(\"\")", agency.ErrInvalidOption)
		}
		c.conv = id
		return nil
	}
}

// AgentOptions passes options to the User's agency.Agent (a Logger, say).
func AgentOptions(opts ...agency.Option) UserOption {
	return func(c *userConfig) error {
		c.agentOpts = append(c.agentOpts, opts...)
		return nil
	}
}

// NewUser returns the User of the person that f reaches, with the given id,
// not yet in a space. Its action say shows the person what it is told.
func NewUser(id string, f Front, opts ...UserOption) (*User, error) {
	if f == nil {
		return nil, errors.New("human: NewUser needs a Front")
	}
	var c userConfig
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	ag, err := agency.NewAgent(id, c.agentOpts...)
	if err != nil {
		return nil, err
	}
	u := &User{agent: ag, front: f, conv: c.conv, holder: c.start, accept: c.accept, changed: make(chan struct{})}
	if u.conv == "" {
		u.conv = id
	}
	if err := agency.Register(ag, "say", u.say,
		agency.Describe("Shows a message to "+id+", a person"),
		agency.Returns("that the message was shown"),
		agency.Example(SayArgs{Content: "Hello!"}),
	); err != nil {
		return nil, err
	}
	return u, nil
}

// Agent returns the agent to add to a space.
func (u *User) Agent() *agency.Agent { return u.agent }

// Holder returns the agent that holds the conversation: the next line goes
// to it.
func (u *User) Holder() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.holder
}

// Ended reports whether the conversation has ended: an agent said its last
// answer (__meta__.final).
func (u *User) Ended() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.final
}

// say shows the person a say. One in the User's conversation (or in none)
// makes its sender the holder, and counts as an answer.
func (u *User) say(ctx context.Context, args SayArgs) (string, error) {
	m := agency.MessageFrom(ctx)
	u.mu.Lock()
	streaming := u.streaming
	u.mu.Unlock()
	if streaming != nil {
		// The parts of this answer may still be on their way to the
		// front: the whole answer comes after them.
		select {
		case <-streaming:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	c, ok := m.Meta[metaConversation].(string)
	conv := c
	if !ok || c == "" {
		conv = u.conv
	}
	mine := conv == u.conv && u.mayHold(m)
	owner := u.agent.ID()
	if !mine {
		owner = m.From // a conversation of the sender's own
	}
	if err := u.front.Show(ctx, Line{Conversation: conv, Owner: owner, From: m.From, Text: args.Content}); err != nil {
		err = fmt.Errorf("human: %s could not be shown what %s said: %w", u.agent.ID(), m.From, err)
		u.mu.Lock()
		if u.broken == nil {
			u.broken = err
			close(u.changed)
			u.changed = make(chan struct{})
		}
		u.mu.Unlock()
		return "", err
	}
	if mine {
		u.mu.Lock()
		defer u.mu.Unlock()
		if to, _ := m.Meta[metaHandedTo].(string); to != "" && m.From == u.holder {
			u.holder = to
			u.handed++
			return "shown", nil
		}
		u.holder = m.From
		u.answers++
		if final, _ := m.Meta[metaFinal].(bool); final {
			u.final = true
		}
		close(u.changed)
		u.changed = make(chan struct{})
	}
	return "shown", nil
}

// mayHold reports whether the sender of a say in the User's conversation
// speaks in it: the holder (the first agent of AcceptFrom to speak, when
// StartWith named none), or an agent that answers one of the User's says (the holder
// handed the conversation to it).
func (u *User) mayHold(m *agency.Message) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if m.From == u.holder || (u.holder == "" && slices.Contains(u.accept, m.From)) {
		return true
	}
	r, _ := m.Meta[metaReply].(string)
	return r != "" && slices.Contains(u.said, r)
}

// keptSaid bounds the ids of its says a User remembers.
const keptSaid = 16

// Say says text to the agent that holds the conversation and waits for the
// answer, which the person is shown: a say back, from that agent or from
// another that the conversation was handed to (an empty value from the
// holder means that another one will answer), or else the value of the
// holder's say. It returns an error that the person has not been shown:
// the holder is not in the space, its say failed without a say that says
// why, or the Front could not show a say (see User). It must not be called
// from one of the User's own actions.
func (u *User) Say(ctx context.Context, text string) error {
	u.mu.Lock()
	to, mark, handed, broken := u.holder, u.answers, u.handed, u.broken
	u.mu.Unlock()
	if broken != nil {
		return broken
	}
	if to == "" {
		return errors.New("human: no agent holds the conversation yet: name one with StartWith, or those that may take it with AcceptFrom")
	}
	m := &agency.Message{ID: agency.NewID(), To: to, Action: "say", Args: SayArgs{Content: text}, Meta: map[string]any{metaConversation: u.conv}}
	u.mu.Lock()
	u.said = append(u.said, m.ID)
	if len(u.said) > keptSaid {
		u.said = slices.Delete(u.said, 0, len(u.said)-keptSaid)
	}
	u.mu.Unlock()
	r, err := u.request(ctx, m)
	switch {
	case errors.Is(err, agency.ErrNoRecipient) || ctx.Err() != nil:
		return err
	case err != nil:
		if u.sync(ctx); u.answeredSince(mark) {
			return nil // the holder said why
		}
		return err
	}
	v, err := agency.Value[string](r)
	if err != nil {
		b, _ := json.Marshal(r.Args)
		v = string(b)
	}
	if v == "" { // handed on: the new holder answers
		return u.waitAnswer(ctx, mark)
	}
	u.sync(ctx)
	switch {
	case u.brokenErr() != nil:
		return u.brokenErr()
	case u.answeredSince(mark):
		return nil
	case u.handedSince(handed): // answered, and handed on: the new holder answers
		return u.waitAnswer(ctx, mark)
	}
	return u.front.Show(ctx, Line{Conversation: u.conv, Owner: u.agent.ID(), From: to, Text: v})
}

// request sends m and waits for its answer; with a Front that shows
// answers as they come (PartShower), it shows each part of the answer
// meanwhile. The say back that brings the whole answer waits until the
// parts before it are shown (see say).
func (u *User) request(ctx context.Context, m *agency.Message) (*agency.Message, error) {
	ps, ok := u.front.(PartShower)
	if !ok {
		return u.agent.RequestMessage(ctx, m)
	}
	done := make(chan struct{})
	u.mu.Lock()
	u.streaming = done
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.streaming = nil
		u.mu.Unlock()
		close(done)
	}()
	for r, err := range u.agent.StreamMessage(ctx, m) {
		if err != nil {
			return nil, err
		}
		if r.Action != agency.PartAction {
			return r, nil
		}
		text, err := agency.Value[string](r)
		if err != nil {
			continue // not text: nothing a person reads as it comes
		}
		if err := ps.ShowPart(ctx, Line{Conversation: u.conv, From: m.To, Text: text}); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("human: the answer's stream ended without an answer")
}

func (u *User) brokenErr() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.broken
}

func (u *User) handedSince(mark int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.handed > mark
}

func (u *User) answeredSince(mark int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.answers > mark
}

// waitAnswer waits until a say comes after the mark, or one cannot be
// shown.
func (u *User) waitAnswer(ctx context.Context, mark int) error {
	for {
		u.mu.Lock()
		n, changed, broken := u.answers, u.changed, u.broken
		u.mu.Unlock()
		if broken != nil {
			return broken
		}
		if n > mark {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sync waits until the User has handled every message that reached it
// before now: a help to itself is answered after them. A say back comes
// before the value that a Request returns, but Request returns while the
// say may still wait in the queue.
func (u *User) sync(ctx context.Context) {
	_, _ = u.agent.Request(ctx, u.agent.ID(), agency.HelpAction, nil)
}

// Run reads the person's lines and says each to the holder (see Say) until
// the person types "exit", their input ends, the conversation ends or ctx
// does. An error of a line is shown to the person, and Run goes on; but
// when the Front cannot show a say (see User), Run returns that error.
func (u *User) Run(ctx context.Context) error {
	for !u.Ended() {
		if err := u.brokenErr(); err != nil {
			return err
		}
		line, err := u.front.Ask(ctx, Line{})
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		line = strings.TrimSpace(line)
		switch line {
		case "":
			continue
		case "exit":
			return nil
		}
		if err := u.Say(ctx, line); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if broken := u.brokenErr(); broken != nil {
				return broken
			}
			_ = u.front.Show(ctx, Line{Conversation: u.conv, Owner: u.agent.ID(), Text: fmt.Sprintf("(%v)\n", err)})
		}
	}
	return nil
}
