package keyspace_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestMoveNode: renaming an array directory moves the array in the store
// and both views. The directory looked up before in the view renamed (the
// one a kernel moves with the rename) stands for the moved array; the one
// of the other view is gone; what is made at the old path since has
// another inode number. Onto a name in use, or into the other view, the
// rename is refused.
func TestMoveNode(t *testing.T) {
	f, _, dir := writableFS(t)
	ctx := context.Background()
	var name string
	for _, n := range zarrtest.OpenHierarchy(t, dir, true).Arrays() {
		if !strings.Contains(n.Path, "/") {
			name = n.Path
			break
		}
	}
	root2, root3 := f.Root(keyspace.V2), f.Root(keyspace.V3)
	old2, old3 := lookupDir(t, root2, name), lookupDir(t, root3, name)
	listed, ino := listNames(t, old3), old2.Attr().Ino
	if err := root3.Rename(ctx, name, root2, "moved"); !errors.Is(err, keyspace.ErrPermission) {
		t.Errorf("rename into the other view: %v", err)
	}
	if err := root3.Rename(ctx, name, root3, "moved"); err != nil {
		t.Fatal(err)
	}
	for _, root := range []*keyspace.Dir{root2, root3} {
		if names := listNames(t, root); slices.Contains(names, name) || !slices.Contains(names, "moved") {
			t.Errorf("%s lists %v after the move", root, names)
		}
	}
	if got := listNames(t, old3); !slices.Equal(got, listed) || old3.Gone(ctx) {
		t.Errorf("the v3 directory looked up before the move lists %v (gone: %v); the array's listing was %v", got, old3.Gone(ctx), listed)
	}
	if !old2.Gone(ctx) {
		t.Error("the v2 directory looked up at the old path is not gone")
	}
	if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
		t.Errorf("the store still has %s: %v", name, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "moved", "zarr.json")); err != nil {
		t.Errorf("the store has no moved/zarr.json: %v", err)
	}
	if err := root2.Mkdir(ctx, name); err != nil {
		t.Fatal(err)
	}
	if again := lookupDir(t, root2, name).Attr().Ino; again == ino {
		t.Errorf("the directory made at %s has the moved array's inode number %d", name, ino)
	}
	if err := root2.Rename(ctx, "moved", root2, name); !errors.Is(err, keyspace.ErrExists) {
		t.Errorf("rename onto a name in use: %v", err)
	}
}
