package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/agency"
)

// call is what an A2A message asks of an agent: an action with its
// arguments, or text for its say.
type call struct {
	Action string          `json:"action"`
	Args   json.RawMessage `json:"args,omitempty"`
	Text   bool            `json:"text,omitempty"` // from text parts: the answer is text
}

// usage says how to address an agent.
const usage = `send a data part {"action": NAME, "args": {...}} to call one of the agent's actions (its card lists them as skills), or text to talk to it through its action "say"`

// parseCall reads the call a message makes.
func parseCall(m *a2a.Message) (call, error) {
	var texts []string
	var data []map[string]any
	for _, p := range m.Parts {
		if p == nil {
			continue
		}
		switch v := p.Content.(type) {
		case a2a.Text:
			texts = append(texts, string(v))
		case a2a.Data:
			obj, ok := v.Value.(map[string]any)
			if !ok {
				return call{}, fmt.Errorf("a data part must be a JSON object: %s", usage)
			}
			data = append(data, obj)
		}
	}
	switch {
	case len(data) > 1:
		return call{}, fmt.Errorf("a message calls one action: it has %d data parts; %s", len(data), usage)
	case len(data) == 1:
		obj := data[0]
		name, _ := obj["action"].(string)
		if name == "" {
			return call{}, fmt.Errorf(`the data part names no "action": %s`, usage)
		}
		for k := range obj {
			if k != "action" && k != "args" {
				return call{}, fmt.Errorf(`the data part has the unknown key %q: it holds "action" and "args" only`, k)
			}
		}
		c := call{Action: name}
		switch args := obj["args"].(type) {
		case nil:
		case map[string]any:
			b, err := json.Marshal(args)
			if err != nil {
				return call{}, err
			}
			c.Args = b
		default:
			return call{}, fmt.Errorf(`"args" must be a JSON object, not %T`, args)
		}
		return c, nil
	case len(texts) > 0:
		b, _ := json.Marshal(map[string]string{"content": strings.Join(texts, "\n")})
		return call{Action: "say", Args: b, Text: true}, nil
	}
	return call{}, errors.New("the message has neither a data part nor text: " + usage)
}

// executor runs the calls of A2A messages to one agent.
type executor struct {
	s     *Server
	agent string
}

var (
	_ a2asrv.AgentExecutor         = (*executor)(nil)
	_ a2asrv.AgentExecutionCleaner = (*executor)(nil)
)

// callerOf returns the agent id the request's caller speaks as.
func (s *Server) callerOf(ec *a2asrv.ExecutorContext) string {
	if ec.User != nil && ec.User.Name != "" {
		return ec.User.Name
	}
	return s.cfg.Anonymous
}

func (e *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		s := e.s
		if t := ec.StoredTask; t != nil {
			if t.Status.State == a2a.TaskStateInputRequired {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, t.Status.Message), nil)
				return
			}
			yield(failure(ec, "invalid_args", "this task takes no further message: send a new message, without a taskId"), nil)
			return
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		c, err := parseCall(ec.Message)
		if err != nil {
			yield(failure(ec, string(agency.TypeInvalidArgs), err.Error()), nil)
			return
		}
		caller := s.callerOf(ec)
		proxy, err := s.caller(ctx, caller)
		if err != nil {
			yield(failure(ec, string(agency.TypeActionFailed), err.Error()), nil)
			return
		}
		if s.requested(ctx, proxy, e.agent, c.Action) {
			p := &pending{Caller: caller, Instance: s.cfg.Instance, ContextID: ec.ContextID, Call: c, MessageID: agency.NewID(), Since: time.Now().UTC()}
			if err := s.putPending(ctx, e.agent, ec.TaskID, p); err != nil {
				yield(failure(ec, string(agency.TypeActionFailed), "keeping the call for approval: "+err.Error()), nil)
				return
			}
			s.stageApproval(ec.TaskID, p)
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, waiting(ec, e.agent, c.Action)), nil)
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		defer cancel()
		stop := context.AfterFunc(s.ctx, cancel)
		defer stop()
		if !s.track(ec.TaskID, cancel) {
			yield(failure(ec, string(agency.TypeActionFailed), "the server is shutting down: send the message again later"), nil)
			return
		}
		defer s.untrack(ec.TaskID)
		res, err := s.call(cctx, proxy, e.agent, c, ec.TaskID, ec.ContextID, "")
		if errors.Is(err, context.Canceled) && s.ctx.Err() == nil && ctx.Err() == nil {
			return // canceled: the cancelation writes the task's end
		}
		if s.ctx.Err() != nil {
			yield(failure(ec, string(agency.TypeActionFailed), "the server shut down while this call ran; whether the action ran is not known: check, and send it again if need be"), nil)
			return
		}
		for _, ev := range outcome(ec, c, res, err) {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// Cancel cancels the call of the task, if it runs here, and ends the task.
func (e *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		e.s.cancelTask(ec.TaskID)
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// Cleanup starts the approval wait of a call once its task says so.
func (e *executor) Cleanup(_ context.Context, ec *a2asrv.ExecutorContext, result a2a.SendMessageResult, err error) {
	if ec.Message == nil {
		return
	}
	p := e.s.unstage(ec.TaskID)
	if p == nil {
		return
	}
	if t, ok := result.(*a2a.Task); ok && err == nil && t.Status.State == a2a.TaskStateInputRequired {
		e.s.await(e.agent, ec.TaskID, p)
	}
}

// waiting is the status message of a task whose call waits for approval.
func waiting(info a2a.TaskInfoProvider, agent, action string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.NewTextPart(fmt.Sprintf(
		"%s.%s waits for approval by the agent's approver; the task goes on when they decide (poll GetTask, or cancel the task)", agent, action)))
}

// failure is the event that fails a task with an error of the given type
// and its teachable text: as text, and as the data part {"type", "error"}
// of agency's [error] payload.
func failure(info a2a.TaskInfoProvider, typ, text string) *a2a.TaskStatusUpdateEvent {
	return a2a.NewStatusUpdateEvent(info, a2a.TaskStateFailed, failureMessage(info, typ, text))
}

func failureMessage(info a2a.TaskInfoProvider, typ, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, info,
		a2a.NewTextPart(typ+": "+text),
		a2a.NewDataPart(map[string]any{"type": typ, "error": text}))
}

// result is what a call returned: JSON, or for a call made with text, the
// answer's text.
type result struct {
	value json.RawMessage
	text  string
}

// outcome is the events that end a task with the call's result or error.
func outcome(info a2a.TaskInfoProvider, c call, res result, err error) []a2a.Event {
	if err != nil {
		typ, text := errorOf(err)
		return []a2a.Event{failure(info, typ, text)}
	}
	art := a2a.NewArtifactEvent(info, resultPart(c, res))
	art.Artifact.Name = "result"
	art.LastChunk = true
	return []a2a.Event{art, a2a.NewStatusUpdateEvent(info, a2a.TaskStateCompleted, nil)}
}

func resultPart(c call, res result) *a2a.Part {
	if c.Text {
		return a2a.NewTextPart(res.text)
	}
	var v any
	if len(res.value) > 0 {
		if err := json.Unmarshal(res.value, &v); err != nil {
			v = string(res.value)
		}
	}
	return a2a.NewDataPart(map[string]any{"result": v})
}

// errorOf returns an error's agency type and its text.
func errorOf(err error) (typ, text string) {
	var ae *agency.ActionError
	switch {
	case errors.As(err, &ae):
		return string(ae.Type), ae.Text
	case errors.Is(err, agency.ErrNoRecipient):
		return string(agency.TypeNotFound), err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, agency.ErrTimeout):
		return string(agency.TypeTimeout), "the call took longer than this server waits: " + err.Error()
	}
	return string(agency.TypeActionFailed), err.Error()
}

// call sends the call to agent from proxy and waits for the answer.
func (s *Server) call(ctx context.Context, proxy *agency.Agent, agent string, c call, task a2a.TaskID, contextID, msgID string) (result, error) {
	m := &agency.Message{ID: msgID, To: agent, Action: c.Action, Args: c.Args}
	if c.Args == nil {
		m.Args = nil
	}
	if c.Text {
		// The conversation is the caller's A2A context; the answer is read
		// as the value, so the agent says nothing back (as to a tool call).
		m.Meta = map[string]any{
			"conversation": "a2a/" + proxy.ID() + "/" + contextID,
			"tool_call_id": "a2a/" + string(task),
		}
	}
	resp, err := proxy.RequestMessage(ctx, m)
	if err != nil {
		return result{}, err
	}
	if err := resp.Err(); err != nil {
		return result{}, err
	}
	if c.Text {
		text, err := agency.Value[string](resp)
		if err != nil {
			b, _ := agency.Value[json.RawMessage](resp)
			text = string(b)
		}
		return result{text: text}, nil
	}
	v, err := agency.Value[json.RawMessage](resp)
	return result{value: v}, err
}

// putPending keeps a call that waits for approval in the store.
func (s *Server) putPending(ctx context.Context, agent string, id a2a.TaskID, p *pending) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.cfg.Store.Apply(ctx, store.Changes{Put: []store.Doc{{Kind: KindPending, ID: string(id), Parent: agent, User: p.Caller, Session: p.ContextID, Body: body}}})
}

func (s *Server) stageApproval(id a2a.TaskID, p *pending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.staged[id] = p
}

func (s *Server) unstage(id a2a.TaskID) *pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.staged[id]
	delete(s.staged, id)
	return p
}

// track records the cancel func of the task's call; false once the server
// is closed.
func (s *Server) track(id a2a.TaskID, cancel context.CancelFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.running[id] = cancel
	return true
}

func (s *Server) untrack(id a2a.TaskID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, id)
}

// cancelTask cancels the task's call if it runs in this process.
func (s *Server) cancelTask(id a2a.TaskID) {
	s.mu.Lock()
	cancel := s.running[id]
	delete(s.running, id)
	delete(s.staged, id)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// await sends a call that waits for approval and ends its task with the
// answer, whenever it comes. Closing the server stops the wait and leaves
// the task waiting for input, for the next server on the store.
func (s *Server) await(agent string, id a2a.TaskID, p *pending) {
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		return
	}
	s.running[id] = cancel
	s.wg.Add(1) // under the lock that Close takes before it waits
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer cancel()
		defer s.untrack(id)
		res, err := s.approvedCall(ctx, agent, id, p)
		if ctx.Err() != nil {
			return // canceled (the cancelation ends the task) or closing (the next server sends it again)
		}
		info := a2a.TaskInfo{TaskID: id, ContextID: p.ContextID}
		state, msg, art := a2a.TaskStateCompleted, (*a2a.Message)(nil), (*a2a.Artifact)(nil)
		if err != nil {
			typ, text := errorOf(err)
			state, msg = a2a.TaskStateFailed, failureMessage(info, typ, text)
		} else {
			art = &a2a.Artifact{ID: a2a.NewArtifactID(), Name: "result", Parts: a2a.ContentParts{resultPart(p.Call, res)}}
		}
		if err := s.agents[agent].tasks.finish(context.WithoutCancel(ctx), id, state, msg, art); err != nil {
			s.logger.Warn("a2a: the end of an approved call not kept", "agent", agent, "task", id, "error", err)
		}
	}()
}

func (s *Server) approvedCall(ctx context.Context, agent string, id a2a.TaskID, p *pending) (result, error) {
	proxy, err := s.caller(ctx, p.Caller)
	if err != nil {
		return result{}, err
	}
	return s.call(ctx, proxy, agent, p.Call, id, p.ContextID, p.MessageID)
}

// resume sends again the calls that waited for approval when the last
// server of this Instance on the store stopped, and fails the tasks whose
// calls it was running: whether those ran is not known.
func (s *Server) resume(ctx context.Context) error {
	for _, sv := range s.agents {
		marks, err := s.cfg.Store.List(ctx, store.Query{Kind: KindRunning, Parent: sv.id})
		if err != nil {
			return fmt.Errorf("a2a: reading the tasks under way: %w", err)
		}
		for _, d := range marks {
			var r running
			if json.Unmarshal(d.Body, &r) != nil || r.Instance != s.cfg.Instance {
				continue
			}
			if _, err := s.cfg.Store.Get(ctx, KindPending, d.ID); err == nil {
				continue // it waits for approval: sent again below
			}
			info := a2a.TaskInfo{TaskID: a2a.TaskID(d.ID)}
			msg := failureMessage(info, string(agency.TypeActionFailed),
				"the server restarted while this call ran; whether the action ran is not known: check, and send it again if need be")
			if err := sv.tasks.finish(ctx, a2a.TaskID(d.ID), a2a.TaskStateFailed, msg, nil); err != nil {
				s.logger.Warn("a2a: a task interrupted by a restart not ended", "agent", sv.id, "task", d.ID, "error", err)
			}
		}
		docs, err := s.cfg.Store.List(ctx, store.Query{Kind: KindPending, Parent: sv.id})
		if err != nil {
			return fmt.Errorf("a2a: reading the calls that wait for approval: %w", err)
		}
		for _, d := range docs {
			var p pending
			if err := json.Unmarshal(d.Body, &p); err != nil {
				s.logger.Warn("a2a: a call waiting for approval is unreadable", "agent", sv.id, "task", d.ID, "error", err)
				continue
			}
			if p.Instance != s.cfg.Instance {
				continue // another process's: it waits there, or is sent again when that process starts
			}
			s.logger.Info("a2a: a call waits for approval again", "agent", sv.id, "task", d.ID, "action", p.Call.Action, "caller", p.Caller)
			s.await(sv.id, a2a.TaskID(d.ID), &p)
		}
	}
	return nil
}
