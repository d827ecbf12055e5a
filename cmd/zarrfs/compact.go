package main

import (
	"context"
	"fmt"
	"io"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

func runCompact(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("compact", "STORE [PATH]", stderr)
	sf := addStoreFlags(fs.FlagSet)
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
	e := engine.New(o.store, engine.Options{})
	defer e.Close()
	var shards, compacted int
	var reclaimed int64
	failed := false
	for _, n := range o.nodes {
		if n.Array == nil || n.Array.Sharding() == nil {
			continue
		}
		for r, err := range e.Array(n.Array).Inspect(ctx, false, 1) {
			if err != nil {
				return fail(stderr, err)
			}
			shards++
			if r.Err == nil && r.Dead == 0 {
				continue // its index shows nothing to reclaim: not read whole
			}
			got, err := writeback.Compact(ctx, n.Array, r.Coords)
			if err != nil {
				fmt.Fprintf(stdout, "SKIPPED %s: %v\n", r.Key, err)
				failed = true
				continue
			}
			if got > 0 {
				compacted++
				reclaimed += got
			}
		}
	}
	fmt.Fprintf(stdout, "compacted %d of %d shards, reclaimed %s\n", compacted, shards, humanBytes(reclaimed))
	if failed {
		return 1
	}
	return 0
}
