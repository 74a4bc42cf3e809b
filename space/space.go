package space

import (
	"context"
	"errors"

	"github.com/seed72275b23/agency-go/agency"
)

// Space routes messages between the agents added to it.
//
// Implementations are safe for concurrent use and pass
// spacetest.Run. Messages between two agents arrive in the order they were
// sent.
type Space interface {
	// Add puts the agent in the space and returns once it can be reached and
	// its AfterAdd hook has run. An id already live in the space is
	// ErrAgentExists; an agent may be in one space at a time.
	Add(ctx context.Context, a *agency.Agent) error
	// Remove takes the agent with the given id out: it runs its BeforeRemove
	// hook, handles the messages already queued for it and waits for its
	// running actions, within ctx (see driver.Conn.Close, also for an agent
	// that removes itself). An unknown id is ErrUnknownAgent.
	Remove(ctx context.Context, id string) error
	// Close removes every agent and releases the space. Further calls to Add
	// fail with ErrClosed; Close itself may be called again and returns nil.
	Close(ctx context.Context) error
}

// Errors of the Space methods.
var (
	ErrAgentExists  = errors.New("space: an agent with this id is already in the space")
	ErrUnknownAgent = errors.New("space: no agent with this id in the space")
	ErrClosed       = errors.New("space: closed")
)
