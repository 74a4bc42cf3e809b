package host_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/seed72275b23/agency-go/actions/host"
	"github.com/seed72275b23/agency-go/agency"
	"github.com/seed72275b23/agency-go/space"
)

// A host agent confined to a directory, whose approver lets Editor write
// and read files there and refuses everyone else.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "host-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	h, err := host.New("Host", host.Root(dir), host.Approver(func(_ context.Context, m *agency.Message) bool {
		return m.From == "Editor" && (m.Action == "write_file" || m.Action == "read_file")
	}))
	if err != nil {
		panic(err)
	}
	sp := space.NewLocal()
	defer sp.Close(ctx)
	editor, stranger := agency.MustNewAgent("Editor"), agency.MustNewAgent("Stranger")
	for _, a := range []*agency.Agent{h.Agent(), editor, stranger} {
		if err := sp.Add(ctx, a); err != nil {
			panic(err)
		}
	}
	if _, err := agency.Call[string](ctx, editor, "Host", "write_file", host.WriteArgs{Path: "notes/today.txt", Content: "buy milk"}); err != nil {
		panic(err)
	}
	text, err := agency.Call[string](ctx, editor, "Host", "read_file", host.ReadArgs{Path: "notes/today.txt"})
	fmt.Println(text, err)
	_, err = agency.Call[string](ctx, stranger, "Host", "read_file", host.ReadArgs{Path: "notes/today.txt"})
	fmt.Println(errors.Is(err, agency.ErrPermissionDenied))
	_, err = agency.Call[string](ctx, editor, "Host", "read_file", host.ReadArgs{Path: "../outside.txt"})
	fmt.Println(err != nil)
	// Output:
	// buy milk <nil>
	// true
	// true
}
