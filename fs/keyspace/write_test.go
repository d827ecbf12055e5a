package keyspace_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/writeback"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// writableFS opens a generated v3 store with a writer and returns the FS,
// the writer and the store directory.
func writableFS(t *testing.T) (*keyspace.FS, *writeback.Writer, string) {
	t.Helper()
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	f, w := writableAt(t, dir)
	return f, w, dir
}

// writableAt opens the store at dir read-write.
func writableAt(t *testing.T, dir string) (*keyspace.FS, *writeback.Writer) {
	t.Helper()
	h := zarrtest.OpenHierarchy(t, dir, false)
	journals, err := writeback.LocalJournalRoot(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { journals.Close() })
	w, err := writeback.New(h.Store, journals, writeback.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := keyspace.New(h, keyspace.Options{Writer: w})
	t.Cleanup(f.Close)
	t.Cleanup(func() { w.Close(context.Background()) })
	return f, w
}

func readFile(t *testing.T, d *keyspace.Dir, name string) []byte {
	t.Helper()
	e, err := d.Lookup(context.Background(), name)
	if err != nil {
		t.Fatalf("lookup %s/%s: %v", d, name, err)
	}
	h, err := e.File.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	b, err := io.ReadAll(io.NewSectionReader(h, 0, h.Size()))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func listNames(t *testing.T, d *keyspace.Dir) []string {
	t.Helper()
	var names []string
	for e, err := range d.List(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, e.Name)
	}
	return names
}

// TestWriteChunkInBothViews writes inner chunks through one view and reads
// them through the other, before and after they reach the shard.
func TestWriteChunkInBothViews(t *testing.T) {
	f, w, dir := writableFS(t)
	ctx := context.Background()
	// int16_dotkeys: 8x8 in 4x4 shards of 2x2 inner chunks, keys c.i.j.
	v3 := lookupDir(t, f.Root(keyspace.V3), "int16_dotkeys")
	v2 := lookupDir(t, f.Root(keyspace.V2), "int16_dotkeys")
	donor := readFile(t, v3, "c.1.1")
	// c.0.0 is empty (the pattern leaves the first inner chunk empty).
	if _, err := v3.Lookup(ctx, "c.0.0"); !errors.Is(err, keyspace.ErrNotFound) {
		t.Fatalf("c.0.0 before the write: %v", err)
	}
	e, h, err := v3.Create(ctx, "c.0.0", true)
	if err != nil {
		t.Fatal(err)
	}
	h.WriteAt(donor, 0)
	if err := h.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if e.File.Path() != "int16_dotkeys/c.0.0" {
		t.Fatalf("path %q", e.File.Path())
	}
	if got := readFile(t, v2, "0.0"); !bytes.Equal(got, donor) {
		t.Fatal("the v2 alias does not show the pending write")
	}
	if !slices.Contains(listNames(t, v2), "0.0") {
		t.Fatal("the v2 listing lacks the pending chunk")
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, v2, "0.0"); !bytes.Equal(got, donor) {
		t.Fatal("the v2 alias does not show the published write")
	}
	// A fresh hierarchy (another reader of the store) sees it too.
	n, _ := zarrtest.OpenHierarchy(t, dir, true).Node("int16_dotkeys")
	c, err := n.Array.ReadRegion(ctx, []int{0, 0}, []int{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := n.Array.ReadRegion(ctx, []int{2, 2}, []int{2, 2})
	if !bytes.Equal(c.Data, d.Data) {
		t.Fatal("the store does not hold the written chunk")
	}
	// Unlink empties it in both views.
	if err := v2.Unlink(ctx, "0.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := v3.Lookup(ctx, "c.0.0"); !errors.Is(err, keyspace.ErrNotFound) {
		t.Fatalf("c.0.0 after unlink through v2: %v", err)
	}
}

// TestTempRenameCommits does what zarr-python 2's DirectoryStore does:
// write a temporary file, then rename it onto the chunk name.
func TestTempRenameCommits(t *testing.T) {
	f, w, _ := writableFS(t)
	ctx := context.Background()
	v2 := lookupDir(t, f.Root(keyspace.V2), "uint16_zstd_end")
	donor := readFile(t, v2, "1.1")
	tmp := ".0.0.123abc.partial"
	_, h, err := v2.Create(ctx, tmp, true)
	if err != nil {
		t.Fatal(err)
	}
	h.WriteAt(donor, 0)
	if err := h.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(listNames(t, v2), tmp) {
		t.Fatal("the temporary file is not listed")
	}
	if err := v2.Rename(ctx, tmp, v2, "0.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.Lookup(ctx, tmp); !errors.Is(err, keyspace.ErrNotFound) {
		t.Fatalf("the temporary file survived the rename: %v", err)
	}
	if got := readFile(t, v2, "0.0"); !bytes.Equal(got, donor) {
		t.Fatal("rename did not commit the chunk")
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRejectedWritesChangeNothing writes garbage, wrong sizes and truncated
// compressed data; every commit fails with ErrInvalid and the store is
// byte-for-byte unchanged.
func TestRejectedWritesChangeNothing(t *testing.T) {
	f, w, dir := writableFS(t)
	ctx := context.Background()
	before := snapshot(t, dir)
	for _, tc := range []struct{ array, name string }{
		{"uint16_zstd_end", "c/1/1"},         // zstd
		{"int16_dotkeys", "c.1.1"},           // uncompressed: fixed size
		{"complex64_crc", "c/1"},             // crc32c inner chunks
		{"float32_bigendian", "c/2"},         // big-endian bytes, crc32c
		{"group/float16_unsharded", "c/1/1"}, // unsharded gzip
	} {
		d := f.Root(keyspace.V3)
		for _, part := range strings.Split(tc.array, "/") {
			d = lookupDir(t, d, part)
		}
		file := tc.name
		for strings.Contains(file, "/") {
			var dirName string
			dirName, file, _ = strings.Cut(file, "/")
			d = lookupDir(t, d, dirName)
		}
		good := readFile(t, d, file)
		for label, bad := range map[string][]byte{
			"garbage":   bytes.Repeat([]byte{0xde, 0xad}, len(good)/2+1),
			"too short": good[:len(good)/2],
			"too long":  append(slices.Clone(good), 0),
			"empty":     {},
		} {
			e, err := d.Lookup(ctx, file)
			if err != nil {
				t.Fatal(err)
			}
			h, err := e.File.OpenWrite(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			h.WriteAt(bad, 0)
			if err := h.Commit(ctx); !errors.Is(err, keyspace.ErrInvalid) {
				t.Errorf("%s/%s %s: commit = %v, want ErrInvalid", tc.array, tc.name, label, err)
			}
			if got := readFile(t, d, file); !bytes.Equal(got, good) {
				t.Errorf("%s/%s %s: the rejected write is visible", tc.array, tc.name, label)
			}
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, dir); !maps(before, after) {
		t.Fatal("rejected writes changed the store")
	}
}

// TestWriteAfterFsync: a chunk file written, fsync'd, then overwritten in
// place with bytes that close refuses keeps what fsync acknowledged, in
// the views and in the store once published: the writer must not keep
// the handle's buffer, which the refused bytes overwrite.
func TestWriteAfterFsync(t *testing.T) {
	f, w, dir := writableFS(t)
	ctx := context.Background()
	cases := []struct{ array, name string }{
		{"uint16_zstd_end", "c/1/1"}, // zstd: garbage does not decode
		{"complex64_crc", "c/1"},     // crc32c: garbage fails the checksum
		{"int16_dotkeys", "c.1.1"},   // uncompressed: refused for its size
	}
	fsynced := make([][]byte, len(cases))
	for i, tc := range cases {
		d, file := chunkDir(t, f, tc.array, tc.name)
		good := readFile(t, d, file)
		fsynced[i] = good
		e, err := d.Lookup(ctx, file)
		if err != nil {
			t.Fatal(err)
		}
		h, err := e.File.OpenWrite(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		h.WriteAt(good, 0)
		if err := h.Sync(ctx); err != nil {
			t.Fatalf("%s/%s: fsync: %v", tc.array, tc.name, err)
		}
		// Overwritten in place (same length), then cut short.
		h.WriteAt(bytes.Repeat([]byte{0xde}, len(good)), 0)
		h.Truncate(int64(len(good) - 1))
		if err := h.Commit(ctx); !errors.Is(err, keyspace.ErrInvalid) {
			t.Fatalf("%s/%s: close after writing garbage = %v, want ErrInvalid", tc.array, tc.name, err)
		}
		if got := readFile(t, d, file); !bytes.Equal(got, good) {
			t.Errorf("%s/%s: after the refused close the file holds %x, want what was fsync'd, %x", tc.array, tc.name, got, good)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	h := zarrtest.OpenHierarchy(t, dir, true)
	e := engine.New(h.Store, engine.Options{})
	defer e.Close()
	for _, tc := range cases {
		n, _ := h.Node(tc.array)
		for r, err := range e.Array(n.Array).Inspect(ctx, true, 1) {
			if err != nil || r.Err != nil {
				t.Errorf("%s: the published shard is broken: %v", tc.array, cmp.Or(err, r.Err))
			}
		}
	}
	fresh := keyspace.New(h, keyspace.Options{})
	t.Cleanup(fresh.Close)
	for i, tc := range cases {
		d, file := chunkDir(t, fresh, tc.array, tc.name)
		if got := readFile(t, d, file); !bytes.Equal(got, fsynced[i]) {
			t.Errorf("%s/%s: the store holds %x, want what was fsync'd, %x", tc.array, tc.name, got, fsynced[i])
		}
	}
}

// chunkDir returns the v3 directory holding the chunk file at name (a key
// below the array) and the file's name in it.
func chunkDir(t *testing.T, f *keyspace.FS, array, name string) (*keyspace.Dir, string) {
	t.Helper()
	d := f.Root(keyspace.V3)
	for part := range strings.SplitSeq(array, "/") {
		d = lookupDir(t, d, part)
	}
	for strings.Contains(name, "/") {
		var dirName string
		dirName, name, _ = strings.Cut(name, "/")
		d = lookupDir(t, d, dirName)
	}
	return d, name
}

// snapshot reads every file of the store except zarrfs's own state.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() && info.Name() == store.StateDir {
			return filepath.SkipDir
		}
		if !info.IsDir() {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		}
		return nil
	})
	return out
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestAttributeWrites(t *testing.T) {
	f, _, dir := writableFS(t)
	ctx := context.Background()
	v2 := lookupDir(t, f.Root(keyspace.V2), "uint16_zstd_end")
	v3 := lookupDir(t, f.Root(keyspace.V3), "uint16_zstd_end")
	commit := func(d *keyspace.Dir, name string, content string) error {
		e, err := d.Lookup(ctx, name)
		if err != nil {
			return err
		}
		h, err := e.File.OpenWrite(ctx, true)
		if err != nil {
			return err
		}
		h.WriteAt([]byte(content), 0)
		return h.Commit(ctx)
	}
	if err := commit(v2, ".zattrs", `{"units": "mm", "scale": [1, 2]}`); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Attributes map[string]any `json:"attributes"`
	}
	json.Unmarshal(readFile(t, v3, "zarr.json"), &doc)
	if doc.Attributes["units"] != "mm" {
		t.Fatalf("v3 zarr.json after a v2 .zattrs write: %v", doc.Attributes)
	}
	stored, _ := os.ReadFile(filepath.Join(dir, "uint16_zstd_end", "zarr.json"))
	if !bytes.Contains(stored, []byte(`"units": "mm"`)) && !bytes.Contains(stored, []byte(`"units":"mm"`)) {
		t.Fatalf("the store's zarr.json lacks the attribute:\n%s", stored)
	}
	zmeta := readFile(t, f.Root(keyspace.V2), ".zmetadata")
	if !bytes.Contains(zmeta, []byte(`"units"`)) {
		t.Fatal(".zmetadata does not show the new attributes")
	}
	// Attributes through zarr.json in the v3 view.
	cur := readFile(t, v3, "zarr.json")
	edited := strings.Replace(string(cur), `"units": "mm"`, `"units": "um"`, 1)
	if err := commit(v3, "zarr.json", edited); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readFile(t, v2, ".zattrs"), []byte(`"um"`)) {
		t.Fatal("the v2 .zattrs does not show the v3 attribute edit")
	}
	// Structural edits are refused.
	structural := strings.Replace(edited, `"shape": [`, `"shape": [1, `, 1)
	if err := commit(v3, "zarr.json", structural); !errors.Is(err, keyspace.ErrPermission) && !errors.Is(err, keyspace.ErrInvalid) {
		t.Fatalf("a shape edit through zarr.json: %v, want ErrPermission", err)
	}
	zarray := string(readFile(t, v2, ".zarray"))
	if err := commit(v2, ".zarray", strings.Replace(zarray, `"order": "C"`, `"order": "F"`, 1)); !errors.Is(err, keyspace.ErrPermission) {
		t.Fatalf("an order edit through .zarray: %v, want ErrPermission", err)
	}
	if err := commit(v2, ".zattrs", `[1, 2]`); !errors.Is(err, keyspace.ErrInvalid) {
		t.Fatalf("a .zattrs that is not an object: %v, want ErrInvalid", err)
	}
}

func lookupFile(t *testing.T, d *keyspace.Dir, name string) keyspace.File {
	t.Helper()
	e, err := d.Lookup(context.Background(), name)
	if err != nil || e.File == nil {
		t.Fatalf("lookup %s/%s: %v", d, name, err)
	}
	return e.File
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	f := openFS(t, dir, keyspace.Options{})
	ctx := context.Background()
	v2 := lookupDir(t, f.Root(keyspace.V2), "uint16_zstd_end")
	if _, _, err := v2.Create(ctx, "0.0", false); !errors.Is(err, keyspace.ErrReadOnly) {
		t.Fatalf("Create on a read-only FS: %v", err)
	}
	if err := v2.Unlink(ctx, "1.1"); !errors.Is(err, keyspace.ErrReadOnly) {
		t.Fatalf("Unlink on a read-only FS: %v", err)
	}
}

// TestConcurrentUse runs, at once and under -race, attribute edits through
// both views, chunk writes and publishes, and readers of metadata,
// listings and chunks; every edit must land and every read succeed.
func TestConcurrentUse(t *testing.T) {
	f, w, _ := writableFS(t)
	ctx := context.Background()
	const name = "uint16_zstd_end"
	v2 := lookupDir(t, f.Root(keyspace.V2), name)
	v3 := lookupDir(t, f.Root(keyspace.V3), name)
	chunks := listNames(t, v2)
	var chunkNames []string
	for _, c := range chunks {
		if !strings.HasPrefix(c, ".") {
			chunkNames = append(chunkNames, c)
		}
	}
	if len(chunkNames) < 2 {
		t.Fatalf("%s has %d chunk files", name, len(chunkNames))
	}
	original := readFile(t, v2, chunkNames[0])
	commit := func(d *keyspace.Dir, file string, content []byte) error {
		e, err := d.Lookup(ctx, file)
		if err != nil {
			return err
		}
		h, err := e.File.OpenWrite(ctx, true)
		if err != nil {
			return err
		}
		h.WriteAt(content, 0)
		return h.Commit(ctx)
	}
	var wg sync.WaitGroup
	const rounds = 20
	for writer := range 2 {
		wg.Go(func() {
			for i := range rounds {
				if err := commit(v2, ".zattrs", fmt.Appendf(nil, `{"writer": %d, "round": %d}`, writer, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range rounds {
			if err := commit(v2, chunkNames[1], original); err != nil {
				t.Error(err)
				return
			}
			w.Flush(ctx)
		}
	})
	for range 2 {
		wg.Go(func() {
			for range 2 * rounds {
				readFile(t, v3, "zarr.json")
				readFile(t, f.Root(keyspace.V2), ".zmetadata")
				readFile(t, v2, chunkNames[0])
				listNames(t, v3)
			}
		})
	}
	wg.Wait()
	var attrs map[string]any
	if err := json.Unmarshal(readFile(t, v2, ".zattrs"), &attrs); err != nil || attrs["round"] != float64(rounds-1) {
		t.Fatalf(".zattrs after the edits: %v, %v; want the last round of either writer", attrs, err)
	}
}

// TestMisplacedChunkNames: names that read as chunk keys of an array but
// lie outside its grid or have the wrong number of dimensions are refused
// at create and as rename targets (they would otherwise become temporary
// files and vanish at unmount); other names still make temporary files.
func TestMisplacedChunkNames(t *testing.T) {
	f, _, dir := writableFS(t)
	ctx := context.Background()
	before := snapshot(t, dir)
	v2 := lookupDir(t, f.Root(keyspace.V2), "uint16_zstd_end") // 2-D
	v3 := lookupDir(t, lookupDir(t, f.Root(keyspace.V3), "uint16_zstd_end"), "c")
	v3row := lookupDir(t, v3, "0")
	for _, c := range []struct {
		d    *keyspace.Dir
		name string
	}{
		{v2, "99.99"}, {v2, "0.0.0"}, {v2, "7"}, {v3row, "99"}, {v3, "99"},
	} {
		if _, _, err := c.d.Create(ctx, c.name, false); !errors.Is(err, keyspace.ErrInvalid) {
			t.Errorf("create %s/%s: %v, want ErrInvalid", c.d, c.name, err)
		}
		if _, err := c.d.Lookup(ctx, c.name); !errors.Is(err, keyspace.ErrNotFound) {
			t.Errorf("%s/%s exists after a refused create: %v", c.d, c.name, err)
		}
	}
	for _, name := range []string{".0.0.tmp", "notes.txt", "0.0.swp"} {
		_, h, err := v2.Create(ctx, name, false)
		if err != nil {
			t.Errorf("create %s: %v; want a temporary file", name, err)
			continue
		}
		h.WriteAt([]byte("x"), 0)
		if err := h.Commit(ctx); err != nil {
			t.Errorf("commit %s: %v", name, err)
		}
	}
	if err := v2.Rename(ctx, "notes.txt", v2, "12.0"); !errors.Is(err, keyspace.ErrInvalid) {
		t.Errorf("rename onto an out-of-grid chunk name: %v, want ErrInvalid", err)
	}
	if after := snapshot(t, dir); !maps(before, after) {
		t.Fatal("refused names changed the store")
	}
}

// TestRmdirNotEmpty: rmdir of an array directory whose metadata document
// is still there, or of a chunk directory holding chunks, is refused as
// for any directory that is not empty (ErrExists: EEXIST), changing
// nothing; a missing name is ErrNotFound. Once the array's zarr.json is
// unlinked, its metadata is gone from the store and rmdir deletes its
// shards.
func TestRmdirNotEmpty(t *testing.T) {
	f, _, dir := writableFS(t)
	ctx := context.Background()
	before := snapshot(t, dir)
	for _, v := range []keyspace.View{keyspace.V2, keyspace.V3} {
		if err := f.Root(v).Rmdir(ctx, "uint16_zstd_end"); !errors.Is(err, keyspace.ErrExists) {
			t.Errorf("rmdir of an array in %v: %v, want ErrExists", v, err)
		}
		if err := f.Root(v).Rmdir(ctx, "missing"); !errors.Is(err, keyspace.ErrNotFound) {
			t.Errorf("rmdir of a missing name in %v: %v, want ErrNotFound", v, err)
		}
	}
	arr := lookupDir(t, f.Root(keyspace.V3), "uint16_zstd_end")
	if err := arr.Rmdir(ctx, "c"); !errors.Is(err, keyspace.ErrExists) {
		t.Errorf("rmdir of a chunk directory: %v, want ErrExists", err)
	}
	if after := snapshot(t, dir); !maps(before, after) {
		t.Fatal("a refused rmdir changed the store")
	}
	if err := arr.Unlink(ctx, "zarr.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "uint16_zstd_end", "zarr.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the array's zarr.json is still in the store after its unlink (%v)", err)
	}
	if err := arr.Rmdir(ctx, "c"); err != nil {
		t.Errorf("rmdir of the chunk directory of a deleted array: %v", err)
	}
	if err := f.Root(keyspace.V2).Rmdir(ctx, "uint16_zstd_end"); err != nil {
		t.Fatal(err)
	}
	var left []string
	filepath.WalkDir(filepath.Join(dir, "uint16_zstd_end"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("left of the deleted array in the store: %v", left)
	}
	if _, err := f.Root(keyspace.V3).Lookup(ctx, "uint16_zstd_end"); !errors.Is(err, keyspace.ErrNotFound) {
		t.Errorf("the deleted array still shows in the v3 view: %v", err)
	}
}

// TestTempFilesMemoryBound: temporary files together hold at most the
// bound; a write beyond it fails with ErrNoSpace and changes nothing, and
// removing, truncating or renaming files gives the memory back.
func TestTempFilesMemoryBound(t *testing.T) {
	defer keyspace.SetMaxTempTotal(1000)()
	f, _, _ := writableFS(t)
	ctx := context.Background()
	v2 := lookupDir(t, f.Root(keyspace.V2), "uint16_zstd_end")
	create := func(name string, n int) (*keyspace.WriteHandle, error) {
		t.Helper()
		_, h, err := v2.Create(ctx, name, false)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.WriteAt(make([]byte, n), 0)
		return h, err
	}
	a, err := create(".a", 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create(".b", 600); !errors.Is(err, keyspace.ErrNoSpace) {
		t.Fatalf("600 + 600 bytes of temporary files with a bound of 1000: %v, want ErrNoSpace", err)
	}
	if err := v2.Unlink(ctx, ".b"); err != nil {
		t.Fatal(err)
	}
	if err := a.Truncate(100); err != nil {
		t.Fatal(err)
	}
	if _, err := create(".c", 800); err != nil {
		t.Fatalf("after truncating: %v", err)
	}
	if err := v2.Rename(ctx, ".c", v2, ".d"); err != nil {
		t.Fatal(err)
	}
	if _, err := create(".e", 200); !errors.Is(err, keyspace.ErrNoSpace) {
		t.Fatalf("a renamed file still counts: %v, want ErrNoSpace", err)
	}
	if err := v2.Rename(ctx, ".a", v2, ".d"); err != nil { // replaces .d's 800 bytes
		t.Fatal(err)
	}
	if _, err := create(".f", 800); err != nil {
		t.Fatalf("after a rename replaced a file: %v", err)
	}
}

// TestTempFileWrittenAfterUnlink: writes through a handle of an unlinked
// temporary file do not count against the others for ever.
func TestTempFileWrittenAfterUnlink(t *testing.T) {
	defer keyspace.SetMaxTempTotal(1000)()
	f, _, _ := writableFS(t)
	ctx := context.Background()
	v2 := lookupDir(t, f.Root(keyspace.V2), "uint16_zstd_end")
	for i := range 3 {
		_, h, err := v2.Create(ctx, ".t", false)
		if err != nil {
			t.Fatal(err)
		}
		if err := v2.Unlink(ctx, ".t"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.WriteAt(make([]byte, 600), 0); err != nil {
			t.Fatalf("round %d: writing 600 bytes into an unlinked temporary file: %v", i, err)
		}
	}
	_, h, err := v2.Create(ctx, ".u", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(make([]byte, 900), 0); err != nil {
		t.Fatalf("after writes into unlinked files: %v", err)
	}
}

// TestTruncateByPath: truncating a chunk to a size that is not one valid
// chunk is refused and changes nothing; a temporary file is resized.
func TestTruncateByPath(t *testing.T) {
	f, _, dir := writableFS(t)
	ctx := context.Background()
	before := snapshot(t, dir)
	v2 := lookupDir(t, f.Root(keyspace.V2), "uint16_zstd_end")
	chunk := readFile(t, v2, "1.1")
	if err := lookupFile(t, v2, "1.1").Truncate(ctx, 3); !errors.Is(err, keyspace.ErrInvalid) {
		t.Errorf("truncate a zstd chunk to 3 bytes: %v, want ErrInvalid", err)
	}
	if got := readFile(t, v2, "1.1"); !bytes.Equal(got, chunk) {
		t.Error("a refused truncate changed the chunk")
	}
	if after := snapshot(t, dir); !maps(before, after) {
		t.Error("a refused truncate changed the store")
	}
	_, h, err := v2.Create(ctx, ".t", false)
	if err != nil {
		t.Fatal(err)
	}
	h.WriteAt([]byte("abcdef"), 0)
	if err := lookupFile(t, v2, ".t").Truncate(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, v2, ".t"); string(got) != "ab" {
		t.Errorf("temporary file after truncate: %q", got)
	}
}

// TestWriteBeyondTruncatedEnd: after a file is truncated shorter, a write
// past its end leaves a hole of zeros, not the bytes the truncate cut.
func TestWriteBeyondTruncatedEnd(t *testing.T) {
	f, _, _ := writableFS(t)
	ctx := context.Background()
	v2 := lookupDir(t, f.Root(keyspace.V2), "uint16_zstd_end")
	_, h, err := v2.Create(ctx, ".hole", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(bytes.Repeat([]byte{7}, 8), 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt([]byte{9}, 6); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	n, _ := h.ReadAt(got, 0)
	if want := []byte{7, 7, 0, 0, 0, 0, 9}; !bytes.Equal(got[:n], want) {
		t.Fatalf("file holds %v, want %v", got[:n], want)
	}
}
