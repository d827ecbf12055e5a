package zarr_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// newArray creates the root group and an unsharded uint8 array at path of
// four chunks of 2, each written.
func newArray(t *testing.T, s store.Store, path string) *zarr.Array {
	t.Helper()
	ctx := context.Background()
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	a, err := zarr.CreateArrayV3(ctx, s, path, &meta.ArrayV3{Shape: []int{8}, DataType: dtype.TypeUint8, ChunkShape: []int{2},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, FillValue: []byte{0}, Codecs: []meta.Codec{zarrtest.BytesLE}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		c := codec.NewChunk(a.Spec())
		c.Data[0], c.Data[1] = byte(i+1), byte(i+1)
		if err := a.WriteChunk(ctx, []int{i}, c); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// rewriting is a store in which the first delete rewrites the value at
// key first: another writer, writing while a delete is finished.
type rewriting struct {
	*store.Dir
	key  string
	once sync.Once
}

func (r *rewriting) Delete(ctx context.Context, key string, cond store.Cond) error {
	var err error
	r.once.Do(func() { _, err = r.Dir.Put(ctx, r.key, [][]byte{{9, 9}}, store.Cond{}) })
	if err != nil {
		return err
	}
	return r.Dir.Delete(ctx, key, cond)
}

// TestFinishSparesWrittenSince: finishing a delete cut short deletes each
// chunk only at the generation that proved it the deleted array's: a
// chunk rewritten meanwhile stays, with what was written.
func TestFinishSparesWrittenSince(t *testing.T) {
	ctx := context.Background()
	s := zarrtest.OpenStore(t, t.TempDir())
	defer s.Close()
	if err := zarr.DeleteArrayMetadata(ctx, newArray(t, s, "a")); err != nil {
		t.Fatal(err)
	}
	w := &rewriting{Dir: s, key: "a/c/3"}
	deleted, err := zarr.FinishDeletesAt(ctx, w, "a")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/c/0", "a/c/1", "a/c/2"}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	if b, err := store.ReadAll(ctx, s, "a/c/3"); err != nil || !slices.Equal(b, []byte{9, 9}) {
		t.Errorf("the chunk rewritten during the delete: %v, %v; want it kept", b, err)
	}
	if _, err := s.Stat(ctx, "a/zarr.json.deleted"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the tombstone after the delete finished: %v", err)
	}
}

// TestOpenEmpty: a store holding nothing is an empty v3 root group, not
// in the store; one holding anything that is no node is refused, naming
// what it holds.
func TestOpenEmpty(t *testing.T) {
	ctx := context.Background()
	s := zarrtest.OpenStore(t, t.TempDir())
	defer s.Close()
	if _, err := zarr.Open(ctx, s); !errors.Is(err, zarr.ErrNoNode) {
		t.Fatalf("Open of an empty store: %v, want ErrNoNode", err)
	}
	h, err := zarr.OpenEmpty(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if root := h.Root(); root == nil || root.Format != 3 || root.Kind != zarr.GroupKind || len(h.Nodes()) != 1 {
		t.Errorf("the empty store's hierarchy: %+v", h.Nodes())
	}
	if err := store.Write(ctx, s, "notes/a.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := zarr.OpenEmpty(ctx, s); !errors.Is(err, zarr.ErrNoNode) || !errorsContain(err, `"notes"`) {
		t.Errorf("OpenEmpty of a store holding notes/: %v", err)
	}
}

func errorsContain(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}

// TestHierarchyMove: a node moved takes the nodes below it along, under
// their new paths, arrays addressing keys below the new path; a taken
// destination, or one inside the node, is refused.
func TestHierarchyMove(t *testing.T) {
	ctx := context.Background()
	s := zarrtest.OpenStore(t, t.TempDir())
	defer s.Close()
	newArray(t, s, "g/a")
	if err := zarr.CreateGroup(ctx, s, "g", 3, nil); err != nil {
		t.Fatal(err)
	}
	if err := zarr.CreateGroup(ctx, s, "h", 3, nil); err != nil {
		t.Fatal(err)
	}
	h, err := zarr.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"h", "g/a/x", "nowhere/g"} {
		if err := h.Move("g", to); err == nil {
			t.Errorf("Move(g, %s) succeeded", to)
		}
	}
	if err := h.Move("g", "h/g2"); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Node("g"); ok {
		t.Error("g is still in the hierarchy")
	}
	n, ok := h.Node("h/g2/a")
	if !ok || n.Array == nil || n.Array.ChunkKey([]int{1}) != "h/g2/a/c/1" {
		t.Fatalf("h/g2/a after the move: %+v", n)
	}
	if root, h2 := h.Root(), mustNode(t, h, "h"); slices.Contains(root.Children, "g") || !slices.Equal(h2.Children, []string{"g2"}) {
		t.Errorf("children after the move: root %v, h %v", root.Children, h2.Children)
	}
	h.Remove("h/g2")
	if _, ok := h.Node("h/g2/a"); ok || len(mustNode(t, h, "h").Children) != 0 {
		t.Error("Remove left h/g2/a or h's child")
	}
}

func mustNode(t *testing.T, h *zarr.Hierarchy, path string) *zarr.Node {
	t.Helper()
	n, ok := h.Node(path)
	if !ok {
		t.Fatalf("no node %s", path)
	}
	return n
}
