package openai

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	gopenai "github.com/sashabaranov/go-openai"
)

// maxToolName is the longest function name the chat-completions API takes;
// names must match ^[a-zA-Z0-9_-]{1,64}$.
const maxToolName = 64

// toolKey names an action of an agent.
type toolKey struct{ Agent, Action string }

// toolSet is the tools of one model call and the way back from a tool name
// to what it stands for: an action of the catalog, or the extension that
// offered it.
type toolSet struct {
	tools  []gopenai.Tool
	byName map[string]toolKey
	ext    map[string]int // tool name → index of the extension that offered it
}

// newToolSet makes one function tool per spec (see toolNames), then one
// per extension tool, owner[i] being the index of the extension that
// offered extra[i]. An extension tool with a bad or taken name is an error.
func newToolSet(specs []toolSpec, extra []Tool, owner []int) (toolSet, error) {
	keys := make([]toolKey, len(specs))
	for i, s := range specs {
		keys[i] = toolKey{s.Agent, s.Action}
	}
	names := toolNames(keys)
	ts := toolSet{tools: make([]gopenai.Tool, 0, len(specs)+len(extra)), byName: make(map[string]toolKey, len(specs))}
	for i, s := range specs {
		ts.tools = append(ts.tools, gopenai.Tool{Type: gopenai.ToolTypeFunction, Function: &gopenai.FunctionDefinition{
			Name:        names[i],
			Description: s.Description,
			Parameters:  s.Params,
		}})
		ts.byName[names[i]] = keys[i]
	}
	if len(extra) > 0 {
		ts.ext = make(map[string]int, len(extra))
	}
	for i, t := range extra {
		if !readable(t.Name) || len(t.Name) > maxToolName || strings.Contains(t.Name, "__") {
			return toolSet{}, fmt.Errorf("openai: extension tool name %q: want ^[a-zA-Z0-9_-]{1,64}$ without \"__\"", t.Name)
		}
		_, isCatalog := ts.byName[t.Name]
		if _, taken := ts.ext[t.Name]; taken || isCatalog {
			return toolSet{}, fmt.Errorf("openai: extension tool %q offered twice", t.Name)
		}
		params := t.Parameters
		if params == nil {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !isObject(params) {
			return toolSet{}, fmt.Errorf("openai: extension tool %q: its parameters are not a JSON object", t.Name)
		}
		ts.tools = append(ts.tools, gopenai.Tool{Type: gopenai.ToolTypeFunction, Function: &gopenai.FunctionDefinition{
			Name:        t.Name,
			Description: t.Description,
			Parameters:  params,
		}})
		ts.ext[t.Name] = owner[i]
	}
	return ts, nil
}

// selector names actions of an agent for Allow and Deny: every action
// when actions is empty; every agent when agent is "*".
type selector struct {
	agent   string
	actions []string
}

func newSelector(opt, agent string, actions []string) (selector, error) {
	if agent == "" {
		return selector{}, invalidf("%s(\"\"): name an agent id, or \"*\" for every agent", opt)
	}
	for _, a := range actions {
		if a == "" {
			return selector{}, invalidf("%s(%q, \"\"): an empty action name", opt, agent)
		}
	}
	return selector{agent: agent, actions: slices.Clone(actions)}, nil
}

func (s selector) matches(k toolKey) bool {
	return (s.agent == "*" || s.agent == k.Agent) && (len(s.actions) == 0 || slices.Contains(s.actions, k.Action))
}

// offered reports whether the model is offered the action k: see Allow and
// Deny.
func offered(k toolKey, allow, deny []selector) bool {
	for _, s := range deny {
		if s.matches(k) {
			return false
		}
	}
	for _, s := range allow {
		if s.matches(k) {
			return true
		}
	}
	return len(allow) == 0 && k.Action != "say"
}

// toolNames returns a distinct API-valid name for each key (the keys are
// distinct). A key whose agent id and action name use only ASCII letters,
// digits, '_' and '-' is called "Agent__action" when that fits and no other
// key of the set yields the same name; any other key is called by a
// sanitized, shortened form followed by '_' and a hash of the key, e.g.
// "Caf___add_5f1c2a9b". The names depend only on the set, so the same
// agents give the same names on every call.
func toolNames(keys []toolKey) []string {
	names := make([]string, len(keys))
	count := make(map[string]int, len(keys))
	for i, k := range keys {
		if readable(k.Agent) && readable(k.Action) && len(k.Agent)+2+len(k.Action) <= maxToolName {
			names[i] = k.Agent + "__" + k.Action
			count[names[i]]++
		}
	}
	taken := make(map[string]bool, len(keys))
	for i, n := range names {
		if n != "" && count[n] == 1 {
			taken[n] = true
		} else {
			names[i] = ""
		}
	}
	for i, k := range keys {
		if names[i] != "" {
			continue
		}
		// A longer hash for the astronomically rare clash of a shorter one;
		// the last form is all hash, and never clashes with a name that
		// holds "__".
		for _, hexLen := range []int{8, 16, 32, maxToolName} {
			names[i] = hashedName(k, hexLen)
			if !taken[names[i]] {
				break
			}
		}
		taken[names[i]] = true
	}
	return names
}

// readable reports whether s is non-empty and uses only [a-zA-Z0-9_-].
func readable(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func nameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-'
}

// hashedName is "<agent>__<action>_<hash>" with both parts sanitized and
// shortened to fit, and hexLen hex digits of a SHA-256 of the key (at most
// 64, which fills the whole name).
func hashedName(k toolKey, hexLen int) string {
	sum := sha256.Sum256([]byte(k.Agent + "\x00" + k.Action))
	h := hex.EncodeToString(sum[:])
	if hexLen >= maxToolName {
		return h[:maxToolName]
	}
	h = h[:hexLen]
	room := maxToolName - len(h) - 1 - 2 // '_' before the hash, "__" between the parts
	agent, action := sanitize(k.Agent), sanitize(k.Action)
	if len(agent)+len(action) > room {
		// Keep up to 20 bytes of the action (more if the agent is short).
		keep := min(len(action), max(20, room-len(agent)))
		action = action[:keep]
		agent = agent[:min(len(agent), room-keep)]
	}
	return agent + "__" + action + "_" + h
}

// sanitize replaces every byte outside [a-zA-Z0-9_-] with '_' (so each
// non-ASCII rune becomes one '_').
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && nameByte(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
