package agency_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The README's install table and its API reference name every library
// package of the module: a package added without them is a test failure,
// not a package nobody hears of. Commands (package main), internal
// packages, examples and nested modules are not library packages.
func TestReadmeNamesEveryPackage(t *testing.T) {
	const module = "github.com/seed72275b23/agency-go/"
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == ".." {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
		if name := d.Name(); name == "internal" || name == "examples" || name == "testdata" || strings.HasPrefix(name, ".") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
			return filepath.SkipDir // a module of its own
		}
		if library(t, path) {
			pkgs = append(pkgs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pkgs, "agency") || !slices.Contains(pkgs, "space/spacetest") {
		t.Fatalf("found the packages %v: the walk went wrong", pkgs)
	}
	for _, p := range pkgs {
		if !strings.Contains(string(readme), "| `"+module+p+"` |") {
			t.Errorf("README's install table does not list %s", p)
		}
		if !strings.Contains(string(readme), "`./"+p+"`") && !strings.Contains(string(readme), "`go doc -all ./"+p+"`") {
			t.Errorf("README's API reference does not name ./%s", p)
		}
	}
}

// library reports whether dir holds a Go package other than main.
func library(t *testing.T, dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(src), "\n") {
			if pkg, ok := strings.CutPrefix(line, "package "); ok {
				return strings.TrimSpace(pkg) != "main"
			}
		}
	}
	return false
}
