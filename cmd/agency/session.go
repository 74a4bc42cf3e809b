package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/space"
)

// cliPrefix begins the ids this command joins with unless told otherwise.
// The dot makes it a word of its own in a routing key, so that a watcher
// can bind the pattern cliPrefix+"*" and see the answers to every agency
// command, one that has just joined included.
const cliPrefix = "agency-cli."

// closeTimeout bounds how long leaving the space may take.
const closeTimeout = 10 * time.Second

// session is this command's agent in the space it joined.
type session struct {
	agent *agency.Agent
	sp    space.Space
	// where names the space for messages: an exchange and a broker, or
	// the demo.
	where string
	// exchange and cfg are those of an AMQP space; demo is set instead
	// with --demo.
	exchange string
	cfg      amqpspace.Config
	demo     *demo
}

// config returns the broker's configuration: the environment's, with the
// flags over it.
func (o *options) config() (amqpspace.Config, error) {
	cfg, err := amqpspace.ConfigFromEnv()
	if o.amqpURL != "" {
		// The flag replaces the whole of the environment's address, so
		// that an AMQP_HOST beside it is no conflict.
		// AMQP_INTEROP still counts.
		cfg = amqpspace.Config{URL: o.amqpURL, Interop: cfg.Interop}
		err = nil
	}
	if err != nil {
		return amqpspace.Config{}, err
	}
	cfg.Exchange = o.exchange
	if cfg.Exchange == "" {
		cfg.Exchange = amqpspace.DefaultExchange
	}
	if o.verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(o.stderr, nil))
	}
	return cfg, nil
}

// agentID returns the id this command joins with.
func (o *options) agentID() (string, error) {
	if o.id != "" {
		if err := agency.ValidateID(o.id); err != nil {
			return "", usageError("--id %q: %v", o.id, err)
		}
		return o.id, nil
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return cliPrefix + hex.EncodeToString(b[:]), nil
}

// open joins the space the flags name with an agent of this command's own:
// the demo, or the AMQP exchange, which must exist (a misspelt --exchange
// creates nothing on the broker).
func (o *options) open(ctx context.Context, opts ...agency.Option) (*session, error) {
	id, err := o.agentID()
	if err != nil {
		return nil, err
	}
	a, err := agency.NewAgent(id, opts...)
	if err != nil {
		return nil, err
	}
	// An LLM agent answers a say with a say of its own to the sender, as
	// well as with the response: take it, quietly, rather than answer it
	// with not_found. LLM agents offer no say to their models as a tool.
	agency.Handle(a, "say", func(ctx context.Context, args sayArgs) (string, error) {
		return "", nil
	}, agency.Describe("Takes what an agent says to this agency command"))
	return o.join(ctx, a)
}

// join adds a, this command's agent, to the space the flags name: the
// demo, or the AMQP exchange, which must exist.
func (o *options) join(ctx context.Context, a *agency.Agent) (*session, error) {
	id := a.ID()
	if o.demo {
		if o.amqpURL != "" || o.exchange != "" {
			return nil, usageError("--demo runs in this process: it takes neither --amqp-url nor --exchange")
		}
		d, err := startDemo(ctx)
		if err != nil {
			return nil, err
		}
		if err := d.sp.Add(ctx, a); err != nil {
			return nil, errors.Join(err, d.close())
		}
		return &session{agent: a, sp: d.sp, where: "the demo space", demo: d}, nil
	}
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	cfg.ExchangeMustExist = true
	sp, err := amqpspace.New(ctx, cfg)
	switch {
	case errors.Is(err, amqpspace.ErrNoExchange):
		return nil, fmt.Errorf("the broker at %s has no exchange %q: no agent has served on it yet (start one, check --exchange, or try --demo): %w",
			redact(cfg.URL), cfg.Exchange, err)
	case errors.Is(err, amqpspace.ErrDisconnected):
		return nil, fmt.Errorf("cannot reach RabbitMQ at %s: %w\nStart a broker (rabbitmq-server -detached), set AMQP_URL or --amqp-url to one that runs, or try --demo",
			redact(cfg.URL), err)
	case err != nil:
		return nil, err
	}
	where := fmt.Sprintf("exchange %q at %s", sp.Exchange(), redact(cfg.URL))
	if err := sp.Add(ctx, a); err != nil {
		if errors.Is(err, space.ErrAgentExists) {
			err = &exitError{code: exitFailure, err: fmt.Errorf("%w: another process has joined as %q; choose another --id", err, id)}
		}
		return nil, errors.Join(err, closeSpace(sp))
	}
	return &session{agent: a, sp: sp, where: where, exchange: sp.Exchange(), cfg: cfg}, nil
}

// close leaves the space.
func (s *session) close() error {
	if s.demo != nil {
		return s.demo.close()
	}
	return closeSpace(s.sp)
}

func closeSpace(sp space.Space) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := sp.Close(ctx); err != nil {
		return fmt.Errorf("leaving the space: %w", err)
	}
	return nil
}

// redact returns a broker's URL without its password.
func redact(raw string) string {
	if raw == "" {
		raw = amqpspace.DefaultURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// scrubbed returns err's text without the password of the URL raw.
func scrubbed(err error, raw string) string {
	msg := err.Error()
	if u, perr := url.Parse(raw); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}
