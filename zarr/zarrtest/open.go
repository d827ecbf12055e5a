package zarrtest

import (
	"context"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// OpenHierarchy opens the directory store at dir and its hierarchy for
// the test, closing the store in cleanup.
func OpenHierarchy(t testing.TB, dir string, readOnly bool) *zarr.Hierarchy {
	t.Helper()
	s, err := store.OpenDir(dir, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h, err := zarr.Open(context.Background(), s)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return h
}
