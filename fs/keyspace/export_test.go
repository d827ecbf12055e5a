package keyspace

import (
	"context"
	"fmt"
)

// SetMaxTempTotal lowers the memory all temporary files may hold, for a
// test; the returned function restores it.
func SetMaxTempTotal(n int64) (restore func()) {
	old := maxTempTotal
	maxTempTotal = n
	return func() { maxTempTotal = old }
}

// TranscodedKey is the cache key of the chunk at coords of the array at
// path in the v2 view, as stored now.
func TranscodedKey(ctx context.Context, f *FS, path string, coords []int) (string, error) {
	av := f.arrays[path][V2]
	loc, ok, err := av.locate(ctx, coords, false)
	if err != nil || !ok {
		return "", fmt.Errorf("chunk %v of %s: %v, stored %v", coords, path, err, ok)
	}
	return av.transcodedKey(coords, loc), nil
}

// StaleConsolidated marks every .zmetadata out of date, as a change of
// the hierarchy does.
func StaleConsolidated(f *FS) {
	f.meta.Lock()
	f.staleConsolidated()
	f.meta.Unlock()
}
