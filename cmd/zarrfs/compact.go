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
	p := startProgress("compact", "shards", stderr)
	if total, err := countObjects(ctx, o.nodes, true); err == nil {
		p.setTotal(total)
	}
	var shards, compacted int
	var reclaimed int64
	failed := false
	for _, n := range o.nodes {
		if n.Array == nil || n.Array.Sharding() == nil || ctx.Err() != nil {
			continue
		}
		for r, err := range e.Array(n.Array).Inspect(ctx, false, 1) {
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				p.end()
				return fail(stderr, err)
			}
			shards++
			p.add(1, r.Size)
			if r.Err == nil && r.Dead == 0 {
				continue // its index shows nothing to reclaim: not read whole
			}
			got, err := writeback.Compact(ctx, n.Array, r.Coords)
			if err != nil {
				if ctx.Err() != nil {
					break // the shard is as it was: its rewrite is one conditional write
				}
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
	p.end()
	if code, stopped := interrupted(ctx); stopped {
		fmt.Fprintf(stdout, "INTERRUPTED: compacted %d of the %d shards looked at (of %d), reclaimed %s, %s; the rest is as it was\n", compacted, shards, p.total.Load(), humanBytes(reclaimed), p)
		return code
	}
	fmt.Fprintf(stdout, "compacted %d of %d shards, reclaimed %s; looked at %s\n", compacted, shards, humanBytes(reclaimed), p)
	if failed {
		return 1
	}
	return 0
}
