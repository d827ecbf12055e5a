package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/zarrfs/zarrfs/zarr"
)

// runConsolidate writes consolidated metadata into the store, so that
// readers of it through a web server, which cannot list, find every node.
func runConsolidate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("consolidate", "STORE", stderr)
	sf := addStoreFlags(fs.FlagSet)
	if code, ok := parse(fs, args, 1, 1); !ok {
		return code
	}
	loc, err := sf.parse(fs.Arg(0))
	if err != nil {
		return fail(stderr, err)
	}
	if !loc.Writable {
		return fail(stderr, fmt.Errorf("%s: not writable: consolidate writes into the store (a directory or an s3:// or gs:// bucket); for a web server, run it on the directory or bucket the server publishes", fs.Arg(0)))
	}
	// Reading every node's metadata is the work.
	p := startProgress("consolidate", "nodes", stderr)
	o, err := openNodes(ctx, fs.Arg(0), "", sf, false)
	if err != nil {
		p.end()
		if code, stopped := interrupted(ctx); stopped {
			fmt.Fprintf(stdout, "INTERRUPTED while reading the hierarchy, %s: nothing written\n", p)
			return code
		}
		return fail(stderr, err)
	}
	defer o.store.Close()
	p.setTotal(int64(len(o.nodes)))
	c, err := zarr.Consolidate(ctx, o.h)
	p.add(len(o.nodes), 0)
	p.end()
	if err != nil {
		return fail(stderr, fmt.Errorf("%s: %w", fs.Arg(0), err))
	}
	for _, p := range slices.Sorted(maps.Keys(c.Skipped)) {
		fmt.Fprintf(stdout, "LEFT OUT /%s: %v\n", p, c.Skipped[p])
	}
	fmt.Fprintf(stdout, "consolidated %d nodes into %s, %s\n", len(c.Nodes), o.store.String()+"/"+c.Key, p)
	if len(c.Skipped) > 0 {
		return 1
	}
	return 0
}
