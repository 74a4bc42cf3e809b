// Package bench holds the workloads that compare space.Local with the
// fastest Go actor libraries, hollywood and protoactor-go. Each library
// has a test package beside this one (local, hollywood, protoactor) whose
// benchmarks have the same names and run these same workloads, so that
// each side does the same work; cmd/compare runs them, and the amqpspace
// benchmarks of the main module, in interleaved rounds and prints the
// ratios.
//
// It is a module of its own, beside the library's packages rather than
// under them: it imports agency and space as any user does, nothing in
// the library imports it, the library never depends on the libraries it
// is measured against, and `go test ./...` at the repository root leaves
// these long benchmarks out.
package bench
