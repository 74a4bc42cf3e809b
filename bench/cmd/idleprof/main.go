// Command idleprof adds 100,000 idle agents with one action each to a
// space.Local and writes a heap profile of what they hold, for
// `go tool pprof -sample_index=inuse_space`:
//
//	go -C bench run ./cmd/idleprof /tmp/idle.heap
package main

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/bench"
	"github.com/seed72275b23/agency-go/space"
)

func main() {
	runtime.MemProfileRate = 64
	sp := space.NewLocal()
	handler := func(context.Context, bench.Tick) (struct{}, error) { return struct{}{}, nil }
	for i := range 100000 {
		a := agency.MustNewAgent("agent-" + strconv.Itoa(i))
		agency.Handle(a, "tick", handler)
		if err := sp.Add(context.Background(), a); err != nil {
			panic(err)
		}
	}
	runtime.GC()
	if len(os.Args) != 2 {
		panic("usage: idleprof FILE")
	}
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		panic(err)
	}
	if err := f.Close(); err != nil {
		panic(err)
	}
	runtime.KeepAlive(sp)
}
