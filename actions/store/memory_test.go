package store_test

import (
	"testing"

	"github.com/seed72275b23/agency-go/actions/store"
	"github.com/seed72275b23/agency-go/actions/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return store.NewMemory() })
}

func BenchmarkMemory(b *testing.B) {
	storetest.Benchmark(b, func(testing.TB) store.Store { return store.NewMemory() })
}
