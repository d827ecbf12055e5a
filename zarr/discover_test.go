package zarr_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// unlistable is a directory store that cannot list, as a web server: it
// hides the Dir's store.Lister.
type unlistable struct{ store.Store }

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

// TestConsolidate: a store that cannot list shows only its root group and
// says why (Undiscoverable); after Consolidate on the store behind it,
// every array is found and reads to its digest, v3 (inline in the root
// zarr.json, as zarr-python 3 writes it) and v2 (.zmetadata). The root's
// attributes are kept, and consolidating again changes nothing.
func TestConsolidate(t *testing.T) {
	for _, tc := range []struct {
		format int
		write  func(testing.TB, string) []zarrtest.Generated
		key    string
	}{{3, zarrtest.WriteV3Store, zarr.ZarrJSON}, {2, zarrtest.WriteV2Store, zarr.ZMetadata}} {
		t.Run(fmt.Sprintf("v%d", tc.format), func(t *testing.T) {
			dir := t.TempDir()
			arrays := tc.write(t, dir)
			before := openUnlistable(t, dir)
			if err := before.Undiscoverable(); !errors.Is(err, zarr.ErrUndiscoverable) || !strings.Contains(err.Error(), "zarrfs consolidate") {
				t.Errorf("a group that cannot list, not consolidated: Undiscoverable() = %v, want ErrUndiscoverable naming zarrfs consolidate", err)
			}
			if n := len(before.Nodes()); n != 1 {
				t.Errorf("before consolidating: %d nodes, want the root alone", n)
			}
			attrs := before.Root().Attributes

			c, err := zarr.Consolidate(context.Background(), zarrtest.OpenHierarchy(t, dir, false))
			if err != nil {
				t.Fatal(err)
			}
			if c.Key != tc.key || len(c.Skipped) != 0 || len(c.Nodes) < len(arrays) {
				t.Errorf("Consolidate wrote %s for %d nodes, skipped %v; want %s for every node", c.Key, len(c.Nodes), c.Skipped, tc.key)
			}
			first, err := os.ReadFile(filepath.Join(dir, tc.key))
			if err != nil {
				t.Fatal(err)
			}
			h := openUnlistable(t, dir)
			if err := h.Undiscoverable(); err != nil {
				t.Errorf("after consolidating: %v", err)
			}
			if got := digests(t, h); fmt.Sprint(got) != fmt.Sprint(want(arrays)) {
				t.Errorf("arrays found after consolidating:\n%v\nwant\n%v", got, want(arrays))
			}
			if got := h.Root().Attributes; string(got) != string(attrs) {
				t.Errorf("root attributes %s after consolidating, want %s", got, attrs)
			}
			if _, err := zarr.Consolidate(context.Background(), zarrtest.OpenHierarchy(t, dir, false)); err != nil {
				t.Fatal(err)
			}
			if again, _ := os.ReadFile(filepath.Join(dir, tc.key)); string(again) != string(first) {
				t.Errorf("consolidating again changed %s:\n%s\nwas\n%s", tc.key, again, first)
			}
		})
	}
}

// TestConsolidateV3Layout: the v3 document is the one zarr-python 3
// writes: consolidated_metadata of kind "inline", must_understand false, a
// metadata map by path relative to the root holding each node's zarr.json,
// child groups with an empty consolidated_metadata of their own.
func TestConsolidateV3Layout(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	if _, err := zarr.Consolidate(context.Background(), zarrtest.OpenHierarchy(t, dir, false)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, zarr.ZarrJSON))
	if err != nil {
		t.Fatal(err)
	}
	var root struct {
		NodeType     string `json:"node_type"`
		Consolidated struct {
			Kind           string                     `json:"kind"`
			MustUnderstand *bool                      `json:"must_understand"`
			Metadata       map[string]json.RawMessage `json:"metadata"`
		} `json:"consolidated_metadata"`
	}
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	c := root.Consolidated
	if root.NodeType != "group" || c.Kind != "inline" || c.MustUnderstand == nil || *c.MustUnderstand {
		t.Fatalf("root zarr.json: %s", b)
	}
	docs := metadataDocs(t, dir, zarr.ZarrJSON)
	delete(docs, zarr.ZarrJSON)
	if len(c.Metadata) != len(docs) {
		t.Errorf("%d entries, want one per node below the root (%d)", len(c.Metadata), len(docs))
	}
	for key, stored := range docs {
		p := strings.TrimSuffix(key, "/"+zarr.ZarrJSON)
		var entry, doc map[string]any
		json.Unmarshal(c.Metadata[p], &entry)
		json.Unmarshal(stored, &doc)
		if doc["node_type"] == "group" {
			doc["consolidated_metadata"] = map[string]any{"kind": "inline", "must_understand": false, "metadata": map[string]any{}}
		}
		if fmt.Sprint(entry) != fmt.Sprint(doc) {
			t.Errorf("entry %q:\n%v\nwant\n%v", p, entry, doc)
		}
	}
}

// TestConsolidateRefuses: a root that is an array has nothing to
// consolidate, a read-only store is not written, and a node whose
// metadata is broken is left out (named), not copied into the document.
func TestConsolidateRefuses(t *testing.T) {
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	os.Mkdir(filepath.Join(dir, "broken"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "broken", zarr.ZarrJSON), []byte(`{"zarr_format":3,"node_type":"array"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := zarr.Consolidate(context.Background(), zarrtest.OpenHierarchy(t, dir, false))
	if err != nil {
		t.Fatal(err)
	}
	if c.Skipped["broken"] == nil || len(c.Skipped) != 1 || slices.Contains(c.Nodes, "broken") {
		t.Errorf("a broken node: consolidated %v, left out %v; want it left out alone", c.Nodes, c.Skipped)
	}
	h := zarrtest.OpenHierarchy(t, filepath.Join(dir, arrays[0].Path), false)
	if _, err := zarr.Consolidate(context.Background(), h); err == nil || !strings.Contains(err.Error(), "array") {
		t.Errorf("consolidating an array: %v, want an error saying the root is an array", err)
	}
	if _, err := zarr.Consolidate(context.Background(), zarrtest.OpenHierarchy(t, dir, true)); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("consolidating a read-only store: %v, want ErrReadOnly", err)
	}
}
