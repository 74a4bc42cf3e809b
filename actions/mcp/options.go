package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Defaults of the server's options.
const (
	// DefaultRediscover is how often a server surveys its space for agents
	// that joined or left (see Rediscover).
	DefaultRediscover = 10 * time.Second
	// DefaultSettle is how long a survey waits for another answer on a
	// space that cannot tell who a broadcast reached (amqpspace), and the
	// least time between two surveys.
	DefaultSettle = 250 * time.Millisecond
	// DefaultMaxArgBytes bounds a tool call's arguments: the message size
	// limit of a space.
	DefaultMaxArgBytes = 4 << 20
)

// ErrInvalidOption is returned for an option that cannot be used.
var ErrInvalidOption = errors.New("mcp: invalid option")

// ServerOption configures a Server in NewServer.
type ServerOption func(*serverConfig) error

type serverConfig struct {
	every, settle time.Duration
	logger        *slog.Logger
	sdkLogger     *slog.Logger
	name, version string
	maxArgs       int
	only, except  []string
	token         func(ctx context.Context, token string) error
	set           map[string]bool
}

func (c *serverConfig) once(name string) error {
	if c.set[name] {
		return fmt.Errorf("%w: %s given twice", ErrInvalidOption, name)
	}
	if c.set == nil {
		c.set = map[string]bool{}
	}
	c.set[name] = true
	return nil
}

// offers reports whether the tools of agent id are on offer.
func (c *serverConfig) offers(id string) bool {
	if len(c.only) > 0 && !matchAny(c.only, id) {
		return false
	}
	return !matchAny(c.except, id)
}

// matchAny reports whether id is one of ids, or starts with what precedes
// the '*' that ends one of them ("Worker-*").
func matchAny(ids []string, id string) bool {
	return slices.ContainsFunc(ids, func(p string) bool {
		prefix, pattern := strings.CutSuffix(p, "*")
		return p == id || pattern && strings.HasPrefix(id, prefix)
	})
}

// Rediscover sets how often the server surveys its space (default
// DefaultRediscover; 0 only when a call finds its agent gone) and how long
// a survey waits for answers on a space that cannot tell who a broadcast
// reached (default DefaultSettle). A change of the tools reaches MCP
// clients as notifications/tools/list_changed, so an agent that joins is
// listed within every plus settle, and one that leaves is dropped as soon
// as a call finds it gone, or at the next survey. The server's own
// surveys never overlap and come at most once per settle.
func Rediscover(every, settle time.Duration) ServerOption {
	return func(c *serverConfig) error {
		if err := c.once("Rediscover"); err != nil {
			return err
		}
		if every < 0 || settle <= 0 {
			return fmt.Errorf("%w: Rediscover(%v, %v): want every >= 0 and a positive settle", ErrInvalidOption, every, settle)
		}
		c.every, c.settle = every, settle
		return nil
	}
}

// ServerLogger sets where the server logs (surveys that fail, tool names
// that collide) and, at debug level, where go-sdk logs. The default logs
// nothing. An MCP server on stdio must not log to stdout.
func ServerLogger(l *slog.Logger) ServerOption {
	return func(c *serverConfig) error {
		if err := c.once("ServerLogger"); err != nil {
			return err
		}
		if l == nil {
			return fmt.Errorf("%w: ServerLogger(nil)", ErrInvalidOption)
		}
		c.logger, c.sdkLogger = l, l
		return nil
	}
}

// Implementation sets the name and version the server gives MCP clients
// (default "agency-go", no version).
func Implementation(name, version string) ServerOption {
	return func(c *serverConfig) error {
		if err := c.once("Implementation"); err != nil {
			return err
		}
		c.name, c.version = name, version
		return nil
	}
}

// OnlyAgents offers the actions of the agents named and no other's. An id
// that ends in '*' names every agent whose id starts with what precedes it.
func OnlyAgents(ids ...string) ServerOption {
	return func(c *serverConfig) error {
		if err := c.once("OnlyAgents"); err != nil {
			return err
		}
		c.only = slices.Clone(ids)
		return nil
	}
}

// ExceptAgents offers no action of the agents named ("Prefix*" as in
// OnlyAgents).
func ExceptAgents(ids ...string) ServerOption {
	return func(c *serverConfig) error {
		if err := c.once("ExceptAgents"); err != nil {
			return err
		}
		c.except = slices.Clone(ids)
		return nil
	}
}

// MaxArgBytes bounds the arguments of a tool call (default
// DefaultMaxArgBytes): larger ones are an isError result that gives their
// size, over stdio; over HTTP a body larger than this is refused with 413.
func MaxArgBytes(n int) ServerOption {
	return func(c *serverConfig) error {
		if err := c.once("MaxArgBytes"); err != nil {
			return err
		}
		if n <= 0 {
			return fmt.Errorf("%w: MaxArgBytes(%d): want a positive size", ErrInvalidOption, n)
		}
		c.maxArgs = n
		return nil
	}
}

// BearerToken has the HTTP transport check each request's bearer token
// (Authorization: Bearer …) with check: an error refuses the request with
// 401. Without it, Handler takes any request, and ListenAndServe refuses
// to listen anywhere but on a loopback address.
func BearerToken(check func(ctx context.Context, token string) error) ServerOption {
	return func(c *serverConfig) error {
		if err := c.once("BearerToken"); err != nil {
			return err
		}
		if check == nil {
			return fmt.Errorf("%w: BearerToken(nil)", ErrInvalidOption)
		}
		c.token = check
		return nil
	}
}
