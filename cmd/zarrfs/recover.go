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
	sf := addStoreFlags(fs)
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
	n, err := writeback.Recover(ctx, o.h, root, newLogger(stderr))
	if err != nil {
		return fail(stderr, fmt.Errorf("recover: %w (%d updates published)", err, n))
	}
	fmt.Fprintf(stdout, "published %d updates from journals of writers that died\n", n)
	// Journals that may hold this store's writes under another name are
	// named, and leave the store short of them: exit 1.
	infos, err := writeback.Journals(o.h, root, newLogger(stderr))
	if err != nil {
		return fail(stderr, fmt.Errorf("recover: %w", err))
	}
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
