package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/seed72275b23/agency-go/actions/store"
)

// The kinds of the documents the server keeps in its store.
const (
	// KindTask is an A2A task: Parent is the agent's id, User the caller's,
	// Session the A2A context id; the body is the task as A2A encodes it.
	KindTask = "a2a.task"
	// KindPending is a call that waits for approval, kept until its task
	// ends, so that a restarted server sends it again (same id, Parent and
	// User as its task).
	KindPending = "a2a.pending"
	// KindRunning marks a task that has not ended, with the Instance of the
	// server that took it: written with the task, deleted with its end, so
	// that a restarted server ends the tasks its predecessor was running.
	KindRunning = "a2a.running"
)

// tasks is the task store of one served agent: a taskstore.Store over a
// store.Store, whose tasks only their owner reads or writes (another
// caller's task is not found, as the A2A specification has it).
type tasks struct {
	st       store.Store
	agent    string
	instance string // the server's Instance
}

var _ taskstore.Store = (*tasks)(nil)

// ownerKey marks a context as the server's own, which may read every task.
type ownerKey struct{}

// asServer returns ctx for the server's own reads and writes of tasks.
func asServer(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, true)
}

// owner returns the caller that ctx speaks for, and whether it is the
// server itself.
func owner(ctx context.Context) (name string, server bool) {
	if v, _ := ctx.Value(ownerKey{}).(bool); v {
		return "", true
	}
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil {
		return cc.User.Name, false
	}
	return "", false
}

func (t *tasks) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	if task == nil || task.ID == "" {
		return taskstore.TaskVersionMissing, fmt.Errorf("a task without an id: %w", a2a.ErrInvalidParams)
	}
	name, _ := owner(ctx)
	body, err := json.Marshal(task)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	d := store.Doc{Kind: KindTask, ID: string(task.ID), Parent: t.agent, User: name, Session: task.ContextID, Body: body}
	c := store.Changes{Put: []store.Doc{d}}
	if !task.Status.State.Terminal() {
		mark, _ := json.Marshal(running{Instance: t.instance})
		c.Put = append(c.Put, store.Doc{Kind: KindRunning, ID: d.ID, Parent: t.agent, User: name, Body: mark})
	}
	if err := t.st.Apply(ctx, c); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return taskstore.TaskVersionMissing, taskstore.ErrTaskAlreadyExists
		}
		return taskstore.TaskVersionMissing, err
	}
	return 1, nil
}

// doc reads the task's document, which ctx's caller must own.
func (t *tasks) doc(ctx context.Context, id a2a.TaskID) (store.Doc, error) {
	d, err := t.st.Get(ctx, KindTask, string(id))
	if errors.Is(err, store.ErrNotFound) {
		return d, a2a.ErrTaskNotFound
	}
	if err != nil {
		return d, err
	}
	name, server := owner(ctx)
	if d.Parent != t.agent || !server && d.User != name {
		return store.Doc{}, a2a.ErrTaskNotFound // another agent's or another caller's: not there for this one
	}
	return d, nil
}

func (t *tasks) Update(ctx context.Context, u *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if u == nil || u.Task == nil {
		return taskstore.TaskVersionMissing, a2a.ErrInvalidParams
	}
	d, err := t.doc(ctx, u.Task.ID)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	if u.PrevVersion != taskstore.TaskVersionMissing && int64(u.PrevVersion) != d.Version {
		return taskstore.TaskVersionMissing, taskstore.ErrConcurrentModification
	}
	return t.put(ctx, d, u.Task)
}

// put replaces the task of d, read at d.Version, with task; a task that
// ends takes its pending call with it.
func (t *tasks) put(ctx context.Context, d store.Doc, task *a2a.Task) (taskstore.TaskVersion, error) {
	body, err := json.Marshal(task)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	d.Body = body
	c := store.Changes{Put: []store.Doc{d}}
	if task.Status.State.Terminal() {
		for _, kind := range []string{KindPending, KindRunning} {
			if p, err := t.st.Get(ctx, kind, d.ID); err == nil {
				c.Delete = append(c.Delete, p)
			}
		}
	}
	if err := t.st.Apply(ctx, c); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return taskstore.TaskVersionMissing, taskstore.ErrConcurrentModification
		}
		return taskstore.TaskVersionMissing, err
	}
	return taskstore.TaskVersion(d.Version + 1), nil
}

func (t *tasks) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	d, err := t.doc(ctx, id)
	if err != nil {
		return nil, err
	}
	var task a2a.Task
	if err := json.Unmarshal(d.Body, &task); err != nil {
		return nil, fmt.Errorf("a2a: task %s: %w", id, err)
	}
	return &taskstore.StoredTask{Task: &task, Version: taskstore.TaskVersion(d.Version), User: d.User}, nil
}

// maxList bounds the tasks ListTasks reads.
const maxList = 100

func (t *tasks) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	size := req.PageSize
	if size == 0 {
		size = 50
	}
	if size < 1 || size > maxList {
		return nil, fmt.Errorf("page size must be between 1 and %d, got %d: %w", maxList, size, a2a.ErrInvalidRequest)
	}
	if req.PageToken != "" {
		return nil, fmt.Errorf("this server lists one page, the newest tasks: %w", a2a.ErrInvalidParams)
	}
	name, _ := owner(ctx)
	docs, err := t.st.List(ctx, store.Query{Kind: KindTask, Parent: t.agent, User: name, Session: req.ContextID, Newest: true})
	if err != nil {
		return nil, err
	}
	res := &a2a.ListTasksResponse{PageSize: size, Tasks: []*a2a.Task{}}
	for _, d := range docs {
		var task a2a.Task
		if err := json.Unmarshal(d.Body, &task); err != nil {
			continue
		}
		if req.Status != a2a.TaskStateUnspecified && task.Status.State != req.Status {
			continue
		}
		if req.StatusTimestampAfter != nil && task.Status.Timestamp != nil && task.Status.Timestamp.Before(*req.StatusTimestampAfter) {
			continue
		}
		res.TotalSize++
		if len(res.Tasks) == size {
			continue
		}
		if !req.IncludeArtifacts {
			task.Artifacts = nil
		}
		if req.HistoryLength != nil && *req.HistoryLength >= 0 && len(task.History) > *req.HistoryLength {
			task.History = task.History[len(task.History)-*req.HistoryLength:]
		}
		res.Tasks = append(res.Tasks, &task)
	}
	return res, nil
}

// running is the body of a KindRunning document.
type running struct {
	Instance string `json:"instance,omitempty"`
}

// pending is a call that waits for approval: the body of a KindPending
// document.
type pending struct {
	Caller    string    `json:"caller"`
	Instance  string    `json:"instance,omitempty"` // the server process that took it
	ContextID string    `json:"context_id"`
	Call      call      `json:"call"`
	MessageID string    `json:"message_id"` // the agency message's id, sent again after a restart
	Since     time.Time `json:"since"`
}

// finish ends the task id (as the server, whoever owns it) with state,
// status message msg and, for a result, the artifact art: unless it has
// ended already (canceled, say). It retries on a concurrent write.
func (t *tasks) finish(ctx context.Context, id a2a.TaskID, state a2a.TaskState, msg *a2a.Message, art *a2a.Artifact) error {
	ctx = asServer(ctx)
	for {
		d, err := t.doc(ctx, id)
		if err != nil {
			return err
		}
		var task a2a.Task
		if err := json.Unmarshal(d.Body, &task); err != nil {
			return err
		}
		if task.Status.State.Terminal() {
			return nil
		}
		now := time.Now().UTC()
		task.Status = a2a.TaskStatus{State: state, Message: msg, Timestamp: &now}
		if art != nil {
			task.Artifacts = append(task.Artifacts, art)
		}
		if _, err := t.put(ctx, d, &task); !errors.Is(err, taskstore.ErrConcurrentModification) {
			return err
		}
	}
}
