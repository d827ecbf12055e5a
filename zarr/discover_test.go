package zarr_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// unlistable is a directory store that cannot list, as a web server.
type unlistable struct{ store.Store }

func (unlistable) List(context.Context, string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) { yield("", store.ErrNoListing) }
}

func (unlistable) ListDir(context.Context, string) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) { yield(store.Entry{}, store.ErrNoListing) }
}

func openUnlistable(t *testing.T, dir string) *zarr.Hierarchy {
	t.Helper()
	s, err := store.OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h, err := zarr.Open(context.Background(), unlistable{s})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// digests reads every array of h.
func digests(t *testing.T, h *zarr.Hierarchy) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range h.Nodes() {
		if n.Array != nil {
			d, err := zarrtest.DigestArray(context.Background(), n.Array)
			if err != nil {
				t.Fatalf("%s: %v", n.Path, err)
			}
			out[n.Path] = d
		}
	}
	return out
}

func want(arrays []zarrtest.Generated) map[string]string {
	out := map[string]string{}
	for _, g := range arrays {
		out[g.Path] = g.Digest
	}
	return out
}

// metadataDocs returns every metadata document under dir by key.
func metadataDocs(t *testing.T, dir string, names ...string) map[string]json.RawMessage {
	t.Helper()
	docs := map[string]json.RawMessage{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !slices.Contains(names, d.Name()) {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		docs[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// A store that cannot list is walked through consolidated metadata, v3
// (consolidated_metadata in the root zarr.json) and v2 (.zmetadata), and
// a store rooted at an array without either is that array.
func TestDiscoveryWithoutListing(t *testing.T) {
	t.Run("v3", func(t *testing.T) {
		dir := t.TempDir()
		arrays := zarrtest.WriteV3Store(t, dir)
		nodes := map[string]json.RawMessage{}
		for key, doc := range metadataDocs(t, dir, zarr.ZarrJSON) {
			if key != zarr.ZarrJSON {
				nodes[strings.TrimSuffix(key, "/"+zarr.ZarrJSON)] = doc
			}
		}
		var root map[string]any
		b, _ := os.ReadFile(filepath.Join(dir, zarr.ZarrJSON))
		json.Unmarshal(b, &root)
		root["consolidated_metadata"] = map[string]any{"kind": "inline", "must_understand": false, "metadata": nodes}
		b, _ = json.Marshal(root)
		os.WriteFile(filepath.Join(dir, zarr.ZarrJSON), b, 0o644)
		if got := digests(t, openUnlistable(t, dir)); fmt.Sprint(got) != fmt.Sprint(want(arrays)) {
			t.Errorf("arrays found through consolidated metadata:\n%v\nwant\n%v", got, want(arrays))
		}
	})
	t.Run("v2", func(t *testing.T) {
		dir := t.TempDir()
		arrays := zarrtest.WriteV2Store(t, dir)
		docs := metadataDocs(t, dir, zarr.ZArray, zarr.ZGroup, zarr.ZAttrs)
		b, _ := json.Marshal(map[string]any{"zarr_consolidated_format": 1, "metadata": docs})
		os.WriteFile(filepath.Join(dir, zarr.ZMetadata), b, 0o644)
		if got := digests(t, openUnlistable(t, dir)); fmt.Sprint(got) != fmt.Sprint(want(arrays)) {
			t.Errorf("arrays found through .zmetadata:\n%v\nwant\n%v", got, want(arrays))
		}
	})
	t.Run("one array", func(t *testing.T) {
		dir := t.TempDir()
		arrays := zarrtest.WriteV3Store(t, dir)
		g := arrays[0]
		h := openUnlistable(t, filepath.Join(dir, g.Path))
		if got := digests(t, h); got[""] != g.Digest || len(got) != 1 {
			t.Errorf("a store rooted at %s: %v, want its digest %s", g.Path, got, g.Digest)
		}
	})
}

// TestDirectoryLeadingOut: a directory of the hierarchy that is a link out
// of the store is one broken node naming why; the rest opens.
func TestDirectoryLeadingOut(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	if err := os.Rename(filepath.Join(dir, arrays[0].Path), filepath.Join(outside, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "a"), filepath.Join(dir, arrays[0].Path)); err != nil {
		t.Fatal(err)
	}
	s, err := store.OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := zarr.Open(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := h.Node(arrays[0].Path); !ok || !errors.Is(n.Err, store.ErrInvalidKey) {
		t.Errorf("%s, a link out of the store: %+v, want a node whose error is ErrInvalidKey", arrays[0].Path, n)
	}
	if n, ok := h.Node(arrays[1].Path); !ok || n.Err != nil || n.Array == nil {
		t.Errorf("%s: %+v, want the array", arrays[1].Path, n)
	}
}
