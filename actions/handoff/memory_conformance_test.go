package handoff

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/memorytest"
	"github.com/seed72275b23/agency-go/actions/store"
)

// The store-backed Memory keeps the rules of every openai.Memory, in the
// store in process and in a SQLite file.
func TestMemoryConformance(t *testing.T) {
	t.Run("store.Memory", func(t *testing.T) {
		memorytest.Run(t, func(*testing.T) openai.Memory { return Memory(store.NewMemory(), "Bot") })
	})
	t.Run("sqlitestore", func(t *testing.T) {
		memorytest.Run(t, func(t *testing.T) openai.Memory {
			return Memory(openSQLite(t, context.Background(), filepath.Join(t.TempDir(), "m.db")), "Bot")
		})
	})
}
