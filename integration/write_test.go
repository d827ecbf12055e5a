package integration_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// writeLayout is a sharded array the write tests add to a store.
type writeLayout struct {
	path         string
	typ          dtype.DataType
	shape, shard []int
	inner        []int
	codecs       []meta.Codec
}

// writeLayouts are layouts the generated store lacks: a transpose Zarr v2
// cannot express (the v2 view transcodes it), 3-D uncompressed chunks
// (written in place) and zstd chunks protected by crc32c (which the v2
// view drops).
var writeLayouts = []writeLayout{
	{"uint16_transpose_3d", dtype.TypeUint16, []int{12, 10, 9}, []int{6, 4, 6}, []int{3, 2, 3},
		[]meta.Codec{zarrtest.C("transpose", `{"order":[0,2,1]}`), zarrtest.BytesLE, zarrtest.Zstd}},
	{"int32_raw_3d", dtype.TypeInt32, []int{8, 9, 10}, []int{4, 6, 10}, []int{2, 3, 5},
		[]meta.Codec{zarrtest.BytesLE}},
	{"uint16_zstd_crc", dtype.TypeUint16, []int{20, 24}, []int{10, 12}, []int{5, 4},
		[]meta.Codec{zarrtest.BytesLE, zarrtest.Zstd, zarrtest.CRC32C}},
}

// addLayouts writes arrays of the given layouts, filled with
// zarrtest.Pattern, into the v3 store at dir, whose root group must exist,
// and returns them.
func addLayouts(t *testing.T, dir string, layouts []writeLayout) []zarrtest.Generated {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	var out []zarrtest.Generated
	for _, l := range layouts {
		m := &meta.ArrayV3{Shape: l.shape, DataType: l.typ, ChunkShape: l.shard, FillValue: make([]byte, l.typ.Size),
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
			Codecs:      []meta.Codec{zarrtest.Sharding(l.inner, l.codecs, []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}, "end")}}
		a, err := zarr.CreateArrayV3(ctx, s, l.path, m)
		if err != nil {
			t.Fatal(err)
		}
		data := zarrtest.Pattern(a, 3)
		if err := a.Write(ctx, data); err != nil {
			t.Fatal(err)
		}
		out = append(out, zarrtest.Generated{Path: l.path, Format: 3, Digest: zarrtest.Digest(data), Sharded: true, ZarritaReads: true})
	}
	return out
}

// writeStore returns a new v3 store holding the generated arrays and the
// write layouts.
func writeStore(t *testing.T) (string, []zarrtest.Generated) {
	t.Helper()
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	return dir, append(arrays, addLayouts(t, dir, writeLayouts)...)
}

// storeArray opens one array of the store at dir.
func storeArray(t *testing.T, dir, path string) *zarr.Array {
	t.Helper()
	n, ok := openView(t, dir).Node(path)
	if !ok || n.Array == nil {
		t.Fatalf("%s: no array %s (%v)", dir, path, n.Err)
	}
	return n.Array
}

// checkStore runs `zarrfs check` on the store at dir: every shard must be
// whole and every inner chunk must decode.
func checkStore(t *testing.T, dir string) {
	t.Helper()
	out, err := exec.Command(zarrfsBin, "check", dir).CombinedOutput()
	if err != nil {
		t.Errorf("zarrfs check %s: %v\n%s", dir, err, out)
	}
}

// storeFiles hashes every file of the store at dir except zarrfs's own
// state, by path (symbolic links: their targets).
func storeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && rel == store.StateDir {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			files[rel] = "symlink to " + target
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Size() > 64<<20 {
			// Sparse files of the attack tests: what they are, not a
			// hash of 100 GB. zarrfs replaces a file or changes its mtime.
			st := fi.Sys().(*syscall.Stat_t)
			files[rel] = fmt.Sprintf("%d bytes, inode %d, modified %v, changed %v", fi.Size(), st.Ino, fi.ModTime(), st.Ctim)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// requireSameFiles fails the test when files differ from before.
func requireSameFiles(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, h := range before {
		if after[p] != h {
			t.Errorf("store file %s changed (or vanished)", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("store file %s appeared", p)
		}
	}
}

// journalRecords is what is left in the store's journals: nothing after a
// clean unmount.
func journalRecords(t *testing.T, dir string) []string {
	t.Helper()
	var left []string
	filepath.WalkDir(filepath.Join(dir, store.StateDir, "journal"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	return left
}

// stop unmounts a read-write mount cleanly: everything written is
// published and the journal removed.
func stop(t *testing.T, m *integration.Mount, dir string) {
	t.Helper()
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := journalRecords(t, dir); len(left) > 0 {
		t.Errorf("a clean unmount left journal files: %v", left)
	}
}

// zarrPythonWrite is one array for testdata/zarr_write.py.
type zarrPythonWrite struct {
	Path             string `json:"path"`
	Shard            []int  `json:"shard"`
	Whole            bool   `json:"whole"`
	WriteEmptyChunks bool   `json:"write_empty_chunks"`
}

// TestZarrPythonWrites: zarr-python 2.13 opens arrays of every layout in
// the v2 view with mode r+ and writes the whole array, an aligned chunk, an
// unaligned box, whole chunks of fill value (stored, or deleted with
// write_empty_chunks=False) and a box across a shard boundary, while the
// same writes go to plain v2 copies on disk. After unmounting, zarrita
// (or zarrfs's own reader, for arrays zarrita cannot decode) reads the
// original sharded store, not the mount: every array must have the
// digest zarr-python reads from its copy, and `zarrfs check` must pass.
// Both v2 key separators are covered.
func TestZarrPythonWrites(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	script, err := filepath.Abs(filepath.Join("testdata", "zarr_write.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sep := range []string{".", "/"} {
		t.Run("separator "+sep, func(t *testing.T) {
			dir, arrays := writeStore(t)
			m := mount(t, dir, "--v2-separator", sep)
			w := zarrPythonWrites(t, script, m, openView(t, dir), arrays, len(sep))
			stop(t, m, dir)
			checkStore(t, dir)
			w.check(t, o, dir)
		})
	}
}

// pythonWrites are the writes zarr-python made through a mount's v2 view,
// and the plain v2 copies it made them to as well.
type pythonWrites struct {
	h        *zarr.Hierarchy // the store before the writes
	specs    []zarrPythonWrite
	copies   string
	original map[string]string // digests before the writes
}

// zarrPythonWrites runs testdata/zarr_write.py on every array through the
// v2 view of m.
func zarrPythonWrites(t *testing.T, script string, m *integration.Mount, h *zarr.Hierarchy, arrays []zarrtest.Generated, seed int) *pythonWrites {
	t.Helper()
	w := &pythonWrites{h: h, copies: t.TempDir(), original: map[string]string{}}
	for i, g := range arrays {
		n, _ := h.Node(g.Path)
		w.specs = append(w.specs, zarrPythonWrite{Path: g.Path, Shard: n.Array.ChunkShape, Whole: i%2 == 0, WriteEmptyChunks: i%3 != 0})
		w.original[g.Path] = g.Digest
	}
	cfg, _ := json.Marshal(map[string]any{"view": filepath.Join(m.Dir, "v2"), "copy": w.copies, "seed": seed, "arrays": w.specs})
	cmd := exec.Command("/usr/bin/python3", script)
	cmd.Stdin = bytes.NewReader(cfg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("zarr-python writes: %v\n%s\nzarrfs log:\n%s", err, out, m.Log())
	}
	writes := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct{ Writes int }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("zarr-python printed %q: %v", line, err)
		}
		writes += r.Writes
	}
	t.Logf("zarr-python wrote %d regions into %d arrays", writes, len(w.specs))
	return w
}

// check reads the store at dir with zarrita (or zarrfs's own reader, for
// arrays zarrita cannot decode): every array must hold what zarr-python
// reads from its copy.
func (w *pythonWrites) check(t *testing.T, o *zarrtest.Oracle, dir string) {
	t.Helper()
	got := o.ZarritaAll(t, dir) // first: TestUmountWaits reads the bucket at once
	want := o.ZarrPythonAll(t, w.copies)
	for _, spec := range w.specs {
		wa, g := want[spec.Path], got[spec.Path]
		if wa.Error != "" || wa.SHA256 == "" {
			t.Errorf("%s: zarr-python cannot read its copy: %s", spec.Path, wa.Error)
			continue
		}
		if wa.SHA256 == w.original[spec.Path] {
			t.Errorf("%s: the writes left the content as it was; the test would prove nothing", spec.Path)
		}
		digest := g.SHA256
		if g.Error != "" {
			if !isZarritaLimit(g.Error) {
				t.Errorf("%s: zarrita cannot read the store: %s", spec.Path, g.Error)
				continue
			}
			digest = ownDigest(t, openView(t, dir), spec.Path)
		}
		if digest != wa.SHA256 {
			t.Errorf("%s: the store holds content with digest %s, zarr-python wrote %s", spec.Path, digest, wa.SHA256)
		}
	}
}

// storedInner reads the stored bytes of the inner chunk at coords of a
// straight from its shard file in the store at dir; ok is false when the
// inner chunk is empty or its shard missing.
func storedInner(t *testing.T, dir string, a *zarr.Array, coords []int) (b []byte, ok bool) {
	t.Helper()
	shard, local := a.InnerChunk(coords)
	file, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(a.ChunkKey(shard))))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	ix, err := a.Sharding().ReadIndex(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatalf("%s: %v", a.ChunkKey(shard), err)
	}
	off, n, ok := ix.Chunk(local)
	if !ok {
		return nil, false
	}
	return file[off : off+n], true
}

// eventually polls cond until it holds, failing the test after a minute.
// It waits for background work (shard publishing), never for speed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not the case after a minute: %s", what)
		}
	}
}

// copyArray writes a new array at path in the store at dir with the
// metadata of the array at from and other content.
func copyArray(t *testing.T, dir, from, path string) {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	doc, err := store.ReadAll(ctx, s, store.Join(from, zarr.ZarrJSON))
	if err != nil {
		t.Fatal(err)
	}
	m, err := meta.ParseV3(doc)
	if err != nil {
		t.Fatal(err)
	}
	a, err := zarr.CreateArrayV3(ctx, s, path, m.(*meta.ArrayV3))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(ctx, zarrtest.Pattern(a, 7)); err != nil {
		t.Fatal(err)
	}
}

// attributes reads the attributes of a zarr.json or .zattrs document.
func attributes(t *testing.T, path string) map[string]any {
	t.Helper()
	b := readOrMissing(t, path)
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	if filepath.Base(path) == zarr.ZarrJSON {
		attrs, _ := doc["attributes"].(map[string]any)
		return attrs
	}
	return doc
}

// TestWriteSemantics checks what a writer of chunk files and metadata
// sees, on a mount and in the store after unmounting:
//   - unlink empties an inner chunk: ENOENT in both views at once, gone
//     from listings; in the store its index entry is empty, and a shard
//     whose chunks were all unlinked no longer exists;
//   - writing a chunk of a missing shard creates the shard;
//   - after close (or rename) returns, the other view shows the new bytes,
//     even when it had the old ones (or the chunk's absence) cached;
//   - a write at an offset is a read-modify-write of the chunk;
//   - cp and cp -r of chunk files between arrays of the same codecs copy
//     the arrays' content;
//   - attributes written as v2 .zattrs show in v3 zarr.json and .zmetadata,
//     those written in v3 zarr.json in .zattrs, and the store holds them.
func TestWriteSemantics(t *testing.T) {
	dir, _ := writeStore(t)
	copyArray(t, dir, "int32_gzip_start_nocrc", "int32_gzip_copy")
	h := openView(t, dir)
	m := mount(t, dir)
	array := func(path string) *zarr.Array {
		n, ok := h.Node(path)
		if !ok || n.Array == nil {
			t.Fatalf("no array %s", path)
		}
		return n.Array
	}
	path := func(a *zarr.Array, view string, coords ...int) string { return chunkPath(m.Dir, view, ".", a, coords) }
	zstd, raw := array("uint16_zstd_end"), array("int16_dotkeys")
	// uint16_zstd_end: 10x4 inner chunks of 4x8 in 3x2 shards of 4x2;
	// inner chunk (0, 0) is empty and shard (2, 1) is missing.
	// What the store must hold after unmounting: inner chunks with the
	// bytes written (nil: unlinked).
	type expectation struct {
		coords []int
		bytes  []byte
	}
	var expect []expectation

	t.Run("unlink", func(t *testing.T) {
		for _, view := range []string{"v3", "v2"} {
			c := map[string][]int{"v3": {1, 1}, "v2": {2, 1}}[view]
			other := map[string]string{"v3": "v2", "v2": "v3"}[view]
			if err := os.Remove(path(zstd, view, c...)); err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{view, other} {
				if _, err := os.Stat(path(zstd, v, c...)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("stat %s after unlinking it in %s: %v, want ENOENT", path(zstd, v, c...), view, err)
				}
				if files := chunkFiles(t, filepath.Join(m.Dir, v, zstd.Path)); slices.Contains(files, filepath.ToSlash(keyIn(zstd, v, c))) {
					t.Errorf("%s still lists %s after it was unlinked", v, keyIn(zstd, v, c))
				}
			}
			if err := os.Remove(path(zstd, other, c...)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("unlink of the alias of an unlinked chunk: %v, want ENOENT", err)
			}
			expect = append(expect, expectation{c, nil})
		}
		// Every chunk of shard (0, 1): inner rows 0-3, columns 2-3.
		for i := range 4 {
			for j := 2; j < 4; j++ {
				if err := os.Remove(path(zstd, "v2", i, j)); err != nil {
					t.Fatal(err)
				}
			}
		}
	})

	t.Run("missing shard", func(t *testing.T) {
		content := readOrMissing(t, path(zstd, "v3", 4, 1))
		alias := path(zstd, "v2", 8, 2)
		if _, err := os.Stat(alias); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stat %s of a missing shard: %v, want ENOENT", alias, err)
		}
		f, err := os.OpenFile(path(zstd, "v3", 8, 2), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(content); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("close of a new chunk: %v", err)
		}
		if got := readOrMissing(t, alias); !bytes.Equal(got, content) {
			t.Errorf("%s right after the write: %d bytes, want the %d written", alias, len(got), len(content))
		}
		expect = append(expect, expectation{[]int{8, 2}, content})
	})

	t.Run("fresh aliases", func(t *testing.T) {
		// Write each chunk with the bytes of another chunk of another size
		// through one view after reading the other view (now cached by the
		// kernel), then read the other view.
		var sources [][]byte
		for i := 4; i < 8; i++ {
			for j := range 4 {
				sources = append(sources, readOrMissing(t, path(zstd, "v3", i, j)))
			}
		}
		for i, c := range [][]int{{1, 0}, {2, 0}, {3, 1}, {4, 0}, {6, 3}, {7, 3}} {
			from, to := []string{"v3", "v2"}[i%2], []string{"v2", "v3"}[i%2]
			old := readOrMissing(t, path(zstd, to, c...))
			k := slices.IndexFunc(sources, func(b []byte) bool { return len(b) != len(old) })
			content := sources[k]
			if err := writeMethods[i/2%2].write(path(zstd, from, c...), content); err != nil {
				t.Fatal(err)
			}
			if got := readOrMissing(t, path(zstd, to, c...)); !bytes.Equal(got, content) {
				t.Errorf("%s right after writing %s: %d bytes (had %d), want the %d written",
					path(zstd, to, c...), path(zstd, from, c...), len(got), len(old), len(content))
			}
			if fi, err := os.Stat(path(zstd, to, c...)); err != nil || fi.Size() != int64(len(content)) {
				t.Errorf("stat %s right after the write: %v, %v; want size %d", path(zstd, to, c...), fi.Size(), err, len(content))
			}
			expect = append(expect, expectation{c, content})
		}
	})

	t.Run("write at an offset", func(t *testing.T) {
		file := path(raw, "v3", 1, 1)
		want := readOrMissing(t, file)
		copy(want[2:], []byte{0xab, 0xcd})
		f, err := os.OpenFile(file, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0xab, 0xcd}, 2); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"v3", "v2"} {
			if got := readOrMissing(t, path(raw, v, 1, 1)); !bytes.Equal(got, want) {
				t.Errorf("%s after writing 2 bytes at offset 2: % x, want % x", path(raw, v, 1, 1), got, want)
			}
		}
		eventually(t, "the patched chunk is in its shard", func() bool {
			got, _ := storedInner(t, dir, raw, []int{1, 1})
			return bytes.Equal(got, want)
		})
	})

	src, dst := array("int32_gzip_start_nocrc"), array("int32_gzip_copy")
	t.Run("cp", func(t *testing.T) {
		one := []int{1, 1}
		if out, err := exec.Command("cp", path(src, "v3", one...), path(dst, "v3", one...)).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		if got, want := readOrMissing(t, path(dst, "v2", one...)), readOrMissing(t, path(src, "v2", one...)); !bytes.Equal(got, want) {
			t.Errorf("after cp, %s differs from %s", path(dst, "v2", one...), path(src, "v2", one...))
		}
		from, to := filepath.Join(m.Dir, "v3", src.Path, "c"), filepath.Join(m.Dir, "v3", dst.Path)
		if out, err := exec.Command("cp", "-r", from, to).CombinedOutput(); err != nil {
			t.Fatalf("cp -r: %v\n%s", err, out)
		}
		srcFiles := chunkFiles(t, filepath.Join(m.Dir, "v3", src.Path))
		if got := chunkFiles(t, filepath.Join(m.Dir, "v3", dst.Path)); !slices.Equal(got, srcFiles) {
			t.Errorf("after cp -r, %s lists %v, want %v", dst.Path, got, srcFiles)
		}
		for _, f := range srcFiles {
			a, b := readOrMissing(t, filepath.Join(m.Dir, "v3", src.Path, f)), readOrMissing(t, filepath.Join(m.Dir, "v3", dst.Path, f))
			if !bytes.Equal(a, b) {
				t.Errorf("after cp -r, %s/%s differs from the source", dst.Path, f)
			}
		}
	})

	v2Attrs, v3Doc := filepath.Join(m.Dir, "v2", zstd.Path, zarr.ZAttrs), filepath.Join(m.Dir, "v3", zstd.Path, zarr.ZarrJSON)
	t.Run("attributes", func(t *testing.T) {
		if err := writeRename(v2Attrs, []byte(`{"note": "from v2", "n": 1}`)); err != nil {
			t.Fatal(err)
		}
		if got := attributes(t, v3Doc); got["note"] != "from v2" || got["n"] != 1.0 {
			t.Errorf("v3 zarr.json right after writing .zattrs has attributes %v", got)
		}
		zmeta := readOrMissing(t, filepath.Join(m.Dir, "v2", zarr.ZMetadata))
		if !bytes.Contains(zmeta, []byte(`"from v2"`)) {
			t.Errorf("the v2 .zmetadata does not show the new attributes:\n%s", zmeta)
		}
		var doc map[string]any
		if err := json.Unmarshal(readOrMissing(t, v3Doc), &doc); err != nil {
			t.Fatal(err)
		}
		doc["attributes"] = map[string]any{"note": "from v3", "n": 2}
		b, _ := json.MarshalIndent(doc, "", "  ")
		if err := writeTrunc(v3Doc, b); err != nil {
			t.Fatal(err)
		}
		if got := attributes(t, v2Attrs); got["note"] != "from v3" || got["n"] != 2.0 {
			t.Errorf("v2 .zattrs right after writing zarr.json: %v", got)
		}
	})

	stop(t, m, dir)
	checkStore(t, dir)
	for _, e := range expect {
		got, ok := storedInner(t, dir, zstd, e.coords)
		switch {
		case e.bytes == nil && ok:
			t.Errorf("the store's inner chunk %v is stored; it was unlinked", e.coords)
		case e.bytes != nil && !bytes.Equal(got, e.bytes):
			t.Errorf("the store's inner chunk %v: %d bytes (stored: %v), want the %d written", e.coords, len(got), ok, len(e.bytes))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(zstd.ChunkKey([]int{0, 1})))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the shard whose chunks were all unlinked still exists (%v)", err)
	}
	if got := attributes(t, filepath.Join(dir, zstd.Path, zarr.ZarrJSON)); got["note"] != "from v3" || got["n"] != 2.0 {
		t.Errorf("the store's zarr.json has attributes %v", got)
	}
	after := openView(t, dir)
	if a, b := ownDigest(t, after, src.Path), ownDigest(t, after, dst.Path); a != b {
		t.Errorf("after cp -r the copy's content has digest %s, the source's %s", b, a)
	}
}

// keyIn is the chunk file name of the inner chunk at coords of a in a view
// (v2 keys with "."), relative to the array directory.
func keyIn(a *zarr.Array, view string, coords []int) string {
	if view == "v2" {
		return v2Keys(".").Key(coords)
	}
	return a.Keys.Key(coords)
}

// shardWatch counts, with inotify, how often a shard file is replaced by a
// rename (a rewrite) and how often it is written in place.
type shardWatch struct {
	fd   int
	name string
}

func watchShard(t *testing.T, path string) *shardWatch {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(path), unix.IN_MOVED_TO|unix.IN_MODIFY); err != nil {
		t.Fatal(err)
	}
	return &shardWatch{fd: fd, name: filepath.Base(path)}
}

// counts returns the rewrites and in-place writes of the shard seen so far.
func (w *shardWatch) counts(t *testing.T) (rewrites, inPlace int) {
	t.Helper()
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return rewrites, inPlace
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			if name == w.name {
				switch {
				case ev.Mask&unix.IN_MOVED_TO != 0:
					rewrites++
				case ev.Mask&unix.IN_MODIFY != 0:
					inPlace++
				}
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// TestWriteCoalescing: writing every inner chunk of a shard one by one
// (O_TRUNC, write, close each) rewrites the shard once; replacing stored
// uncompressed chunks patches the shard in place without rewriting it; and
// the first rewrite of a shard with dead space between its chunks packs
// it densely.
func TestWriteCoalescing(t *testing.T) {
	dir, _ := writeStore(t)
	h := openView(t, dir)
	m := mount(t, dir)
	array := func(path string) *zarr.Array {
		n, _ := h.Node(path)
		return n.Array
	}
	shardFile := func(a *zarr.Array) string { return filepath.Join(dir, filepath.FromSlash(a.ChunkKey([]int{0, 0}))) }
	// content gives, for every inner chunk of shard (0, 0), the bytes of
	// another inner chunk of the array, read through the mount first.
	content := func(a *zarr.Array, from []int) map[string][]byte {
		per := a.Sharding().Grid()
		out := map[string][]byte{}
		for local := range a.Sharding().NumChunks() {
			c := a.InnerCoords([]int{0, 0}, local)
			src := []int{from[0] + c[0]%2, from[1] + c[1]%per[1]}
			out[fmt.Sprint(c)] = readOrMissing(t, chunkPath(m.Dir, "v3", ".", a, src))
		}
		return out
	}
	writeShard := func(a *zarr.Array, chunks map[string][]byte) {
		for local := range a.Sharding().NumChunks() {
			c := a.InnerCoords([]int{0, 0}, local)
			if err := writeTrunc(chunkPath(m.Dir, "v3", ".", a, c), chunks[fmt.Sprint(c)]); err != nil {
				t.Fatal(err)
			}
		}
	}
	published := func(a *zarr.Array, chunks map[string][]byte) {
		eventually(t, "every chunk of "+a.ChunkKey([]int{0, 0})+" is in the shard", func() bool {
			for local := range a.Sharding().NumChunks() {
				c := a.InnerCoords([]int{0, 0}, local)
				if got, _ := storedInner(t, dir, a, c); !bytes.Equal(got, chunks[fmt.Sprint(c)]) {
					return false
				}
			}
			return true
		})
	}
	// quiet waits until the mount holds no unpublished write, so that a
	// second rewrite, if there were one, has happened.
	quiet := func() {
		eventually(t, "every write is published", func() bool { return readStats(t, m.Dir).Unpublished == 0 })
	}

	t.Run("one rewrite per shard", func(t *testing.T) {
		a := array("uint16_zstd_end")
		chunks := content(a, []int{4, 0})
		w := watchShard(t, shardFile(a))
		writeShard(a, chunks)
		published(a, chunks)
		quiet()
		if rewrites, inPlace := w.counts(t); rewrites != 1 || inPlace != 0 {
			t.Errorf("writing the %d inner chunks of a shard one by one rewrote it %d times and patched it %d times, want one rewrite",
				a.Sharding().NumChunks(), rewrites, inPlace)
		}
	})

	t.Run("in place", func(t *testing.T) {
		a := array("int32_raw_3d")
		// Replace the stored chunks of shard (0, 0, 0) with others of the
		// same (fixed) size.
		var stored [][]int
		for local := range a.Sharding().NumChunks() {
			c := a.InnerCoords([]int{0, 0, 0}, local)
			if _, ok := storedInner(t, dir, a, c); ok {
				stored = append(stored, c)
			}
		}
		before, err := os.Stat(filepath.Join(dir, filepath.FromSlash(a.ChunkKey([]int{0, 0, 0}))))
		if err != nil {
			t.Fatal(err)
		}
		w := watchShard(t, filepath.Join(dir, filepath.FromSlash(a.ChunkKey([]int{0, 0, 0}))))
		want := map[string][]byte{}
		for i, c := range stored {
			b := readOrMissing(t, chunkPath(m.Dir, "v3", ".", a, stored[(i+1)%len(stored)]))
			want[fmt.Sprint(c)] = b
		}
		for _, c := range stored {
			if err := writeTrunc(chunkPath(m.Dir, "v3", ".", a, c), want[fmt.Sprint(c)]); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "the patched chunks are in the shard", func() bool {
			for _, c := range stored {
				if got, _ := storedInner(t, dir, a, c); !bytes.Equal(got, want[fmt.Sprint(c)]) {
					return false
				}
			}
			return true
		})
		quiet()
		after, err := os.Stat(filepath.Join(dir, filepath.FromSlash(a.ChunkKey([]int{0, 0, 0}))))
		if err != nil {
			t.Fatal(err)
		}
		if rewrites, inPlace := w.counts(t); rewrites != 0 || inPlace == 0 || !os.SameFile(before, after) {
			t.Errorf("replacing %d stored uncompressed chunks: %d rewrites, %d in-place writes, same file: %v; want only in-place writes",
				len(stored), rewrites, inPlace, os.SameFile(before, after))
		}
	})

	t.Run("dead space", func(t *testing.T) {
		a := array("uint16_scrambled") // zarrtest.ScrambleShards left gaps between its chunks
		file := shardFile(a)
		dead := func() int64 {
			b := readOrMissing(t, file)
			ix, err := a.Sharding().ReadIndex(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			_, used := ix.Stored()
			return int64(len(b)) - used - int64(a.Sharding().IndexSize())
		}
		if dead() == 0 {
			t.Fatal("the scrambled shard has no dead space")
		}
		c := a.InnerCoords([]int{0, 0}, 1)
		b := readOrMissing(t, chunkPath(m.Dir, "v3", ".", a, a.InnerCoords([]int{0, 0}, 2)))
		if err := writeTrunc(chunkPath(m.Dir, "v3", ".", a, c), b); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the chunk is in the shard", func() bool {
			got, _ := storedInner(t, dir, a, c)
			return bytes.Equal(got, b)
		})
		if n := dead(); n != 0 {
			t.Errorf("the first rewrite of a shard with dead space left %d bytes of it", n)
		}
	})
	stop(t, m, dir)
	checkStore(t, dir)
}
