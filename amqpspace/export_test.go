package amqpspace

// FixNodeOrder makes the spaces of this process try Config.URLs in the
// order given rather than shuffled: a test's child process uses it to
// connect first to the node the test chose for it.
func FixNodeOrder() {
	perm = func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
}
