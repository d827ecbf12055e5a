package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// TestDirRenamePrefix: the keys below a prefix move to another at once;
// a taken destination, a destination inside the source, a symbolic link
// on the way (into another part of the store, or out of it) and a
// read-only store are refused, and nothing moves.
func TestDirRenamePrefix(t *testing.T) {
	ctx := context.Background()
	s, dir := openDir(t, false)
	for _, key := range []string{"g/a/zarr.json", "g/a/c/0/0", "h/zarr.json", "taken/x"} {
		if _, err := s.Put(ctx, key, [][]byte{[]byte(key)}, store.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	outside := t.TempDir()
	for link, target := range map[string]string{"inner": filepath.Join(dir, "h"), "outer": outside} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	refused := []struct {
		from, to string
		want     error
	}{
		{"g/a", "taken", store.ErrPrecondition},
		{"g", "g/a/b", store.ErrInvalidKey},
		{"g/a", "inner/a", store.ErrInvalidKey},
		{"g/a", "outer/a", store.ErrInvalidKey},
	}
	for _, c := range refused {
		if err := s.RenamePrefix(ctx, c.from, c.to); !errors.Is(err, c.want) {
			t.Errorf("RenamePrefix(%s, %s): %v, want %v", c.from, c.to, err, c.want)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("a rename through a link wrote outside the store: %v", entries)
	}
	if err := s.RenamePrefix(ctx, "g/a", "h/a"); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"h/a/zarr.json": true, "h/a/c/0/0": true, "g/a/zarr.json": false, "g/a/c/0/0": false} {
		b, err := store.ReadAll(ctx, s, key)
		if want && (err != nil || string(b) != "g/a/"+key[len("h/a/"):]) || !want && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s after the rename: %q, %v", key, b, err)
		}
	}
	ro, err := store.OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.RenamePrefix(ctx, "h/a", "g/a"); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("RenamePrefix on a read-only store: %v", err)
	}
}
