package handoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
)

// condition is a boolean expression over a conversation's variables, compiled
// once with github.com/expr-lang/expr: the language of AG2's context
// expressions (and, or, not, ==, <, len(), in […], parentheses) and more.
// A variable's value is data for the expression, never part of its source:
// a variable that holds "' or true or '" is a string like any other.
//
// A condition is safe for concurrent use. A Policy compiles its rules'
// conditions with compile: untyped (variables looked up by name when it is
// evaluated; one that is missing then is an error, which the Policy reports
// as a condition_error event, the rule not firing), or, with Env, against
// a struct whose fields are the only names and whose types every
// operation must fit. AG2's ${name} is read as name. A syntax error, or
// an expression whose type cannot be a bool, fails compile, with its
// position.
type condition struct {
	src   string
	prog  *vm.Program
	env   reflect.Type // the struct the variables are decoded into; nil: untyped
	names []string     // the variables an untyped condition reads
}

// placeholder is AG2's ${name}.
var placeholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func compile(src string, env reflect.Type) (*condition, error) {
	// ${name} becomes "  name ": the same length, so that a position in an
	// error is a position in src.
	code := placeholder.ReplaceAllString(src, "  $1 ")
	opts := []expr.Option{expr.AsBool()}
	if env != nil {
		opts = append(opts, expr.Env(reflect.New(env).Elem().Interface()))
	}
	prog, err := expr.Compile(code, opts...)
	if err != nil {
		return nil, condError(src, err)
	}
	c := &condition{src: src, prog: prog, env: env}
	if env == nil {
		c.names = names(prog)
	}
	return c, nil
}

// condError names the condition and the position of its mistake.
func condError(src string, err error) error {
	var fe *file.Error
	if errors.As(err, &fe) {
		return fmt.Errorf("condition %q: %s (%d:%d)", src, fe.Message, fe.Line, fe.Column+1)
	}
	return fmt.Errorf("condition %q: %v", src, err)
}

// names returns the variables a program reads, in order of appearance.
func names(prog *vm.Program) []string {
	v := &nameVisitor{}
	node := prog.Node()
	ast.Walk(&node, v)
	var out []string
	for _, n := range v.ids {
		if !slices.Contains(v.local, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

type nameVisitor struct{ ids, local []string }

func (v *nameVisitor) Visit(n *ast.Node) {
	switch n := (*n).(type) {
	case *ast.IdentifierNode:
		v.ids = append(v.ids, n.Value)
	case *ast.VariableDeclaratorNode:
		v.local = append(v.local, n.Name) // let x = …; x is no variable of the conversation
	}
}

// String returns the condition's source.
func (c *condition) String() string { return c.src }

// eval evaluates the condition on v.
func (c *condition) eval(v Vars) (bool, error) {
	var env any
	if c.env == nil {
		for _, n := range c.names {
			if _, ok := v[n]; !ok {
				return false, fmt.Errorf("condition %q: no variable %q", c.src, n)
			}
		}
		env = map[string]any(v)
		if v == nil {
			env = map[string]any{}
		}
	} else {
		p := reflect.New(c.env)
		b, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(b, p.Interface())
		}
		if err != nil {
			return false, fmt.Errorf("condition %q: the variables do not fit %v: %v", c.src, c.env, err)
		}
		env = p.Elem().Interface()
	}
	out, err := expr.Run(c.prog, env)
	if err != nil {
		return false, condError(c.src, err)
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("condition %q: evaluates to %T, not a bool", c.src, out)
	}
	return b, nil
}
