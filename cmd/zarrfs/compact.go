package main

import (
	"context"
	"fmt"
	"io"

	"github.com/zarrfs/zarrfs/zarr/writeback"
)

func runCompact(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("compact", "STORE [PATH]", stderr)
	sf := addStoreFlags(fs)
	if code, ok := parse(fs, args, 1, 2); !ok {
		return code
	}
	o, err := openNodes(ctx, fs.Arg(0), fs.Arg(1), sf, false)
	if err != nil {
		return fail(stderr, err)
	}
	defer o.store.Close()
	if _, err := finishDeletes(ctx, o, fs.Arg(1), stdout); err != nil {
		return fail(stderr, err)
	}
	nodes := o.nodes
	var shards, compacted int
	var reclaimed int64
	failed := false
	for _, n := range nodes {
		if n.Array == nil || n.Array.Sharding() == nil {
			continue
		}
		for coords, err := range n.Array.StoredChunks(ctx) {
			if err != nil {
				return fail(stderr, err)
			}
			shards++
			r, err := writeback.Compact(ctx, n.Array, coords)
			if err != nil {
				fmt.Fprintf(stdout, "SKIPPED %s: %v\n", n.Array.ChunkKey(coords), err)
				failed = true
				continue
			}
			if r > 0 {
				compacted++
				reclaimed += r
			}
		}
	}
	fmt.Fprintf(stdout, "compacted %d of %d shards, reclaimed %s\n", compacted, shards, humanBytes(reclaimed))
	if failed {
		return 1
	}
	return 0
}
