package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr"
)

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", "STORE [PATH]", stderr)
	sf := addStoreFlags(fs)
	if code, ok := parse(fs, args, 1, 2); !ok {
		return code
	}
	nodes, closeStore, err := openNodes(ctx, fs.Arg(0), fs.Arg(1), sf, true)
	if err != nil {
		return fail(stderr, err)
	}
	defer closeStore()
	var broken []zarr.ChunkReport
	arrays, chunks := 0, 0
	for _, n := range nodes {
		if n.Err != nil {
			broken = append(broken, zarr.ChunkReport{Key: n.Path, Err: n.Err})
			continue
		}
		if n.Array == nil {
			continue
		}
		arrays++
		for r := range n.Array.InspectStored(ctx, true, runtime.GOMAXPROCS(0)*2) {
			chunks++
			if r.Err != nil {
				broken = append(broken, r)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(stderr, err)
	}
	slices.SortFunc(broken, func(a, b zarr.ChunkReport) int { return cmp.Compare(a.Key, b.Key) })
	for _, r := range broken {
		fmt.Fprintf(stdout, "BROKEN %s: %s\n", r.Key, strings.ReplaceAll(r.Err.Error(), "\n", "; "))
	}
	fmt.Fprintf(stdout, "checked %d arrays, %d stored chunks/shards: %d broken\n", arrays, chunks, len(broken))
	if len(broken) > 0 {
		return 1
	}
	return 0
}
