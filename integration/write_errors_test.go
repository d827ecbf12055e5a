package integration_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
)

// chunkPath is the file of the inner chunk at coords of a in a view of the
// mount at mnt; sep is the mount's --v2-separator.
func chunkPath(mnt, view, sep string, a *zarr.Array, coords []int) string {
	keys := a.Keys
	if view == "v2" {
		keys = v2Keys(sep)
	}
	return filepath.Join(mnt, view, filepath.FromSlash(a.Path), filepath.FromSlash(keys.Key(coords)))
}

// writeTrunc writes a file as `cat >` does: open with O_TRUNC (creating it),
// write, close. The close's error is the commit's.
func writeTrunc(path string, data []byte) error { return os.WriteFile(path, data, 0o644) }

// writeRename writes a temporary file beside path and renames it onto
// path, as zarr-python 2's DirectoryStore does. A temporary file a failed
// rename leaves is removed.
func writeRename(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	err := os.Rename(tmp, path)
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

var writeMethods = []struct {
	name  string
	write func(path string, data []byte) error
}{{"O_TRUNC", writeTrunc}, {"rename", writeRename}}

// readOrMissing reads a file, returning nil when it does not exist.
func readOrMissing(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWriteRejected writes bytes that are not one inner chunk of the array
// into chunk files of every kind of layout, by O_TRUNC and by rename, onto
// stored chunks and missing ones: garbage, nothing, truncated compressed
// chunks, compressed chunks of the wrong size, uncompressed chunks of the
// wrong size and a wrong crc32c. Each write must fail with EINVAL (on
// close, or on rename) and leave the file as it was in both views.
// Structural metadata edits must fail with EPERM, malformed documents with
// EINVAL. Throughout, and after unmounting, every file of the store must be
// byte for byte unchanged.
func TestWriteRejected(t *testing.T) {
	dir, _ := writeStore(t)
	h := openView(t, dir)
	before := storeFiles(t, dir)
	m := mount(t, dir)
	array := func(path string) *zarr.Array {
		n, ok := h.Node(path)
		if !ok || n.Array == nil {
			t.Fatalf("no array %s", path)
		}
		return n.Array
	}
	read := func(a *zarr.Array, view string, coords []int) []byte {
		return readOrMissing(t, chunkPath(m.Dir, view, ".", a, coords))
	}
	zstdEnd, raw, crc, nested, gzip := array("uint16_zstd_end"), array("int16_dotkeys"), array("uint16_zstd_crc"), array("bool_nested"), array("int32_gzip_start_nocrc")
	stored, missing := []int{1, 1}, []int{0, 0} // Pattern leaves the first inner chunk empty
	truncated := func(b []byte) []byte { return b[:len(b)-len(b)/4] }
	garbage := bytes.Repeat([]byte("not a chunk! "), 9)
	// A valid zstd frame that decodes to 40 bytes, where 64 are due.
	otherSize := read(crc, "v2", stored)
	badCRC := bytes.Clone(read(crc, "v3", stored))
	badCRC[len(badCRC)-1] ^= 0xff
	rawChunk := read(raw, "v3", stored)
	cases := []struct {
		name  string
		a     *zarr.Array
		view  string
		bytes []byte
	}{
		{"zstd garbage", zstdEnd, "v3", garbage},
		{"zstd empty", zstdEnd, "v3", nil},
		{"zstd truncated", zstdEnd, "v3", truncated(read(zstdEnd, "v3", stored))},
		{"zstd wrong size", zstdEnd, "v2", otherSize},
		{"raw short", raw, "v3", rawChunk[:len(rawChunk)-2]},
		{"raw long", raw, "v2", append(bytes.Clone(rawChunk), 0, 0)},
		{"raw empty", raw, "v2", nil},
		{"crc32c mismatch", crc, "v3", badCRC},
		{"crc32c dropped, truncated", crc, "v2", truncated(read(crc, "v2", stored))},
		{"transcoded garbage", nested, "v2", garbage},
		{"transcoded truncated", nested, "v2", truncated(read(nested, "v2", stored))},
		{"gzip truncated", gzip, "v3", truncated(read(gzip, "v3", stored))},
	}
	for _, c := range cases {
		for _, method := range writeMethods {
			for _, coords := range [][]int{stored, missing} {
				path := chunkPath(m.Dir, c.view, ".", c.a, coords)
				v3, v2 := read(c.a, "v3", coords), read(c.a, "v2", coords)
				err := method.write(path, c.bytes)
				if !errors.Is(err, syscall.EINVAL) {
					t.Errorf("%s by %s onto %s: %v, want EINVAL", c.name, method.name, path, err)
				}
				if got := read(c.a, "v3", coords); !bytes.Equal(got, v3) {
					t.Errorf("%s by %s onto %s: the v3 file changed (%d bytes, was %d)", c.name, method.name, path, len(got), len(v3))
				}
				if got := read(c.a, "v2", coords); !bytes.Equal(got, v2) {
					t.Errorf("%s by %s onto %s: the v2 file changed (%d bytes, was %d)", c.name, method.name, path, len(got), len(v2))
				}
			}
		}
	}

	v2Array, v3Array := filepath.Join(m.Dir, "v2", zstdEnd.Path), filepath.Join(m.Dir, "v3", zstdEnd.Path)
	zarrJSON := readOrMissing(t, filepath.Join(v3Array, zarr.ZarrJSON))
	var doc map[string]any
	if err := json.Unmarshal(zarrJSON, &doc); err != nil {
		t.Fatal(err)
	}
	doc["data_type"] = "float64" // only the shape (a resize) and attributes may change
	retyped, _ := json.Marshal(doc)
	metadata := []struct {
		name string
		op   func() error
		want syscall.Errno
	}{
		{".zarray by O_TRUNC", func() error { return writeTrunc(filepath.Join(v2Array, zarr.ZArray), []byte("{}")) }, syscall.EINVAL},
		{".zarray by rename", func() error { return writeRename(filepath.Join(v2Array, zarr.ZArray), []byte("{}")) }, syscall.EINVAL},
		{".zgroup of another format", func() error { return writeTrunc(filepath.Join(m.Dir, "v2", zarr.ZGroup), []byte(`{"zarr_format":3}`)) }, syscall.EINVAL},
		{".zgroup written again as it is", func() error { return writeTrunc(filepath.Join(m.Dir, "v2", zarr.ZGroup), []byte(`{"zarr_format":2}`)) }, 0},
		{".zmetadata that is not consolidated metadata", func() error { return writeTrunc(filepath.Join(m.Dir, "v2", zarr.ZMetadata), []byte("{}")) }, syscall.EINVAL},
		{"zarr.json with another data type", func() error { return writeTrunc(filepath.Join(v3Array, zarr.ZarrJSON), retyped) }, syscall.EPERM},
		{"zarr.json malformed", func() error { return writeTrunc(filepath.Join(v3Array, zarr.ZarrJSON), zarrJSON[:10]) }, syscall.EINVAL},
		{".zattrs not an object", func() error { return writeRename(filepath.Join(v2Array, zarr.ZAttrs), []byte("[1, 2]")) }, syscall.EINVAL},
		{"unlink the root's .zgroup", func() error { return os.Remove(filepath.Join(m.Dir, "v2", zarr.ZGroup)) }, syscall.EPERM},
		{"rename a chunk", func() error {
			return os.Rename(chunkPath(m.Dir, "v3", ".", zstdEnd, stored), chunkPath(m.Dir, "v3", ".", zstdEnd, []int{1, 2}))
		}, syscall.EPERM},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(v2Array, "new"), 0o755) }, syscall.EPERM},
	}
	for _, c := range metadata {
		if err := c.op(); c.want == 0 && err != nil || c.want != 0 && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if got := readOrMissing(t, filepath.Join(v3Array, zarr.ZarrJSON)); !bytes.Equal(got, zarrJSON) {
		t.Errorf("the array's zarr.json changed in the v3 view:\n%s", got)
	}
	requireSameFiles(t, before, storeFiles(t, dir))
	if !strings.Contains(m.Log(), "write refused") || !strings.Contains(m.Log(), "metadata edit refused") {
		t.Errorf("the log does not say why writes were refused:\n%s", m.Log())
	}
	stop(t, m, dir)
	requireSameFiles(t, before, storeFiles(t, dir))
	checkStore(t, dir)
}

// TestWriteRefusedHandleOpen: a write handle whose content close refused
// stays open while another descriptor of it does (and, after the last
// close, until the kernel releases it, which it does asynchronously). Stat
// by path meanwhile must show the chunk as it is stored, not the refused
// bytes: go-fuse answers such a stat through any open handle of the file.
func TestWriteRefusedHandleOpen(t *testing.T) {
	dir, _ := writeStore(t)
	a := storeArray(t, dir, "int32_gzip_start_nocrc")
	m := mount(t, dir)
	for _, view := range []string{"v3", "v2"} {
		path := chunkPath(m.Dir, view, ".", a, []int{1, 1})
		stored := readOrMissing(t, path)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		dup, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("not a gzip stream")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: close of refused bytes: %v, want EINVAL", path, err)
		}
		if fi, err := os.Stat(path); err != nil {
			t.Errorf("%s: stat while the refused handle is open: %v", path, err)
		} else if fi.Size() != int64(len(stored)) {
			t.Errorf("%s: stat while the refused handle is open: size %d, want the stored %d", path, fi.Size(), len(stored))
		}
		if got := readOrMissing(t, path); !bytes.Equal(got, stored) {
			t.Errorf("%s: reads %d bytes while the refused handle is open, want the %d stored", path, len(got), len(stored))
		}
		syscall.Close(dup) // fails again: the same refused content
	}
}

// TestWriteReadOnly: on a --ro mount every kind of write fails with EROFS
// and the store is unchanged.
func TestWriteReadOnly(t *testing.T) {
	dir, _ := writeStore(t)
	a := storeArray(t, dir, "uint16_zstd_end")
	before := storeFiles(t, dir)
	m := mount(t, dir, "--ro")
	chunk := chunkPath(m.Dir, "v3", ".", a, []int{1, 1})
	content := readOrMissing(t, chunk)
	ops := []struct {
		name string
		op   func() error
	}{
		{"O_TRUNC a chunk", func() error { return writeTrunc(chunk, content) }},
		{"open a chunk for writing", func() error {
			f, err := os.OpenFile(chunkPath(m.Dir, "v2", ".", a, []int{1, 1}), os.O_WRONLY, 0)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"create a chunk", func() error { return writeTrunc(chunkPath(m.Dir, "v3", ".", a, []int{0, 0}), content) }},
		{"create a temporary file", func() error { return writeTrunc(filepath.Join(m.Dir, "v2", a.Path, ".tmp"), content) }},
		{"unlink a chunk", func() error { return os.Remove(chunk) }},
		{"rename a chunk", func() error { return os.Rename(chunk, chunkPath(m.Dir, "v3", ".", a, []int{0, 0})) }},
		{"truncate a chunk", func() error { return os.Truncate(chunk, 0) }},
		{"write .zattrs", func() error { return writeTrunc(filepath.Join(m.Dir, "v2", a.Path, zarr.ZAttrs), []byte("{}")) }},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(m.Dir, "v3", "new"), 0o755) }},
	}
	for _, c := range ops {
		if err := c.op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s on a --ro mount: %v, want EROFS", c.name, err)
		}
	}
	stop(t, m, dir)
	requireSameFiles(t, before, storeFiles(t, dir))
}
