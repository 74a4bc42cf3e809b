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

// Cond is a boolean expression over a conversation's variables, compiled
// once with github.com/expr-lang/expr: the language of AG2's context
// expressions (and, or, not, ==, <, len(), in […], parentheses) and more.
// A variable's value is data for the expression, never part of its source:
// a variable that holds "' or true or '" is a string like any other.
//
// A Cond is safe for concurrent use.
type Cond struct {
	src   string
	prog  *vm.Program
	env   reflect.Type // the struct the variables are decoded into; nil: untyped
	names []string     // the variables an untyped condition reads
}

// Compile compiles an untyped condition: its variables are looked up by
// name when it is evaluated, and one that is missing then is an error
// (which a Policy reports as a condition_error event, the rule not
// firing). AG2's ${name} is read as name. A syntax error, or an expression
// whose type cannot be a bool, fails here, with its position.
func Compile(src string) (*Cond, error) {
	c, err := compile(src, nil)
	if err != nil {
		return nil, fmt.Errorf("handoff: %w", err)
	}
	return c, nil
}

// CompileFor compiles a condition against the struct T: every name must be
// a field of T (by its expr tag, else its Go name) and every operation must
// fit the fields' types, or it fails here with the position of the
// mistake. The variables are decoded into a T (through their JSON, by T's
// json tags) when the condition is evaluated.
//
//	type Account struct {
//		LoggedIn bool `json:"logged_in" expr:"logged_in"`
//		Attempts int  `json:"attempts" expr:"attempts"`
//	}
//	c, err := handoff.CompileFor[Account]("logged_in and attempts < 3")
func CompileFor[T any](src string) (*Cond, error) {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("handoff: CompileFor[%v]: the environment must be a struct", t)
	}
	c, err := compile(src, t)
	if err != nil {
		return nil, fmt.Errorf("handoff: %w", err)
	}
	return c, nil
}

// placeholder is AG2's ${name}.
var placeholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func compile(src string, env reflect.Type) (*Cond, error) {
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
	c := &Cond{src: src, prog: prog, env: env}
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
func (c *Cond) String() string { return c.src }

// Eval evaluates the condition on v.
func (c *Cond) Eval(v Vars) (bool, error) {
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
