package agency_test

import (
	"errors"
	"testing"

	"github.com/seed72275b23/agency-go/agency"
)

// The order itself is tested in every space by spacetest ("Runtime/Sequence").
func TestSequenceOption(t *testing.T) {
	key := func(m *agency.Message) string { return m.From }
	for name, opts := range map[string][]agency.Option{
		"nil key": {agency.Sequence(nil)},
		"twice":   {agency.Sequence(key), agency.Sequence(key)},
	} {
		if _, err := agency.NewAgent("Worker", opts...); !errors.Is(err, agency.ErrInvalidOption) {
			t.Errorf("%s: NewAgent = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := agency.NewAgent("Worker", agency.Concurrency(4), agency.Sequence(key)); err != nil {
		t.Errorf("NewAgent with Sequence: %v", err)
	}
}
