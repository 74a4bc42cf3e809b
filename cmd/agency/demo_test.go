package main

import (
	"slices"
	"testing"
)

// The scripted model finds the numbers a person wrote, not the digits of
// an id beside them.
func TestNumbers(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"what is 2 + 3?", []string{"2", "3"}},
		{"what is 2+3.5?", []string{"2", "3.5"}},
		{"plan 251994ca-e68d-4bee-911b-5e7097454a36: Add 4 and 05", []string{"4", "5"}},
		{"hello", nil},
	} {
		if got := numbers(tc.text, 2); !slices.Equal(got, tc.want) {
			t.Errorf("numbers(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}
