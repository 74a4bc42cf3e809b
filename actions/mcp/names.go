package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxToolName is the longest tool name MCP allows.
const maxToolName = 128

// ToolName returns the MCP tool name of the action of the given agent:
// "Agent.action" when that is a valid MCP tool name (1 to 128 of
// A-Z a-z 0-9 _ . -) and the agent id has no '.'. Otherwise each byte
// outside A-Z a-z 0-9 _ - (a '.' of the agent id too) becomes '_', the
// agent part and the action part are cut to fit, and "-" and 10 hex digits
// of the SHA-256 of agent + "\x00" + action are appended:
//
//	Calculator, add        → Calculator.add
//	Büro, add              → B__ro.add-6f738bf3eb
//	acme.Calculator, add   → acme_Calculator.add-11a203d950
//
// The mapping is one to one (up to a hash collision, which the server
// reports and resolves by listing the first tool only), and the server
// maps a name back through the table of the tools it lists: a client
// calls the names tools/list gave it.
func ToolName(agent, action string) string {
	plain := agent + "." + action
	if len(plain) <= maxToolName && !strings.Contains(agent, ".") && validName(plain) {
		return plain
	}
	sum := sha256.Sum256([]byte(agent + "\x00" + action))
	suffix := "-" + hex.EncodeToString(sum[:5])
	a, b := sanitize(agent, true), sanitize(action, false)
	room := maxToolName - len(suffix) - 1
	if len(a)+len(b) > room {
		// Keep as much of each as fits, the action first: it is what a
		// model reads to choose a tool.
		keepB := min(len(b), max(room/2, room-len(a)))
		b = b[:keepB]
		a = a[:min(len(a), room-keepB)]
	}
	return a + "." + b + suffix
}

// validName reports whether s is in MCP's tool-name alphabet.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) && s[i] != '.' {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

func sanitize(s string, agent bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if nameByte(c) || (!agent && c == '.') {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
