package plan

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/seed72275b23/agency-go/agency"
)

// Defaults of the options.
const (
	DefaultPlanner    = "PlannerAgent"
	DefaultApprover   = "HumanAgent"
	DefaultMaxReplans = 3
	DefaultLease      = 10 * time.Minute
)

// Option configures a Coordinator in NewCoordinator. Each may be given once;
// an invalid or repeated option makes NewCoordinator fail with an error that
// matches agency.ErrInvalidOption.
type Option func(*config) error

type config struct {
	planner    string
	approvers  []string
	team       []string
	maxReplans int
	lease      time.Duration
	auto       func(Step) bool
	logger     *slog.Logger
	observe    func(context.Context, Event)
	agentOpts  []agency.Option
	set        map[string]bool
}

func (c *config) once(name string) error {
	if c.set[name] {
		return fmt.Errorf("%w: plan.%s given twice", agency.ErrInvalidOption, name)
	}
	c.set[name] = true
	return nil
}

// Planner names the agent that makes plans: an LLM agent (actions/openai)
// whose model calls the coordinator's submit_plan. Only it may call
// submit_plan and say. Default "PlannerAgent".
func Planner(id string) Option {
	return func(c *config) error {
		if err := agency.ValidateID(id); err != nil {
			return fmt.Errorf("%w: plan.Planner: %v", agency.ErrInvalidOption, err)
		}
		c.planner = id
		return c.once("Planner")
	}
}

// Approver names the agents that speak for people: they may create plans,
// approve and reject steps, answer clarifications and read plans, each
// on behalf of the user it names. Default "HumanAgent", the id of MACAE's
// human agent.
func Approver(ids ...string) Option {
	return func(c *config) error {
		if len(ids) == 0 {
			return fmt.Errorf("%w: plan.Approver: no id", agency.ErrInvalidOption)
		}
		for _, id := range ids {
			if err := agency.ValidateID(id); err != nil {
				return fmt.Errorf("%w: plan.Approver: %v", agency.ErrInvalidOption, err)
			}
		}
		c.approvers = append([]string(nil), ids...)
		return c.once("Approver")
	}
}

// Team names the agents whose actions steps may use. Without it, every agent
// that answers the coordinator's help survey but the planner and the
// approvers is on the team.
func Team(ids ...string) Option {
	return func(c *config) error {
		for _, id := range ids {
			if err := agency.ValidateID(id); err != nil {
				return fmt.Errorf("%w: plan.Team: %v", agency.ErrInvalidOption, err)
			}
		}
		c.team = append([]string(nil), ids...)
		return c.once("Team")
	}
}

// MaxReplans bounds how often the planner is asked to revise a plan after a
// rejected or failed step (default 3); the rejection or failure after that
// fails the plan, with the reason.
func MaxReplans(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: plan.MaxReplans(%d): negative", agency.ErrInvalidOption, n)
		}
		c.maxReplans = n
		return c.once("MaxReplans")
	}
}

// AutoApprove has the coordinator approve, without asking a person, each
// step for which f returns true; every other step waits for an approver
// as before. f is asked when the step's turn comes, in the transaction
// that would make it awaiting_feedback: a step it approves is approved
// and queued for its agent in that one change, so that no restart can
// leave it waiting for a person, and it is sent (and sent again) as a
// step a person approved is. Such a
// step has Step.AutoApproved set, the step_status event of its approval
// has Event.AutoApproved set, and the plan's log says "approved
// automatically", in the coordinator's name.
//
// f gets a copy of the step (changing it changes nothing) and must be
// quick and must not call the coordinator: the plan waits while it runs.
// It may be called more than once for a step (a change is tried again
// after a conflict with another replica), so it should depend on the step
// alone. A panic in f is logged and counts as false: the step waits for a
// person. A person may still approve or reject a step before its turn,
// and approve_step_or_steps approves or rejects every step that has not
// run, whatever f would answer.
func AutoApprove(f func(Step) bool) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: plan.AutoApprove: nil function", agency.ErrInvalidOption)
		}
		c.auto = f
		return c.once("AutoApprove")
	}
}

// Lease is how long a step sent to its agent may go unanswered before it is
// sent again (with the same idempotency key), and how long the planner may
// take before it is asked again. Default 10 minutes. It bounds how late
// work lost with a crashed process is taken up again, and should exceed the
// time the slowest step takes.
func Lease(d time.Duration) Option {
	return func(c *config) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("%w: plan.Lease(%v): at least 10ms", agency.ErrInvalidOption, d)
		}
		c.lease = d
		return c.once("Lease")
	}
}

// Logger sets where the coordinator logs each event (with plan, step and
// session ids) and what goes wrong. Default: nothing is logged.
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: plan.Logger: nil", agency.ErrInvalidOption)
		}
		c.logger = l
		return c.once("Logger")
	}
}

// AgentOptions are options of the coordinator's *agency.Agent, applied
// after its own: agency.Hooks with a tracing instrumentation (package
// agency/otelagency), say. With one, the steps a change sends are in the
// trace of the message that made the change, and the plan's events are
// span events ("plan.step_status", …) on the span of that handling.
func AgentOptions(opts ...agency.Option) Option {
	return func(c *config) error {
		for _, o := range opts {
			if o == nil {
				return fmt.Errorf("%w: plan.AgentOptions: a nil option", agency.ErrInvalidOption)
			}
		}
		c.agentOpts = append(c.agentOpts, opts...)
		return nil
	}
}

// Observe has f called with every event, after the change it reports is
// committed. f runs on the goroutine that made the change and must not
// block.
func Observe(f func(context.Context, Event)) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: plan.Observe: nil", agency.ErrInvalidOption)
		}
		c.observe = f
		return c.once("Observe")
	}
}
