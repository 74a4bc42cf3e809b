package planhttp

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/seed72275b23/agency-go/actions/plan"
	"github.com/seed72275b23/agency-go/actions/plan/internal/front"
)

const maxText = 65536

var (
	inputTaskFields = []field{
		{name: "session_id", kind: str, max: 255, id: true},
		{name: "description", kind: str, required: true, nonEmpty: true, max: maxText},
	}
	feedbackFields = []field{
		{name: "step_id", kind: str, max: 255, id: true},
		{name: "plan_id", kind: str, required: true, max: 255, id: true},
		{name: "session_id", kind: str, required: true, max: 255, id: true},
		{name: "approved", kind: boolean, required: true},
		{name: "human_feedback", kind: str, max: maxText},
		{name: "updated_action", kind: str, max: maxText},
	}
	humanFeedbackFields = append([]field{{name: "step_id", kind: str, required: true, max: 255, id: true}}, feedbackFields[1:]...)
	clarificationFields = []field{
		{name: "plan_id", kind: str, required: true, max: 255, id: true},
		{name: "session_id", kind: str, required: true, max: 255, id: true},
		{name: "human_clarification", kind: str, required: true, nonEmpty: true, max: maxText},
	}
)

// answer serves one request by one call to the coordinator: it bounds the
// call (the request's context, for the timeout plus wait), makes it with
// do, turns its error into an answer, and writes what view makes of its
// value (view may answer with an error of its own instead).
func answer[R any](h *handler, w http.ResponseWriter, r *http.Request, wait time.Duration,
	do func(ctx context.Context) (R, error), view func(R) (any, *httpError)) *httpError {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.timeout+wait)
	defer cancel()
	v, err := do(ctx)
	if err != nil {
		return h.fail(r, err)
	}
	out, e := view(v)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *handler) inputTask(w http.ResponseWriter, r *http.Request, user string) *httpError {
	b, e := decodeBody(w, r, h.cfg.maxBody, inputTaskFields)
	if e != nil {
		return e
	}
	args := front.InputTask{UserID: user, SessionID: b.strs["session_id"], Description: b.strs["description"], Wait: h.cfg.wait.Seconds()}
	return answer(h, w, r, h.cfg.wait,
		func(ctx context.Context) (front.Receipt, error) {
			return call[front.Receipt](ctx, h.client, "input_task", args)
		},
		func(rc front.Receipt) (any, *httpError) {
			return map[string]any{"status": rc.Status, "session_id": rc.SessionID, "plan_id": rc.PlanID,
				"description": rc.Description, "user_id": user}, nil
		})
}

func feedbackOf(b *body, user string, wait time.Duration) front.Feedback {
	return front.Feedback{UserID: user, StepID: b.strs["step_id"], PlanID: b.strs["plan_id"], SessionID: b.strs["session_id"],
		Approved: b.bools["approved"], HumanFeedback: b.strs["human_feedback"], UpdatedAction: b.strs["updated_action"],
		Wait: wait.Seconds()}
}

func (h *handler) humanFeedback(w http.ResponseWriter, r *http.Request, user string) *httpError {
	b, e := decodeBody(w, r, h.cfg.maxBody, humanFeedbackFields)
	if e != nil {
		return e
	}
	args := feedbackOf(b, user, h.cfg.wait)
	return answer(h, w, r, h.cfg.wait,
		func(ctx context.Context) (front.Receipt, error) {
			return call[front.Receipt](ctx, h.client, "human_feedback", args)
		},
		func(rc front.Receipt) (any, *httpError) {
			return map[string]any{"status": rc.Status, "session_id": rc.SessionID, "step_id": rc.StepID}, nil
		})
}

func (h *handler) approve(w http.ResponseWriter, r *http.Request, user string) *httpError {
	b, e := decodeBody(w, r, h.cfg.maxBody, feedbackFields)
	if e != nil {
		return e
	}
	args := feedbackOf(b, user, h.cfg.wait)
	return answer(h, w, r, h.cfg.wait,
		func(ctx context.Context) (front.Receipt, error) {
			return call[front.Receipt](ctx, h.client, "approve_step_or_steps", args)
		},
		func(rc front.Receipt) (any, *httpError) { return map[string]any{"status": rc.Status}, nil })
}

func (h *handler) clarify(w http.ResponseWriter, r *http.Request, user string) *httpError {
	b, e := decodeBody(w, r, h.cfg.maxBody, clarificationFields)
	if e != nil {
		return e
	}
	args := front.Clarification{UserID: user, PlanID: b.strs["plan_id"], SessionID: b.strs["session_id"],
		HumanClarification: b.strs["human_clarification"], Wait: h.cfg.wait.Seconds()}
	return answer(h, w, r, h.cfg.wait,
		func(ctx context.Context) (front.Receipt, error) {
			return call[front.Receipt](ctx, h.client, "human_clarification_on_plan", args)
		},
		func(rc front.Receipt) (any, *httpError) {
			return map[string]any{"status": rc.Status, "session_id": rc.SessionID}, nil
		})
}

func (h *handler) plans(w http.ResponseWriter, r *http.Request, user string) *httpError {
	q := front.PlanQuery{UserID: user, SessionID: r.URL.Query().Get("session_id")}
	if e := badID("query", "session_id", q.SessionID); e != nil {
		return e
	}
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return invalid(fieldError{Loc: []string{"query", "limit"}, Msg: "ensure this value is an integer from 1 to 1000", Type: "value_error.number"})
		}
		q.Limit = n
	}
	return answer(h, w, r, 0,
		func(ctx context.Context) ([]plan.View, error) { return call[[]plan.View](ctx, h.client, "plans", q) },
		func(views []plan.View) (any, *httpError) {
			if q.SessionID != "" && len(views) == 0 {
				return nil, errorf(http.StatusNotFound, "Plan not found")
			}
			out := make([]planWithStepsJSON, len(views))
			for i := range views {
				out[i] = viewPlanWithSteps(&views[i])
			}
			return out, nil
		})
}

func (h *handler) steps(w http.ResponseWriter, r *http.Request, user string) *httpError {
	q := front.PlanQuery{UserID: user, PlanID: r.PathValue("plan_id")}
	if e := badID("path", "plan_id", q.PlanID); e != nil {
		return e
	}
	return answer(h, w, r, 0,
		func(ctx context.Context) ([]plan.View, error) { return call[[]plan.View](ctx, h.client, "plans", q) },
		func(views []plan.View) (any, *httpError) {
			if len(views) == 0 {
				return nil, errorf(http.StatusNotFound, "Plan not found")
			}
			return viewSteps(&views[0]), nil
		})
}

func (h *handler) agentMessages(w http.ResponseWriter, r *http.Request, user string) *httpError {
	q := front.MessageQuery{UserID: user, SessionID: r.PathValue("session_id")}
	if e := badID("path", "session_id", q.SessionID); e != nil {
		return e
	}
	return answer(h, w, r, 0,
		func(ctx context.Context) ([]plan.Message, error) { return h.client.messages(ctx, q) },
		func(msgs []plan.Message) (any, *httpError) {
			out := make([]messageJSON, len(msgs))
			for i := range msgs {
				out[i] = viewMessage(&msgs[i])
			}
			return out, nil
		})
}

func (h *handler) messages(w http.ResponseWriter, r *http.Request, user string) *httpError {
	return answer(h, w, r, 0,
		func(ctx context.Context) (plan.Documents, error) {
			return call[plan.Documents](ctx, h.client, "documents", front.UserQuery{UserID: user})
		},
		func(d plan.Documents) (any, *httpError) { return viewDocuments(&d), nil })
}

func (h *handler) deleteMessages(w http.ResponseWriter, r *http.Request, user string) *httpError {
	return answer(h, w, r, 0,
		func(ctx context.Context) (front.Deleted, error) {
			return call[front.Deleted](ctx, h.client, "delete_documents", front.UserQuery{UserID: user})
		},
		func(n front.Deleted) (any, *httpError) {
			return map[string]any{"status": "All messages deleted", "deleted": n.Documents}, nil
		})
}

func (h *handler) agentTools(w http.ResponseWriter, r *http.Request, user string) *httpError {
	return answer(h, w, r, 0,
		func(ctx context.Context) ([]plan.Tool, error) {
			return call[[]plan.Tool](ctx, h.client, "agent_tools", front.UserQuery{UserID: user})
		},
		func(tools []plan.Tool) (any, *httpError) {
			out := make([]toolJSON, len(tools))
			for i := range tools {
				out[i] = viewTool(&tools[i])
			}
			return out, nil
		})
}
