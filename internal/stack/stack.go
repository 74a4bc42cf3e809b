// Package stack grows a goroutine's stack ahead of need.
//
// A goroutine starts with a small stack, and the runtime grows it by
// copying it to one twice the size whenever a call would overflow it,
// adjusting every frame on the stack as it copies. A goroutine that soon
// goes deep (decoding and encoding JSON, validating against a JSON
// Schema, a go-sdk call) pays that several times over, deep in its calls,
// where each copy has many frames to adjust. Called while the goroutine
// is still shallow, Grow16K and Grow32K make it grow once, with few frames
// to adjust; on a stack already large enough they cost the clearing of
// their frame.
package stack

// Grow16K makes the calling goroutine's stack at least 16 KiB.
//
//go:noinline
func Grow16K() {
	var frame [8 << 10]byte
	keep(frame[:])
}

// Grow32K makes the calling goroutine's stack at least 32 KiB.
//
//go:noinline
func Grow32K() {
	var frame [16 << 10]byte
	keep(frame[:])
}

// keep keeps a frame from being optimized away.
//
//go:noinline
func keep([]byte) {}
