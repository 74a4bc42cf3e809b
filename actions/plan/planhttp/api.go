package planhttp

import (
	"net/http"
	"strconv"

	"github.com/seed72275b23/agency-go/actions/plan"
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
	clarificationFields = []field{
		{name: "plan_id", kind: str, required: true, max: 255, id: true},
		{name: "session_id", kind: str, required: true, max: 255, id: true},
		{name: "human_clarification", kind: str, required: true, nonEmpty: true, max: maxText},
	}
)

func (h *handler) inputTask(w http.ResponseWriter, r *http.Request, user string) *httpError {
	b, e := decodeBody(w, r, h.cfg.maxBody, inputTaskFields)
	if e != nil {
		return e
	}
	ctx, cancel := h.ctx(r, h.cfg.wait)
	defer cancel()
	rc, err := h.client.InputTask(ctx, plan.InputTask{UserID: user, SessionID: b.strs["session_id"],
		Description: b.strs["description"], Wait: h.cfg.wait.Seconds()})
	if err != nil {
		return h.fail(r, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": rc.Status, "session_id": rc.SessionID, "plan_id": rc.PlanID,
		"description": rc.Description, "user_id": user})
	return nil
}

func feedbackOf(b *body, user string) plan.Feedback {
	return plan.Feedback{UserID: user, StepID: b.strs["step_id"], PlanID: b.strs["plan_id"], SessionID: b.strs["session_id"],
		Approved: b.bools["approved"], HumanFeedback: b.strs["human_feedback"], UpdatedAction: b.strs["updated_action"]}
}

func (h *handler) humanFeedback(w http.ResponseWriter, r *http.Request, user string) *httpError {
	fields := append([]field{{name: "step_id", kind: str, required: true, max: 255, id: true}}, feedbackFields[1:]...)
	b, e := decodeBody(w, r, h.cfg.maxBody, fields)
	if e != nil {
		return e
	}
	f := feedbackOf(b, user)
	f.Wait = h.cfg.wait.Seconds()
	ctx, cancel := h.ctx(r, h.cfg.wait)
	defer cancel()
	rc, err := h.client.HumanFeedback(ctx, f)
	if err != nil {
		return h.fail(r, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": rc.Status, "session_id": rc.SessionID, "step_id": rc.StepID})
	return nil
}

func (h *handler) approve(w http.ResponseWriter, r *http.Request, user string) *httpError {
	b, e := decodeBody(w, r, h.cfg.maxBody, feedbackFields)
	if e != nil {
		return e
	}
	f := feedbackOf(b, user)
	f.Wait = h.cfg.wait.Seconds()
	ctx, cancel := h.ctx(r, h.cfg.wait)
	defer cancel()
	rc, err := h.client.Approve(ctx, f)
	if err != nil {
		return h.fail(r, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": rc.Status})
	return nil
}

func (h *handler) clarify(w http.ResponseWriter, r *http.Request, user string) *httpError {
	b, e := decodeBody(w, r, h.cfg.maxBody, clarificationFields)
	if e != nil {
		return e
	}
	ctx, cancel := h.ctx(r, h.cfg.wait)
	defer cancel()
	rc, err := h.client.Clarify(ctx, plan.Clarification{UserID: user, PlanID: b.strs["plan_id"], SessionID: b.strs["session_id"],
		HumanClarification: b.strs["human_clarification"], Wait: h.cfg.wait.Seconds()})
	if err != nil {
		return h.fail(r, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": rc.Status, "session_id": rc.SessionID})
	return nil
}

func (h *handler) plans(w http.ResponseWriter, r *http.Request, user string) *httpError {
	q := plan.PlanQuery{UserID: user, SessionID: r.URL.Query().Get("session_id")}
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
	ctx, cancel := h.ctx(r, 0)
	defer cancel()
	views, err := h.client.Plans(ctx, q)
	if err != nil {
		return h.fail(r, err)
	}
	if q.SessionID != "" && len(views) == 0 {
		return errorf(http.StatusNotFound, "Plan not found")
	}
	out := make([]planWithStepsJSON, len(views))
	for i := range views {
		out[i] = viewPlanWithSteps(&views[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *handler) steps(w http.ResponseWriter, r *http.Request, user string) *httpError {
	if e := badID("path", "plan_id", r.PathValue("plan_id")); e != nil {
		return e
	}
	ctx, cancel := h.ctx(r, 0)
	defer cancel()
	views, err := h.client.Plans(ctx, plan.PlanQuery{UserID: user, PlanID: r.PathValue("plan_id")})
	if err != nil {
		return h.fail(r, err)
	}
	if len(views) == 0 {
		return errorf(http.StatusNotFound, "Plan not found")
	}
	writeJSON(w, http.StatusOK, viewSteps(&views[0]))
	return nil
}

func (h *handler) agentMessages(w http.ResponseWriter, r *http.Request, user string) *httpError {
	if e := badID("path", "session_id", r.PathValue("session_id")); e != nil {
		return e
	}
	ctx, cancel := h.ctx(r, 0)
	defer cancel()
	msgs, err := h.client.Messages(ctx, plan.MessageQuery{UserID: user, SessionID: r.PathValue("session_id")})
	if err != nil {
		return h.fail(r, err)
	}
	out := make([]messageJSON, len(msgs))
	for i := range msgs {
		out[i] = viewMessage(&msgs[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *handler) messages(w http.ResponseWriter, r *http.Request, user string) *httpError {
	ctx, cancel := h.ctx(r, 0)
	defer cancel()
	d, err := h.client.Documents(ctx, user)
	if err != nil {
		return h.fail(r, err)
	}
	status := map[string]string{}
	out := []any{}
	for i := range d.Plans {
		status[d.Plans[i].ID] = overall(d.Plans[i].Status)
	}
	for _, s := range d.Sessions {
		out = append(out, sessionJSON{ID: s.SessionID, DataType: "session", SessionID: s.SessionID, UserID: s.UserID,
			CurrentStatus: status[s.PlanID], TS: ts(s.Created)})
	}
	for i := range d.Plans {
		out = append(out, viewPlan(&d.Plans[i]))
	}
	plans := map[string]*plan.Plan{}
	for i := range d.Plans {
		plans[d.Plans[i].ID] = &d.Plans[i]
	}
	for i := range d.Steps {
		p := plans[d.Steps[i].PlanID]
		if p == nil {
			p = &plan.Plan{}
		}
		out = append(out, viewStep(p, &d.Steps[i]))
	}
	for i := range d.Messages {
		out = append(out, viewMessage(&d.Messages[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *handler) deleteMessages(w http.ResponseWriter, r *http.Request, user string) *httpError {
	ctx, cancel := h.ctx(r, 0)
	defer cancel()
	n, err := h.client.Delete(ctx, user)
	if err != nil {
		return h.fail(r, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "All messages deleted", "deleted": n.Documents})
	return nil
}

func (h *handler) agentTools(w http.ResponseWriter, r *http.Request, user string) *httpError {
	ctx, cancel := h.ctx(r, 0)
	defer cancel()
	tools, err := h.client.Tools(ctx, user)
	if err != nil {
		return h.fail(r, err)
	}
	out := make([]toolJSON, len(tools))
	for i := range tools {
		out[i] = viewTool(&tools[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
