package agency

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"math/bits"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Broadcast is the recipient id of a message addressed to every agent in the
// space.
const Broadcast = "*"

// Names of the actions the framework itself answers or sends. No agent may
// register them.
const (
	HelpAction     = "help"
	ResponseAction = "[response]"
	ErrorAction    = "[error]"
	// PartAction is a part of an answer, sent before the answer to a
	// request that asked for parts (see [Emit] and [Agent.Stream]).
	PartAction = "[part]"
	// CancelAction tells the agent streaming parts of an answer that its
	// caller has stopped reading them (see [Agent.Stream]).
	CancelAction = "[cancel]"
)

// Message is one message between agents.
//
// On the wire it is the JSON object
//
//	{"to": To, "from": From,
//	 "action": {"__meta__": {"id": ID, "parent_id": ParentID, ...Meta}, Action: Args}}
//
// (see [Message.MarshalJSON]). In memory the action name, its arguments and
// the framework's meta keys (id, parent_id, deadline, no_reply) are fields
// of their own.
//
// A space may deliver the same *Message to several agents and, in process,
// without copying it: a received message must be treated as read-only.
type Message struct {
	To   string // recipient id, or Broadcast
	From string // sender id; set by the framework on send

	ID       string         // __meta__.id: unique per message, set on send unless given
	ParentID string         // __meta__.parent_id: on a response, the id it answers
	Deadline time.Time      // __meta__.deadline: when the sender stops waiting (Request sets it from its ctx); the recipient does not run a message whose deadline has passed
	NoReply  bool           // __meta__.no_reply: the sender takes no responses, so none is sent; Send sets it for an agent without ValueHandler or ErrorHandler
	Stream   bool           // __meta__.stream: the sender takes parts of the answer before it (see Agent.Stream); Stream sets it
	Seq      uint32         // __meta__.seq: a [part]'s number in its stream, from 1; on the answer to a Stream, how many parts came before it
	Meta     map[string]any // every other __meta__ key, carried unchanged

	Action string // the action name
	// Args holds the action's arguments: nil (meaning {}), a json.RawMessage
	// holding a JSON object (as received from the wire), or any Go value that
	// encodes to a JSON object (a struct, a map, a pointer to either).
	//
	// For a ResponseAction, Args is the response value; for an ErrorAction it
	// is an *ActionError. [Message.IsResponse], [Message.Err] and [Value] read
	// them.
	Args any

	// handler is the recipient whose handler has the message itself as
	// its context (see sentContext), or nil. It is set once, when the
	// message is delivered to that recipient (see claimContext), which in
	// process is on the sender's goroutine, before Send returns; the
	// message then costs its handling no allocation. It is not part of
	// the message's content: a copy that carries it along is a message
	// delivered to the same recipient.
	handler *conn
}

// IsResponse reports whether m is a [response] or an [error].
func (m *Message) IsResponse() bool {
	return m.Action == ResponseAction || m.Action == ErrorAction
}

// Err returns the *ActionError an [error] message carries, and nil for every
// other message.
func (m *Message) Err() error {
	if m.Action != ErrorAction {
		return nil
	}
	if e, ok := m.Args.(*ActionError); ok {
		return e
	}
	return &ActionError{Type: TypeActionFailed, Text: "malformed [error] message"}
}

// String returns the message in its wire form, or a note that it does not
// encode.
func (m *Message) String() string {
	b, err := m.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("<unencodable message %s→%s %q: %v>", m.From, m.To, m.Action, err)
	}
	return string(b)
}

// ValidateID reports whether id may name an agent: 1 to 255 bytes of valid
// UTF-8, not "*", not starting with "amq.", and containing neither '*' nor '#'
// nor white space, so that no id can bind a wildcard in a topic exchange and
// read another agent's messages.
func ValidateID(id string) error {
	if plainID(id) {
		return nil
	}
	return validateIDSlow(id)
}

// validateIDSlow is ValidateID for any input.
func validateIDSlow(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidID)
	case len(id) > 255:
		return fmt.Errorf("%w: %d bytes long, the limit is 255", ErrInvalidID, len(id))
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidID, id)
	case strings.HasPrefix(id, "amq."):
		return fmt.Errorf("%w: %q starts with the reserved prefix \"amq.\"", ErrInvalidID, id)
	}
	for _, r := range id {
		if r == '*' || r == '#' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%w: %q contains %q", ErrInvalidID, id, r)
		}
	}
	return nil
}

// plainID reports, quickly, whether id is a valid id of printable ASCII
// (as most are); false sends ValidateID the long way.
func plainID(id string) bool {
	if len(id) == 0 || len(id) > 255 || (len(id) >= 4 && id[:4] == "amq.") {
		return false
	}
	for i := 0; i < len(id); i++ {
		if b := id[i]; b <= ' ' || b >= 0x7f || b == '*' || b == '#' {
			return false
		}
	}
	return true
}

// validateRecipient accepts an agent id or Broadcast.
func validateRecipient(to string) error {
	if to == Broadcast {
		return nil
	}
	return ValidateID(to)
}

// validateActionName reports whether name may appear as an action in a
// message: the framework's own names, or a name an agent could register.
func validateActionName(name string) error {
	if plainActionName(name) || name == ResponseAction || name == ErrorAction || name == PartAction || name == CancelAction {
		return nil
	}
	return validateRegisterable(name)
}

// plainActionName reports, quickly, whether name is an ASCII name that an
// agent could register, or help (as most names in messages are); false
// sends validateActionName the long way.
func plainActionName(name string) bool {
	if len(name) == 0 || len(name) > 255 || name[0] == '[' || (len(name) >= 2 && name[:2] == "__") {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// validateRegisterable reports whether an agent may register an action named
// name. Names starting with "[" or "__" are kept for the framework.
func validateRegisterable(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidActionName)
	case name == HelpAction || name == ResponseAction || name == ErrorAction || name == PartAction || name == CancelAction:
		return fmt.Errorf("%w: %q is reserved", ErrInvalidActionName, name)
	case strings.HasPrefix(name, "[") || strings.HasPrefix(name, "__"):
		return fmt.Errorf("%w: %s: names starting with \"[\" or \"__\" are reserved", ErrInvalidActionName, quote(name))
	case len(name) > 255:
		return fmt.Errorf("%w: %d bytes long, the limit is 255", ErrInvalidActionName, len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidActionName, name)
	}
	return nil
}

// idPrefix makes message ids unique across processes: 64 random bits per
// process (11 bytes of base64url, and a dash), followed by a per-process
// counter in base 32.
var (
	idPrefix  = newIDPrefix()
	idCounter atomic.Uint64
)

func newIDPrefix() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("agency: no randomness for message ids: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:]) + "-"
}

// NewID returns a message id that no other call, in this process or another,
// returns.
func NewID() string { return idString(idCounter.Add(1)) }

// appendID appends the id numbered n to b.
func appendID(b []byte, n uint64) []byte {
	return appendDigits(append(b, idPrefix...), n)
}

// appendDigits appends n in base 32 to b.
func appendDigits(b []byte, n uint64) []byte {
	// n in base 32 (as strconv.FormatUint(n, 32) has it), written in place.
	digits := max(1, (bits.Len64(n)+4)/5)
	b = append(b, make([]byte, digits)...)
	for i := len(b) - 1; i >= len(b)-digits; i-- {
		b[i] = base32Digits[n&31]
		n >>= 5
	}
	return b
}

const base32Digits = "0123456789abcdefghijklmnopqrstuv"

// Ids are written into blocks of idBlockLen slots of idSlotLen bytes,
// shared by the whole process: the id numbered n goes in slot n mod
// idBlockLen of the block for its number, which only it writes. An id is a
// string over its slot, so a message's id costs no allocation of its own
// (one block of 512 bytes for every 25 ids), and an id kept after its
// message (the id Send returns, a response's ParentID) keeps alive only
// its block's bytes, which hold no pointers, never the message, its
// arguments or its recipient.
const (
	idSlotLen  = 20 // the 12 bytes of the prefix and 8 digits: the first 2^40 ids of the process
	idBlockLen = 25 // 8 + 25 × 20 = 508 bytes, in the allocator's size class of 512
)

// idBlock is a block of id slots.
type idBlock struct {
	first uint64 // the number of the id in slot 0: a multiple of idBlockLen
	slot  [idBlockLen][idSlotLen]byte
}

// idBlocks is the block of the ids being handed out now.
var idBlocks atomic.Pointer[idBlock]

// idString returns the id numbered n, a number idCounter gave out.
func idString(n uint64) string {
	if n >= 1<<(5*(idSlotLen-len("0123456789a-"))) {
		return string(appendID(nil, n))
	}
	first := n - n%idBlockLen
	b := idBlocks.Load()
	if b == nil || b.first != first {
		b = idBlockFor(first)
	}
	slot := &b.slot[n-first]
	// The slot holds the prefix already (see newIDBlock); its digits are
	// written once, here, by the one caller numbered n, and never again:
	// the string may share its bytes.
	id := appendDigits(slot[:len(idPrefix)], n)
	return unsafe.String(&slot[0], len(id))
}

// newIDBlock returns a block for the ids from first on, with the prefix
// written in every slot.
func newIDBlock(first uint64) *idBlock {
	b := &idBlock{first: first}
	for i := range b.slot {
		copy(b.slot[i][:], idPrefix)
	}
	return b
}

// idBlockFor returns the block for the ids from first on, making it the
// shared one unless a later one is already: a caller that fell that far
// behind writes its id into a block of its own.
//
//go:noinline
func idBlockFor(first uint64) *idBlock {
	for {
		b := idBlocks.Load()
		switch {
		case b != nil && b.first == first:
			return b
		case b != nil && b.first > first:
			return newIDBlock(first)
		}
		nb := newIDBlock(first)
		if idBlocks.CompareAndSwap(b, nb) {
			return nb
		}
	}
}

// newMessage returns a message with a new id.
func newMessage() *Message { return newMessageNumbered(idCounter.Add(1)) }

// newMessageNumbered returns a message with the id numbered n.
func newMessageNumbered(n uint64) *Message {
	return &Message{ID: idString(n)}
}
