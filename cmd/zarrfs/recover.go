package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// runRecover publishes the journals of writers that died into the store,
// as a read-write mount does before serving, without mounting: so that
// other Zarr implementations reading the store see every acknowledged
// write.
func runRecover(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("recover", "STORE", stderr)
	sf := addStoreFlags(fs.FlagSet)
	if code, ok := parse(fs, args, 1, 1); !ok {
		return code
	}
	o, err := openNodes(ctx, fs.Arg(0), "", sf, false)
	if err != nil {
		return fail(stderr, err)
	}
	defer o.store.Close()
	root, err := openJournals(o.loc, o.store, *sf.journalDir, false)
	if err != nil {
		return fail(stderr, fmt.Errorf("recover: journals not read: %w", err))
	}
	if root != nil {
		defer root.Close()
	}
	logger := newLogger(stderr)
	p := startProgress("recover", "shards", stderr)
	infos, err := writeback.Journals(o.h, root, logger)
	if err != nil {
		return fail(stderr, fmt.Errorf("recover: %w", err))
	}
	var total int64
	for _, j := range infos {
		total += int64(len(j.Shards))
	}
	p.setTotal(total)
	n, err := writeback.RecoverReporting(ctx, o.h, root, logger, func(_ string, bytes int64) { p.add(1, bytes) })
	p.end()
	if code, stopped := interrupted(ctx); stopped {
		fmt.Fprintf(stdout, "INTERRUPTED: published %d updates into %d of %d shards, %s; the rest stays journaled: run zarrfs recover again\n", n, p.done.Load(), p.total.Load(), p)
		return code
	}
	if err != nil {
		return fail(stderr, fmt.Errorf("recover: %w (%d updates published)", err, n))
	}
	fmt.Fprintf(stdout, "published %d updates into %d shards from journals of writers that died, %s\n", n, p.done.Load(), p)
	// Journals that may hold this store's writes under another name are
	// named, and leave the store short of them: exit 1.
	left := false
	for _, j := range infos {
		if j.Stray {
			left = reportStray(stdout, j) || left
		}
	}
	if left {
		return fail(stderr, errors.New("recover: journals of another endpoint or store were left unpublished (see above)"))
	}
	return 0
}

// newLogger logs at info level to w.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}
