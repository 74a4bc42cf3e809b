package main

import (
	"context"
	"io"
	"os"
	"testing"
)

// With -demo the chat runs end to end with no key and no model server: a
// scripted model in the process adds and multiplies through the
// Calculator, lists files through the Host once the person allows it, and
// says what it is to anything else.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/notes.txt", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	stdin, input := io.Pipe()
	defer input.Close()
	s := &session{t: t, screen: newScreen(), input: input, done: make(chan error, 1)}
	noEnv := func(string) string { return "" } // no OPENAI_API_KEY, no OPENAI_BASE_URL
	go func() { s.done <- run(ctx, []string{"-demo"}, noEnv, stdin, s.screen, io.Discard) }()
	s.waitFor("scripted model (-demo)")
	s.waitFor("Chat with Assistant")

	s.write("hello")
	s.waitFor("Assistant: I am the scripted model of -demo")
	s.write("What is 2 plus 3?")
	s.waitFor("The answer is 5.\n")
	s.write("Multiply 6 by 7, please.")
	s.waitFor("The answer is 42.\n")
	s.write("Which files are here?")
	s.waitFor(`Allow Assistant to run list_files {"path":"."}? [y/N] `)
	s.write("y")
	s.waitFor("Here are the files: notes.txt.\n")

	s.write("/quit")
	if err := s.end(); err != nil {
		t.Fatalf("run: %v", err)
	}
}
