//go:build !unix

package host

import "os/exec"

// killGroup leaves cmd as it is: its cancellation kills sh only.
func killGroup(*exec.Cmd) {}
