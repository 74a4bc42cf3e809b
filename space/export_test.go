package space

// NewLocalColliding returns a space.Local whose agents' ids all have the
// same hash in its table when mask is 0, or one of two when it is 1: the
// table's way with hashes that collide, which real ids reach once in
// billions, made the rule.
func NewLocalColliding(mask uint64) *Local {
	s := NewLocal()
	s.agents.mask = mask
	return s
}
