package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// ReadArgs are the arguments of read_file.
type ReadArgs struct {
	Path string `json:"path" validate:"min=1" jsonschema:"description=the file to read"`
}

// WriteArgs are the arguments of write_file.
type WriteArgs struct {
	Path    string `json:"path" validate:"min=1" jsonschema:"description=the file to write; missing parent directories are created"`
	Content string `json:"content" jsonschema:"description=the complete new content of the file; it replaces what the file held"`
}

// ListArgs are the arguments of list_files.
type ListArgs struct {
	Path string `json:"path,omitempty" jsonschema:"description=the directory to list; the current directory (or the root) when empty"`
}

// Entry is one entry of a directory, in list_files' result.
type Entry struct {
	Name string `json:"name" jsonschema:"description=the entry's name within the directory"`
	Dir  bool   `json:"dir" jsonschema:"description=true for a directory"`
	Size int64  `json:"size" jsonschema:"description=the size in bytes"`
}

func (h *Agent) readFile(ctx context.Context, args ReadArgs) (string, error) {
	root, name, err := h.place(args.Path)
	if err != nil {
		return "", err
	}
	defer closeRoot(root)
	fi, err := stat(root, name)
	if err != nil {
		return "", err
	}
	switch {
	case fi.IsDir():
		return "", fmt.Errorf("%q is a directory; list it with list_files", args.Path)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%q is not a regular file", args.Path)
	case fi.Size() > h.cfg.maxBytes:
		return "", h.tooLarge(args.Path, fi.Size())
	}
	f, err := open(root, name, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, h.cfg.maxBytes+1)) // it may have grown
	if err != nil {
		return "", err
	}
	if int64(len(b)) > h.cfg.maxBytes {
		return "", h.tooLarge(args.Path, int64(len(b)))
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%q is not UTF-8 text", args.Path)
	}
	return string(b), nil
}

func (h *Agent) tooLarge(path string, size int64) error {
	return fmt.Errorf("%q has %d bytes or more, over the limit of %d bytes that read_file returns; read part of it with shell_command (head, tail, grep)",
		path, size, h.cfg.maxBytes)
}

func (h *Agent) writeFile(ctx context.Context, args WriteArgs) (string, error) {
	root, name, err := h.place(args.Path)
	if err != nil {
		return "", err
	}
	defer closeRoot(root)
	if err := mkdirAll(root, filepath.Dir(name)); err != nil {
		return "", err
	}
	f, err := open(root, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", err
	}
	_, err = io.WriteString(f, args.Content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(args.Content), args.Path), nil
}

func (h *Agent) listFiles(ctx context.Context, args ListArgs) ([]Entry, error) {
	path := args.Path
	if path == "" {
		path = "."
	}
	root, name, err := h.place(path)
	if err != nil {
		return nil, err
	}
	defer closeRoot(root)
	f, err := open(root, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("cannot list %q: %w", path, err)
	}
	entries := make([]Entry, 0, len(des))
	for _, de := range des {
		e := Entry{Name: de.Name(), Dir: de.IsDir()}
		if fi, err := de.Info(); err == nil {
			e.Size = fi.Size()
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return entries, nil
}

// place returns where a file action acts on path: the opened root and the
// path within it, or, without Root, no root and the path as it is. The
// caller closes the root. A path that leaves the root by its text is refused
// here; one that leaves it through a symbolic link, by the root when it is
// used.
func (h *Agent) place(path string) (*os.Root, string, error) {
	dir := h.cfg.root
	if dir == "" {
		return nil, path, nil
	}
	name := path
	if filepath.IsAbs(path) {
		name = ".." // unless it is inside
		for _, d := range []string{dir, h.cfg.rootAsGiven} {
			if rel, err := filepath.Rel(d, path); err == nil && filepath.IsLocal(rel) {
				name = rel
				break
			}
		}
	}
	if !filepath.IsLocal(name) {
		return nil, "", fmt.Errorf("%q is outside the root directory %s; give a path inside it", path, dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "", err
	}
	return root, filepath.Clean(name), nil
}

func closeRoot(root *os.Root) {
	if root != nil {
		root.Close()
	}
}

func open(root *os.Root, name string, flag int, perm fs.FileMode) (*os.File, error) {
	if root == nil {
		return os.OpenFile(name, flag, perm)
	}
	return root.OpenFile(name, flag, perm)
}

func stat(root *os.Root, name string) (fs.FileInfo, error) {
	if root == nil {
		return os.Stat(name)
	}
	return root.Stat(name)
}

// mkdirAll creates dir and its missing parents, inside root if there is one.
func mkdirAll(root *os.Root, dir string) error {
	if root == nil {
		return os.MkdirAll(dir, 0o755)
	}
	if dir == "." {
		return nil
	}
	path := ""
	for _, part := range strings.Split(dir, string(filepath.Separator)) {
		path = filepath.Join(path, part)
		if err := root.Mkdir(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}
