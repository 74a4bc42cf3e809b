// Package migrate reads the schema migrations that the SQL stores embed:
// files named NNNN_title.sql, applied in the order of their number, each
// once, recorded in a version table.
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one file: its number, its name and its SQL.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load returns the migrations in dir of fsys, by version. It fails for a
// file whose name does not start with a number and an underscore, for two
// files with one number, and for a gap in the numbers (1, 2, 3, …).
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: the name must be NNNN_title.sql", name)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: number %d, want %d (no gaps, no repeats)", m.Name, m.Version, i+1)
		}
	}
	return ms, nil
}

// Pending returns the migrations after version current, the last one
// applied. A database at a version this program does not know (written by
// a newer one) is an error.
func Pending(ms []Migration, current int) ([]Migration, error) {
	if current > len(ms) {
		return nil, fmt.Errorf("the database schema is at version %d, newer than this program's %d", current, len(ms))
	}
	return ms[current:], nil
}
