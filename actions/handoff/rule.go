package handoff

// Rule is one thing an agent with a Policy does about its conversations,
// in the vocabulary of AG2's swarms: a transfer tool the model may call
// (OnLLM), a condition on the variables that hands the conversation on
// without asking the model (OnContext), what happens when the model
// answers in text (AfterWork), a system prompt that follows the variables
// (SystemTemplate), or the handoffs of a Dispatcher (Dispatch). Make them
// with those functions; NewPolicy checks them all.
type Rule struct {
	kind      ruleKind
	to        Target
	text      string // OnLLM's description, OnContext's condition, SystemTemplate's text
	name      string
	message   string
	available string
	d         *Dispatcher
	manage    bool
}

type ruleKind int

const (
	ruleLLM ruleKind = iota + 1
	ruleContext
	ruleAfterWork
	ruleTemplate
	ruleDispatch
)

// RuleOption configures an OnLLM or OnContext rule.
type RuleOption func(*Rule)

// OnLLM offers the model a transfer tool: calling it hands the
// conversation to to (To an agent, or Back), and its result, which the
// model reads, is the handoff's Message. description is the tool's
// description: when to call it. The tool is named transfer_to_<agent> (or
// transfer_back) unless Name says otherwise, and takes no arguments.
func OnLLM(to Target, description string, opts ...RuleOption) Rule {
	r := Rule{kind: ruleLLM, to: to, text: description}
	for _, o := range opts {
		o(&r)
	}
	return r
}

// OnContext hands the conversation to to (To an agent, or Back) without
// calling the model, as soon as cond holds: it is checked before every
// model call, in the order of the rules, and the first that holds fires.
// cond is compiled when the Policy is made (see Env); one
// that cannot be evaluated at run time does not fire, and emits a
// condition_error event.
func OnContext(to Target, cond string, opts ...RuleOption) Rule {
	r := Rule{kind: ruleContext, to: to, text: cond}
	for _, o := range opts {
		o(&r)
	}
	return r
}

// AfterWork says what happens when the model answers in text, after the
// answer is said to the user: RevertToUser (the default) waits for the
// user, To and Back also hand the conversation on, Stay calls the model
// again, Terminate ends the conversation. An agent's AfterWork wins over
// the Team's (or the Policy's DefaultAfterWork).
func AfterWork(to Target) Rule { return Rule{kind: ruleAfterWork, to: to} }

// SystemTemplate makes the system prompt of every model call from a
// text/template over the conversation's variables, as AG2's
// UpdateSystemMessage does: "Quote passport number '{{.passport_number}}'".
// It replaces the agent's system prompt; a variable that is missing reads
// "<no value>".
func SystemTemplate(text string) Rule { return Rule{kind: ruleTemplate, text: text} }

// Name names a rule's transfer tool (^[a-zA-Z0-9_-]{1,64}$, no "__").
func Name(tool string) RuleOption { return func(r *Rule) { r.name = tool } }

// Message sets the handoff's message (default "Transferred to <agent>.
// Adopt persona immediately.").
func Message(text string) RuleOption { return func(r *Rule) { r.message = text } }

// Available makes a rule count only while cond holds: a transfer tool is
// offered, an OnContext rule checked, only then. A variable's name alone
// is a condition: Available("logged_in").
func Available(cond string) RuleOption { return func(r *Rule) { r.available = cond } }

// Dispatch offers the model the enabled handoffs of d as transfer tools,
// one per handoff, on every model call (see Dispatcher). With Manage, the
// model also gets the four tools that create, enable, disable and delete
// handoffs in d, to d's authorized targets only; what it changes is kept
// per agent and conversation.
func Dispatch(d *Dispatcher, opts ...DispatchOption) Rule {
	r := Rule{kind: ruleDispatch, d: d}
	for _, o := range opts {
		o(&r)
	}
	return r
}

// DispatchOption configures a Dispatch rule.
type DispatchOption func(*Rule)

// Manage gives the model the tools create_handoff, enable_handoff,
// disable_handoff and delete_handoff.
func Manage() DispatchOption { return func(r *Rule) { r.manage = true } }
