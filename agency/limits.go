package agency

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// What an error says about bad input is bounded whatever came in, so that
// one sender cannot make an agent answer a large message with a larger one.
const (
	// maxProblems is how many problems an error's text names; the others
	// are counted ("… and N more").
	maxProblems = 10
	// maxErrorText bounds the text of every [error] the framework sends, in
	// bytes.
	maxErrorText = 4 << 10
	// maxQuoted bounds a name from the input (a key, an action) quoted in
	// an error's text, in bytes before quoting.
	maxQuoted = 64
	// maxProblemText bounds the text of one problem with an action's
	// arguments: maxProblems of them, and the words around them, stay
	// within maxErrorText.
	maxProblemText = 300
)

// problems collects the problems of one input: it keeps the first
// maxProblems and counts the rest.
type problems struct {
	items []string
	n     int
}

// room reports whether a problem added now would be named, so that a
// caller can skip formatting one that would only be counted.
func (p *problems) room() bool { return len(p.items) < maxProblems }

// add names a problem, or counts it once maxProblems are named.
func (p *problems) add(s string) {
	p.n++
	if p.room() {
		p.items = append(p.items, s)
	}
}

// count counts a problem without naming it.
func (p *problems) count() { p.n++ }

// join returns the named problems separated by sep, followed by how many
// more there are.
func (p *problems) join(sep string) string {
	s := strings.Join(p.items, sep)
	if more := p.n - len(p.items); more > 0 {
		s += sep + "… and " + strconv.Itoa(more) + " more"
	}
	return s
}

// quote quotes a name from the input for an error's text, cut to
// maxQuoted bytes.
func quote(s string) string { return strconv.Quote(truncate(s, maxQuoted)) }

// truncate cuts s to at most n bytes, on a character boundary, ending it
// with "…" when it was longer.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := max(n-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// elide cuts s to at most n bytes by leaving out its middle, so that both
// its start and its end stay readable.
func elide(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head := truncate(s, n/2)
	tail := len(s) - (n - len(head))
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return head + s[tail:]
}

// limitErrorText bounds the text of an error the framework sends.
func limitErrorText(s string) string { return truncate(s, maxErrorText) }
