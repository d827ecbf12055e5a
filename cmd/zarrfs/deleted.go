package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// deletedPrefix is the store prefix below path where check and compact
// look for deletes cut short (tombstones, zarr.FindDeleted).
func deletedPrefix(path string) string {
	if path = strings.Trim(path, "/"); path != "" {
		return path + "/"
	}
	return ""
}

// reportDeleted names the arrays whose delete was cut short and the chunks
// they left; it reports whether there are any.
func reportDeleted(ctx context.Context, o *openedStore, path string, stdout io.Writer) (bool, error) {
	left := false
	for d, err := range zarr.FindDeleted(ctx, o.store, deletedPrefix(path)) {
		if errors.Is(err, store.ErrNoListing) {
			return false, nil // a web server: no tombstone is found, nor written
		}
		if err != nil {
			return left, err
		}
		if d.Live {
			fmt.Fprintf(stdout, "TOMBSTONE %s: the array /%s is live, so nothing of it is deleted; zarrfs compact removes the tombstone\n", d.Tombstone, d.Array.Path)
			continue
		}
		var keys []string
		for key, err := range d.Chunks(ctx) {
			if err != nil {
				return left, err
			}
			keys = append(keys, key)
		}
		left = true
		fmt.Fprintf(stdout, "DELETED /%s: its delete did not finish; %d of its chunks remain (%s) with its tombstone %s: run zarrfs compact\n",
			d.Array.Path, len(keys), abbreviate(strings.Join(keys, " "), 200), d.Tombstone)
	}
	return left, nil
}

// finishDeletes finishes the deletes cut short below path.
func finishDeletes(ctx context.Context, o *openedStore, path string, stdout io.Writer) (int, error) {
	finished := 0
	for d, err := range zarr.FindDeleted(ctx, o.store, deletedPrefix(path)) {
		if err != nil {
			return finished, err
		}
		keys, err := d.Finish(ctx)
		if err != nil {
			return finished, fmt.Errorf("finishing the delete of /%s: %w", d.Array.Path, err)
		}
		finished++
		fmt.Fprintf(stdout, "deleted what was left of /%s: %d chunks and its tombstone\n", d.Array.Path, len(keys))
	}
	return finished, nil
}
