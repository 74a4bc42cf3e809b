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

// HoldResubscribe makes every reconnect of this process, once its session
// is stored, call hold before it subscribes the agents again; nil ends it.
func HoldResubscribe(hold func()) {
	if hold == nil {
		testHookResubscribe.Store(nil)
		return
	}
	testHookResubscribe.Store(&hold)
}

// KeepFirst makes the first session of every space of this process keep
// what its channel confirmed while young, as a reconnect's session does,
// so that a test on one broker reaches that path without a reconnect.
func KeepFirst(on bool) { testHookKeepFirst.Store(on) }
