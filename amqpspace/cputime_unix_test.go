//go:build unix

package amqpspace_test

import "syscall"

// processCPU returns the CPU time (user and system) the process has used
// so far, in nanoseconds, and whether the platform reports it.
func processCPU() (int64, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}
