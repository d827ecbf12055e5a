package keyspace_test

import (
	"context"
	"encoding/json"
	"fmt"

	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// writeGroups writes a v3 hierarchy of groups g0..g<groups-1>, each
// holding arrays a0..a<arrays-1> and a group "inner" with one array, and
// returns the paths of its groups.
func writeGroups(t testing.TB, dir string, groups, arrays int) []string {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	paths := []string{""}
	group := func(p string) {
		if err := zarr.CreateGroup(ctx, s, p, 3, json.RawMessage(`{"made":"`+p+`"}`)); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	array := func(p string) {
		m := &meta.ArrayV3{Shape: []int{8, 8}, DataType: dtype.TypeUint16, ChunkShape: []int{4, 4},
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
			FillValue:   []byte{0, 0}, Codecs: []meta.Codec{zarrtest.BytesLE}}
		if _, err := zarr.CreateArrayV3(ctx, s, p, m); err != nil {
			t.Fatal(err)
		}
	}
	group("")
	paths = paths[1:]
	for g := range groups {
		gp := fmt.Sprintf("g%d", g)
		group(gp)
		for a := range arrays {
			array(fmt.Sprintf("%s/a%d", gp, a))
		}
		group(gp + "/inner")
		array(gp + "/inner/arr")
	}
	return paths
}

// zmetadataOf reads the .zmetadata of the v2 group at p.
func zmetadataOf(t testing.TB, f *keyspace.FS, p string) map[string]json.RawMessage {
	t.Helper()
	d := f.Root(keyspace.V2)
	for part := range strings.SplitSeq(p, "/") {
		if part != "" {
			d = lookupDir(t.(*testing.T), d, part)
		}
	}
	var c struct {
		Format   int                        `json:"zarr_consolidated_format"`
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(readFile(t.(*testing.T), d, ".zmetadata"), &c); err != nil || c.Format != 1 {
		t.Fatalf("/%s/.zmetadata: format %d, %v", p, c.Format, err)
	}
	return c.Metadata
}

// TestConsolidatedInEveryGroup: every group of the v2 view has a
// .zmetadata holding the documents below it, keyed from it, the same as
// the root's; an attribute written below a group shows in its .zmetadata
// and its ancestors', not in its siblings'.
func TestConsolidatedInEveryGroup(t *testing.T) {
	dir := t.TempDir()
	groups := writeGroups(t, dir, 2, 2)
	f, _ := writableAt(t, dir)
	root := zmetadataOf(t, f, "")
	for _, g := range groups {
		got := zmetadataOf(t, f, g)
		want := map[string]json.RawMessage{}
		for k, v := range root {
			if rest, ok := strings.CutPrefix(k, g+"/"); ok || g == "" {
				if g == "" {
					rest = k
				}
				want[rest] = v
			}
		}
		if !slices.Equal(slices.Sorted(keysOf(got)), slices.Sorted(keysOf(want))) {
			t.Errorf("/%s/.zmetadata holds %v; the root's below it: %v", g, slices.Sorted(keysOf(got)), slices.Sorted(keysOf(want)))
		}
		for k, v := range want {
			if !jsonSame(got[k], v) {
				t.Errorf("/%s/.zmetadata %s: %s; the root's: %s", g, k, got[k], v)
			}
		}
	}
	if _, ok := zmetadataOf(t, f, "g0")["inner/arr/.zarray"]; !ok {
		t.Fatalf("g0/.zmetadata lacks inner/arr/.zarray")
	}
	arr := lookupDir(t, lookupDir(t, lookupDir(t, f.Root(keyspace.V2), "g0"), "inner"), "arr")
	e, err := arr.Lookup(context.Background(), ".zattrs")
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.File.OpenWrite(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	h.WriteAt([]byte(`{"units":"K"}`), 0)
	if err := h.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	for g, want := range map[string]bool{"": true, "g0": true, "g0/inner": true, "g1": false} {
		key := strings.TrimPrefix(strings.TrimPrefix("g0/inner/arr/.zattrs", g), "/")
		got := strings.Contains(string(zmetadataOf(t, f, g)[key]), `"K"`)
		if got != want {
			t.Errorf("/%s/.zmetadata shows the attribute written to g0/inner/arr: %v, want %v", g, got, want)
		}
	}
}

func jsonSame(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// BenchmarkConsolidated measures what a .zmetadata in every group costs
// on a large hierarchy (100 groups of 100 arrays, each with a nested
// group), after a change of the hierarchy: making the root's (what every
// change cost before), and every group's (as rsync of the whole view
// would read them).
func BenchmarkConsolidated(b *testing.B) {
	dir := b.TempDir()
	groups := writeGroups(b, dir, 100, 100)
	f := keyspace.New(zarrtest.OpenHierarchy(b, dir, true), keyspace.Options{})
	defer f.Close()
	for _, c := range []struct {
		name   string
		groups []string
	}{{"root", []string{""}}, {"every-group", groups}} {
		b.Run(c.name, func(b *testing.B) {
			var bytes int64
			for b.Loop() {
				keyspace.StaleConsolidated(f)
				bytes = readConsolidated(b, f, c.groups)
			}
			b.ReportMetric(float64(bytes)/(1<<20), "MiB/op")
		})
	}
}

// readConsolidated stats the .zmetadata of each group and returns their
// total size.
func readConsolidated(b *testing.B, f *keyspace.FS, groups []string) int64 {
	ctx := context.Background()
	var bytes int64
	for _, g := range groups {
		d := f.Root(keyspace.V2)
		for part := range strings.SplitSeq(g, "/") {
			if part != "" {
				e, err := d.Lookup(ctx, part)
				if err != nil {
					b.Fatal(err)
				}
				d = e.Dir
			}
		}
		e, err := d.Lookup(ctx, ".zmetadata")
		if err != nil {
			b.Fatal(err)
		}
		bytes += e.Attr.Size
	}
	return bytes
}

func keysOf(m map[string]json.RawMessage) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestConsolidatedHeldBeforeItsGroup: a .zmetadata copied into a new
// group's directory before its .zgroup (cp -r writes in whatever order
// the source lists) gives way to the group's own once the group exists:
// one .zmetadata is listed, the derived one.
func TestConsolidatedHeldBeforeItsGroup(t *testing.T) {
	dir := t.TempDir()
	writeGroups(t, dir, 0, 0)
	f, _ := writableAt(t, dir)
	ctx := context.Background()
	root := f.Root(keyspace.V2)
	if err := root.Mkdir(ctx, "copied"); err != nil {
		t.Fatal(err)
	}
	d := lookupDir(t, root, "copied")
	write := func(name, content string) {
		t.Helper()
		_, h, err := d.Create(ctx, name, true)
		if err != nil {
			t.Fatal(err)
		}
		h.WriteAt([]byte(content), 0)
		if err := h.Commit(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	write(".zmetadata", `{"zarr_consolidated_format":1,"metadata":{".zgroup":{"zarr_format":2},"stale/.zgroup":{"zarr_format":2}}}`)
	write(".zgroup", `{"zarr_format":2}`)
	d = lookupDir(t, root, "copied")
	if n := strings.Count(strings.Join(listNames(t, d), " "), ".zmetadata"); n != 1 {
		t.Errorf("the new group lists %v: .zmetadata %d times", listNames(t, d), n)
	}
	if got := zmetadataOf(t, f, "copied"); got["stale/.zgroup"] != nil || got[".zgroup"] == nil {
		t.Errorf("the new group's .zmetadata holds %v; want its own documents", slices.Sorted(keysOf(got)))
	}
}
