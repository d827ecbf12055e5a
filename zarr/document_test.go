package zarr_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// TestDocumentBound: metadata documents larger than MaxDocumentSize are
// refused naming their key, in listed and unlisted (consolidated) stores,
// under update too; the other nodes open.
func TestDocumentBound(t *testing.T) {
	ctx := context.Background()
	defer zarr.SetMaxDocumentSize(zarr.MaxDocumentSize())
	zarr.SetMaxDocumentSize(1 << 10)
	dir := t.TempDir()
	big := `{"zarr_format": 3, "node_type": "group", "attributes": {"x": "` + strings.Repeat("a", 2<<10) + `"}}`
	for path, doc := range map[string]string{
		"zarr.json":       `{"zarr_format": 3, "node_type": "group"}`,
		"big/zarr.json":   big,
		"small/zarr.json": `{"zarr_format": 3, "node_type": "group"}`,
		"v2/.zgroup":      `{"zarr_format": 2}`,
		"v2/.zattrs":      `{"x": "` + strings.Repeat("a", 2<<10) + `"}`,
	} {
		p := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := store.OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := zarr.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for path, key := range map[string]string{"big": "big/zarr.json", "v2": "v2/.zattrs"} {
		n, ok := h.Node(path)
		if !ok || !errors.Is(n.Err, store.ErrTooLarge) || !strings.Contains(n.Err.Error(), key) {
			t.Errorf("node %s: %v, want ErrTooLarge naming %s", path, n.Err, key)
		}
	}
	if n, ok := h.Node("small"); !ok || n.Err != nil {
		t.Errorf("node small: %v", n.Err)
	}
	err = store.Update(ctx, s, "big/zarr.json", func(cur store.Object) (store.Change, error) {
		_, err := zarr.ReadCurrentDocument(cur, "big/zarr.json")
		return store.Change{}, err
	})
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "big/zarr.json") {
		t.Errorf("the document under update: %v, want ErrTooLarge naming it", err)
	}
	// A store that cannot list reads its consolidated metadata, bounded
	// too.
	if err := os.WriteFile(filepath.Join(dir, "zarr.json"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := zarr.Open(ctx, unlistable{s}); !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "zarr.json") {
		t.Errorf("an unlisted store with a large root document: %v, want ErrTooLarge naming it", err)
	}
	zarr.SetMaxDocumentSize(zarr.DefaultMaxDocumentSize)
	if h, err := zarr.Open(ctx, s); err != nil {
		t.Fatal(err)
	} else if n, _ := h.Node("big"); n.Err != nil {
		t.Errorf("node big under the default bound: %v", n.Err)
	}
}
