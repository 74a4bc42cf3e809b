package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/seed72275b23/agency-go/actions/handoff"
	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/pgstore"
	"github.com/seed72275b23/agency-go/actions/store/sqlitestore"
)

// maxStored bounds the conversations Studio reads from a store that its
// timeline has not seen.
const maxStored = 50

// openStore opens the store dsn names, to read: a PostgreSQL URL, or the
// path of a SQLite file that exists (a viewer creates no file).
func openStore(ctx context.Context, dsn string) (store.Store, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return pgstore.Open(ctx, dsn)
	}
	if _, err := os.Stat(dsn); err != nil {
		return nil, usageError("--store %q: %v: give the SQLite file of a handoff team's store, or a postgres:// URL", dsn, err)
	}
	return sqlitestore.Open(ctx, dsn)
}

// withStored adds to cs what st holds of each, and the conversations st
// holds that the messages have not shown (latest first, up to maxStored),
// without a transcript.
func withStored(ctx context.Context, st store.Store, cs []conversation) ([]conversation, error) {
	stored, err := handoff.Conversations(ctx, st, maxStored)
	if err != nil {
		return cs, fmt.Errorf("reading the store's conversations: %w", err)
	}
	for _, c := range stored {
		if !slices.ContainsFunc(cs, func(x conversation) bool { return x.ID == c.ID && (x.User == "" || x.User == c.Owner) }) {
			cs = append(cs, conversation{ID: c.ID, User: c.Owner, Updated: c.Updated})
		}
	}
	for i := range cs {
		// A conversation belongs to the agent that started it: the store
		// keeps it under its owner, the user agent.
		owner := cs[i].User
		if owner == "" {
			continue
		}
		c, err := handoff.LoadConversation(ctx, st, owner, cs[i].ID)
		if errors.Is(err, store.ErrNotFound) {
			continue // not a conversation of a handoff team
		}
		if err != nil {
			return cs, err
		}
		sc := &storedConversation{Holder: c.Active, User: c.User, Status: c.Status, Version: c.Version,
			Hops: c.Hops, Path: c.Path, Vars: c.Vars}
		log, err := handoff.Log(ctx, st, owner, cs[i].ID)
		if err != nil {
			return cs, err
		}
		for _, e := range log {
			sc.Log = append(sc.Log, storedHop{From: e.From, To: e.To, Name: e.Name})
		}
		cs[i].Stored = sc
		if cs[i].Holder == "" || cs[i].Turns == nil {
			cs[i].Holder, cs[i].User, cs[i].Handoffs = c.Active, c.User, len(log)
		}
	}
	slices.SortFunc(cs, func(a, b conversation) int { return b.Updated.Compare(a.Updated) })
	return cs, nil
}
