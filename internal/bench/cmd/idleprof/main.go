package main

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"

	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/internal/bench"
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
	f, _ := os.Create(os.Args[1])
	pprof.Lookup("heap").WriteTo(f, 0)
	f.Close()
	runtime.KeepAlive(sp)
}
