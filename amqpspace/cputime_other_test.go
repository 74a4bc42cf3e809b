//go:build !unix

package amqpspace_test

// processCPU reports that the platform gives no CPU time to the benchmarks.
func processCPU() (int64, bool) { return 0, false }
