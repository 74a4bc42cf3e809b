package main

import (
	"context"
	"testing"
)

// /agents lists the agents in the space and what each offers the User.
func TestAgentsCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startChat(t, ctx)

	s.write("/agents")
	s.waitFor("Agents in the space:\n")
	s.waitFor("  Assistant: ")
	s.waitFor("  Calculator: add, multiply\n")
	s.waitFor("  Host: list_files (asks you first), read_file (asks you first), shell_command (asks you first), write_file (asks you first)\n")
	s.waitFor(" (you): say\n")
	s.write("/quit")
	if err := s.end(); err != nil {
		t.Fatal(err)
	}
}
