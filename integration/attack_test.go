package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr"
)

// The attack tests use the mount the way a careless or hostile user would;
// every call that returns 0 must have done what it says, every other one
// must fail with an errno that says why, and the store must hold exactly
// what the successful calls wrote, after unmounting.

// requireErrno fails the test unless err is errno.
func requireErrno(t *testing.T, what string, err error, errno syscall.Errno) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Errorf("%s: %v, want %v", what, err, errno)
	}
}

// writeFlags opens path with flags, writes data at off (with pwrite, or
// with write when off < 0) and closes it, returning the first error.
func writeFlags(path string, flags int, data []byte, off int64) error {
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return err
	}
	if off < 0 {
		_, err = f.Write(data)
	} else {
		_, err = f.WriteAt(data, off)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// TestAttackFileCalls: O_APPEND, writes at huge offsets, truncates to huge
// sizes, mmap, rmdir, extended attributes, renames across arrays and views
// and odd names, on a read-write mount. After unmounting, the store holds
// exactly what the successful calls wrote.
func TestAttackFileCalls(t *testing.T) {
	dir, _ := writeStore(t)
	copyArray(t, dir, "int16_dotkeys", "int16_copy")
	zstd, raw, other := storeArray(t, dir, "uint16_zstd_end"), storeArray(t, dir, "int16_dotkeys"), storeArray(t, dir, "int16_copy")
	before := storeFiles(t, dir)
	m := mount(t, dir)
	path := func(a *zarr.Array, view string, coords ...int) string { return chunkPath(m.Dir, view, ".", a, coords) }
	stored := readOrMissing(t, path(zstd, "v3", 1, 1))
	rawStored := readOrMissing(t, path(raw, "v3", 1, 1))
	unchanged := func(what string, a *zarr.Array, coords []int, want []byte) {
		t.Helper()
		for _, v := range views {
			if got := readOrMissing(t, path(a, v, coords...)); !bytes.Equal(got, want) {
				t.Errorf("%s: %s holds %d bytes, want the %d stored", what, path(a, v, coords...), len(got), len(want))
			}
		}
	}
	// changed lists the shard files the test changes on purpose.
	var changed []string

	t.Run("O_APPEND", func(t *testing.T) {
		for _, v := range views {
			err := writeFlags(path(zstd, v, 1, 1), os.O_WRONLY|os.O_APPEND, []byte("tail"), -1)
			requireErrno(t, "appending to a compressed chunk in "+v, err, syscall.EINVAL)
			err = writeFlags(path(raw, v, 1, 1), os.O_WRONLY|os.O_APPEND, rawStored, -1)
			requireErrno(t, "appending a chunk to an uncompressed chunk in "+v, err, syscall.EINVAL)
		}
		unchanged("after O_APPEND", zstd, []int{1, 1}, stored)
		unchanged("after O_APPEND", raw, []int{1, 1}, rawStored)
		// A temporary file written in two appends, then renamed onto a
		// chunk: the chunk holds both halves.
		tmp := filepath.Join(m.Dir, "v2", raw.Path, ".append.tmp")
		content := readOrMissing(t, path(raw, "v3", 0, 1))
		half := len(content) / 2
		if err := writeFlags(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, content[:half], -1); err != nil {
			t.Fatal(err)
		}
		if err := writeFlags(tmp, os.O_WRONLY|os.O_APPEND, content[half:], -1); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path(raw, "v2", 1, 1)); err != nil {
			t.Fatal(err)
		}
		rawStored = content
		unchanged("after renaming an appended temporary file onto it", raw, []int{1, 1}, content)
		changed = append(changed, raw.ChunkKey([]int{0, 0}))
	})

	t.Run("huge offsets", func(t *testing.T) {
		tmp := filepath.Join(m.Dir, "v2", zstd.Path, ".huge.tmp")
		for _, c := range []struct {
			what string
			err  error
		}{
			{"pwrite at 1 TiB into a chunk", writeFlags(path(zstd, "v3", 1, 1), os.O_WRONLY, []byte("x"), 1<<40)},
			{"pwrite at 2^63-2 into a chunk", writeFlags(path(zstd, "v2", 1, 1), os.O_WRONLY, []byte("x"), math.MaxInt64-2)},
			{"pwrite at 1 TiB into a temporary file", writeFlags(tmp, os.O_WRONLY|os.O_CREATE, []byte("x"), 1<<40)},
			{"truncate a chunk to 1 TB", os.Truncate(path(zstd, "v2", 1, 1), 1e12)},
			{"truncate a temporary file to 8 GiB", os.Truncate(tmp, 8<<30)},
		} {
			requireErrno(t, c.what, c.err, syscall.EFBIG)
		}
		unchanged("after writes beyond any chunk's size", zstd, []int{1, 1}, stored)
		if fi, err := os.Stat(tmp); err != nil || fi.Size() != 0 {
			t.Errorf("the temporary file after refused writes: %v, %v; want it empty", fi, err)
		}
		if n := strings.Count(m.Log(), "refused: file too large"); n < 5 {
			t.Errorf("%d log lines say a write was too large, want one per refused call:\n%s", n, m.Log())
		}
		os.Remove(tmp)
	})

	t.Run("mmap", func(t *testing.T) {
		for _, v := range views {
			want := readOrMissing(t, path(zstd, v, 1, 1))
			n := len(want)
			f, err := os.Open(path(zstd, v, 1, 1))
			if err != nil {
				t.Fatal(err)
			}
			ro, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				t.Errorf("read-only shared mapping of %s: %v", f.Name(), err)
			} else {
				if !bytes.Equal(ro, want) {
					t.Errorf("a read-only mapping of %s shows other bytes than read(2)", f.Name())
				}
				unix.Munmap(ro)
			}
			f.Close()
			// Opened for writing, a shared mapping is refused (writes are
			// validated at close, which a mapping outlives), a private
			// one is the process's own copy.
			if f, err = os.OpenFile(path(zstd, v, 1, 1), os.O_RDWR, 0); err != nil {
				t.Fatal(err)
			}
			_, err = unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
			requireErrno(t, "shared mapping of "+f.Name()+" opened for writing", err, syscall.ENODEV)
			_, err = unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			requireErrno(t, "writable shared mapping of "+f.Name(), err, syscall.ENODEV)
			private, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
			if err != nil {
				t.Errorf("private mapping of %s: %v", f.Name(), err)
			} else {
				copy(private, "junk")
				unix.Munmap(private)
			}
			if err := f.Close(); err != nil {
				t.Errorf("close of %s, opened for writing and never written: %v", f.Name(), err)
			}
		}
		unchanged("after mappings", zstd, []int{1, 1}, stored)
	})

	t.Run("directories and attributes", func(t *testing.T) {
		for _, d := range []string{
			filepath.Join(m.Dir, "v2", zstd.Path), filepath.Join(m.Dir, "v3", zstd.Path),
			filepath.Join(m.Dir, "v3", zstd.Path, "c"), filepath.Join(m.Dir, "v2", "group"),
		} {
			// Not empty: their metadata documents (and chunks) are there.
			requireErrno(t, "rmdir "+d, os.Remove(d), syscall.EEXIST)
			if _, err := os.Stat(d); err != nil {
				t.Errorf("%s after a refused rmdir: %v", d, err)
			}
		}
		for _, p := range []string{path(zstd, "v2", 1, 1), filepath.Join(m.Dir, "v2", zstd.Path)} {
			_, err := retryEINTR(func() (struct{}, error) { return struct{}{}, unix.Setxattr(p, "user.note", []byte("x"), 0) })
			requireErrno(t, "setxattr on "+p, err, syscall.ENOTSUP)
			_, err = retryEINTR(func() (struct{}, error) { return struct{}{}, unix.Removexattr(p, "user.zarr.codecs") })
			requireErrno(t, "removexattr on "+p, err, syscall.ENOTSUP)
		}
		// Modes and times are not stored: chmod and utime succeed, so
		// that cp -p and tar work, and stat shows the file as it is.
		p := path(zstd, "v2", 1, 1)
		if err := os.Chmod(p, 0o600); err != nil {
			t.Errorf("chmod: %v", err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("stat after chmod: %v, %v; want the mount's 0644", fi.Mode(), err)
		}
		unchanged("after chmod and setxattr", zstd, []int{1, 1}, stored)
	})

	t.Run("renames across arrays and views", func(t *testing.T) {
		requireErrno(t, "rename a chunk onto a chunk of another array",
			os.Rename(path(raw, "v2", 1, 0), path(other, "v2", 1, 0)), syscall.EPERM)
		requireErrno(t, "rename a chunk onto its alias in the other view",
			os.Rename(path(raw, "v2", 0, 1), path(raw, "v3", 0, 1)), syscall.EPERM)
		// An array directory moves the array, but not onto another node,
		// across views or out of the hierarchy's groups; moved away and
		// back, it is as it was.
		rawDir := filepath.Join(m.Dir, "v2", raw.Path)
		requireErrno(t, "rename an array directory onto another array",
			os.Rename(rawDir, filepath.Join(m.Dir, "v2", other.Path)), syscall.EEXIST)
		requireErrno(t, "rename an array directory into the other view",
			os.Rename(rawDir, filepath.Join(m.Dir, "v3", "renamed")), syscall.EPERM)
		requireErrno(t, "rename an array directory into another array",
			os.Rename(rawDir, filepath.Join(m.Dir, "v2", other.Path, "renamed")), syscall.EPERM)
		for _, mv := range [][2]string{{rawDir, filepath.Join(m.Dir, "v2", "renamed")}, {filepath.Join(m.Dir, "v2", "renamed"), rawDir}} {
			if err := os.Rename(mv[0], mv[1]); err != nil {
				t.Errorf("rename %s to %s: %v", mv[0], mv[1], err)
			}
		}
		// A temporary file of one array renamed onto a chunk of another
		// (both v2) becomes that chunk.
		content := readOrMissing(t, path(raw, "v2", 0, 1))
		tmp := filepath.Join(m.Dir, "v2", raw.Path, ".cross.tmp")
		if err := os.WriteFile(tmp, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path(other, "v2", 1, 0)); err != nil {
			t.Fatalf("rename a temporary file onto a chunk of another array: %v", err)
		}
		unchanged("a chunk renamed from another array's temporary file", other, []int{1, 0}, content)
		changed = append(changed, other.ChunkKey([]int{0, 0}))
		// Across views a temporary file is refused: its bytes were
		// written for the other view's codecs.
		if err := os.WriteFile(tmp, content, 0o644); err != nil {
			t.Fatal(err)
		}
		requireErrno(t, "rename a v2 temporary file onto a v3 chunk", os.Rename(tmp, path(other, "v3", 1, 1)), syscall.EPERM)
		os.Remove(tmp)
	})

	t.Run("odd names", func(t *testing.T) {
		arr := filepath.Join(m.Dir, "v2", zstd.Path)
		for _, name := range []string{"0.0\n", " 0.0", "0.0 ", "٠.0", "0.-0", "-1.0", "..x", "\x01", strings.Repeat("x", 255)} {
			p := filepath.Join(arr, name)
			if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
				t.Errorf("create %q (not a chunk key: a temporary file): %v", name, err)
				continue
			}
			if got := readOrMissing(t, p); string(got) != "abc" {
				t.Errorf("%q reads %q, want what was written", name, got)
			}
			if err := os.Remove(p); err != nil {
				t.Errorf("remove %q: %v", name, err)
			}
		}
		for _, name := range []string{"7.7", "99.99", "0.0.0", "1"} {
			requireErrno(t, "create out-of-grid chunk name "+name, os.WriteFile(filepath.Join(arr, name), stored, 0o644), syscall.EINVAL)
		}
	})

	stop(t, m, dir)
	checkStore(t, dir)
	after := storeFiles(t, dir)
	for _, key := range changed {
		delete(before, key)
		delete(after, key)
	}
	requireSameFiles(t, before, after)
	for _, c := range []struct {
		a      *zarr.Array
		coords []int
		want   []byte
	}{{raw, []int{1, 1}, rawStored}, {other, []int{1, 0}, readOrMissingStored(t, dir, raw, []int{0, 1})}} {
		if got, _ := storedInner(t, dir, c.a, c.coords); !bytes.Equal(got, c.want) {
			t.Errorf("after unmounting, %s %v holds %d bytes, want the %d renamed onto it", c.a.Path, c.coords, len(got), len(c.want))
		}
	}
}

// readOrMissingStored is storedInner without the flag.
func readOrMissingStored(t *testing.T, dir string, a *zarr.Array, coords []int) []byte {
	t.Helper()
	b, _ := storedInner(t, dir, a, coords)
	return b
}

// rewriteShard replaces the shard of a at shardCoords by one whose index
// is ix and whose file has size bytes (a hole between the chunks and the
// index at its end), keeping the first body bytes of the old shard.
func rewriteShard(t *testing.T, dir string, a *zarr.Array, shardCoords []int, body int64, ix *sharding.Index, size int64) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(a.ChunkKey(shardCoords)))
	old, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := a.Sharding().EncodeIndex(ix)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(old[:body]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(idx, size-int64(len(idx))); err != nil {
		t.Fatal(err)
	}
}

// shardIndex reads the index of the shard of a at shardCoords.
func shardIndex(t *testing.T, dir string, a *zarr.Array, shardCoords []int) (*sharding.Index, int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(a.ChunkKey(shardCoords))))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := a.Sharding().ReadIndex(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return ix, int64(len(b)) - int64(a.Sharding().IndexSize())
}

// TestAttackSparseShard: a shard of 100 GB that is a hole between its
// chunks and its index reads like the dense shard, and a write into it
// publishes a dense shard.
func TestAttackSparseShard(t *testing.T) {
	dir, _ := writeStore(t)
	a := storeArray(t, dir, "uint16_zstd_crc") // index at the end
	coords := [][]int{{0, 0}, {1, 2}, {0, 1}}
	want := map[string][]byte{}
	for _, c := range coords {
		want[fmt.Sprint(c)], _ = storedInner(t, dir, a, c)
	}
	ix, body := shardIndex(t, dir, a, []int{0, 0})
	rewriteShard(t, dir, a, []int{0, 0}, body, ix, 100<<30)
	m := mount(t, dir)
	for _, c := range coords {
		if got := readOrMissing(t, chunkPath(m.Dir, "v3", ".", a, c)); !bytes.Equal(got, want[fmt.Sprint(c)]) {
			t.Errorf("inner chunk %v of the sparse shard: %d bytes, want the %d stored", c, len(got), len(want[fmt.Sprint(c)]))
		}
	}
	content := want["[1 2]"]
	if err := writeTrunc(chunkPath(m.Dir, "v3", ".", a, []int{0, 0}), content); err != nil {
		t.Fatalf("%v\n%s", err, m.Log())
	}
	stop(t, m, dir)
	fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(a.ChunkKey([]int{0, 0}))))
	if err != nil || fi.Size() > 1<<20 {
		t.Fatalf("the shard after a write into it: %v, %v; want a dense shard", fi.Size(), err)
	}
	checkStore(t, dir)
	if got, _ := storedInner(t, dir, a, []int{0, 0}); !bytes.Equal(got, content) {
		t.Error("the written chunk is not in the rewritten shard")
	}
	for _, c := range coords[1:] {
		if got, _ := storedInner(t, dir, a, c); !bytes.Equal(got, want[fmt.Sprint(c)]) {
			t.Errorf("inner chunk %v changed when another chunk of its sparse shard was written", c)
		}
	}
}

// hostileDocs are array metadata documents no store should hold, by name,
// with what the log must say about each.
var hostileDocs = map[string]struct{ doc, reason string }{
	"grid_overflow":  {arrayDoc(`[9223372036854775807, 9223372036854775807]`, `[2, 2]`, `[1, 1]`), "more than 2^63 chunks"},
	"chunk_overflow": {arrayDoc(`[`+strings.Repeat("2, ", 63)+`2]`, `[`+strings.Repeat("2, ", 63)+`2]`, `[`+strings.Repeat("1, ", 63)+`1]`), "more than 2^63 elements"},
	"huge_index":     {arrayDoc(`[68719476736]`, `[68719476736]`, `[1]`), "an index larger than"},
	"negative":       {arrayDoc(`[-4, 4]`, `[2, 2]`, `[1, 1]`), "is negative"},
	"zero_chunk":     {arrayDoc(`[4, 4]`, `[0, 2]`, `[1, 1]`), "is not positive"},
	"fraction":       {arrayDoc(`[4.5, 4]`, `[2, 2]`, `[1, 1]`), "is not an integer"},
	"inner_too_big":  {arrayDoc(`[4, 4]`, `[2, 2]`, `[4, 4]`), "does not divide"},
	"rank_mismatch":  {arrayDoc(`[4, 4]`, `[2]`, `[1]`), "dimensions"},
}

// arrayDoc is the zarr.json of a sharded uint8 array.
func arrayDoc(shape, shard, inner string) string {
	return `{"zarr_format": 3, "node_type": "array", "shape": ` + shape + `, "data_type": "uint8",
  "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": ` + shard + `}},
  "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
  "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": ` + inner + `,
    "codecs": [{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}],
    "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]}`
}

// TestAttackHostileStore mounts (read-only) a store holding symbolic links
// out of it (a shard, an array directory, a zarr.json), index entries past
// the end of their shard or wrapping around, an inner chunk of 100 GB in a
// sparse shard, a 100 GB zarr.json and arrays with absurd shapes. Each
// broken key gets EIO (or is left out of the views) and a log line naming
// it and the reason (the 100 GB chunk cannot be read whole, so its
// checksum cannot be verified: it gives EIO); everything else reads as stored; the daemon's memory
// stays small; zarrfs check names each broken key and exits 1, zarrfs info
// each broken node.
func TestAttackHostileStore(t *testing.T) {
	dir, _ := writeStore(t)
	outside := t.TempDir()
	zstd, gzip, crc := storeArray(t, dir, "uint16_zstd_end"), storeArray(t, dir, "uint16_scrambled"), storeArray(t, dir, "uint16_zstd_crc")
	// The chunks of the arrays damaged below, as stored before.
	intact := scanStore(t, dir)
	// Broken keys and what the log must say about each.
	broken := map[string]string{}

	// A shard that is a link to a copy of itself outside the store.
	linkedShard := zstd.ChunkKey([]int{0, 0})
	linkOut(t, dir, linkedShard, outside)
	broken[linkedShard] = "leads out of the store"
	// An array directory and an array's zarr.json linked out of the store.
	copyArray(t, dir, "int16_dotkeys", "escaped")
	linkOut(t, dir, "escaped", outside)
	broken["escaped"] = "leads out of the store"
	copyArray(t, dir, "int16_dotkeys", "doc_escaped")
	linkOut(t, dir, "doc_escaped/zarr.json", outside)
	broken["doc_escaped"] = "leads out of the store"

	// Index entries past the end and wrapping around int64.
	for i, entry := range [][2]int64{{1 << 40, 16}, {math.MaxInt64 - 8, 64}} {
		c := []int{i, 0}
		ix, body := shardIndex(t, dir, gzip, c)
		ix.Set(1, entry[0], entry[1])
		rewriteShard(t, dir, gzip, c, body, ix, body+int64(gzip.Sharding().IndexSize()))
		broken[gzip.ChunkKey(c)] = "beyond the shard"
	}
	// An inner chunk of 100 GB: a hole in a sparse shard.
	ix := sharding.NewIndex(crc.Sharding().NumChunks())
	ix.Set(0, 0, 100<<30)
	rewriteShard(t, dir, crc, []int{0, 0}, 0, ix, 100<<30+int64(crc.Sharding().IndexSize()))
	bigChunk := crc.ChunkKey([]int{0, 0})
	broken[bigChunk] = "more than any chunk of this array encodes to"
	// A zarr.json of 100 GB.
	copyArray(t, dir, "int16_dotkeys", "huge_doc")
	if err := os.Truncate(filepath.Join(dir, "huge_doc", zarr.ZarrJSON), 100<<30); err != nil {
		t.Fatal(err)
	}
	broken["huge_doc"] = "too large"
	for name, h := range hostileDocs {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, zarr.ZarrJSON), []byte(h.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		broken[name] = h.reason
	}
	outsideBefore := storeFiles(t, outside)
	before := storeFiles(t, dir)

	m := mount(t, dir, "--ro")
	for _, name := range []string{"escaped", "doc_escaped", "huge_doc"} {
		for _, v := range views {
			if _, err := os.Stat(filepath.Join(m.Dir, v, name)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s/%s: %v, want it left out", v, name, err)
			}
		}
	}
	for name := range hostileDocs {
		if _, err := os.Stat(filepath.Join(m.Dir, "v3", name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("v3/%s: %v, want it left out", name, err)
		}
	}
	// Every chunk of the linked shard and of the shards with bad entries
	// gives EIO; the 100 GB chunk is listed with its size but cannot be
	// read whole (its checksum cannot be verified); every other chunk of
	// those arrays reads as stored.
	var eio, served int
	for _, sa := range intact.arrays {
		for _, c := range sa.chunks {
			if sa.path() != zstd.Path && sa.path() != gzip.Path && sa.path() != crc.Path {
				continue
			}
			_, shardBroken := broken[c.shard]
			p := filepath.Join(m.Dir, "v3", sa.path(), sa.keys("v3", ".").Key(c.coords))
			got, err := os.ReadFile(p)
			switch {
			case shardBroken && c.shard != bigChunk:
				requireErrno(t, "read "+p, err, syscall.EIO)
				eio++
			case c.shard == bigChunk:
				continue // the rewritten shard holds only the chunk below
			case err != nil:
				t.Errorf("read %s: %v", p, err)
			case !bytes.Equal(got, intact.shardBytes(t, c)):
				t.Errorf("read %s: other bytes than stored", p)
			default:
				served++
			}
		}
	}
	for _, v := range views {
		p := chunkPath(m.Dir, v, ".", crc, []int{0, 0})
		f, err := os.Open(p) // read-only mounts answer OPEN once, for all files
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.ReadAt(make([]byte, 4096), 0)
		f.Close()
		requireErrno(t, "read of the 100 GB chunk "+p, err, syscall.EIO)
		eio++
	}
	t.Logf("%d reads of broken chunks gave EIO, %d others their bytes", eio, served)
	for key, reason := range broken {
		lines := regexp.MustCompile(`(?m)^.* key="?`+regexp.QuoteMeta(key)+`"?( .*)?$`).FindAllString(m.Log(), -1)
		if len(lines) != 1 || !strings.Contains(lines[0], reason) {
			t.Errorf("%s: the log has %d lines naming it, want one saying %q", key, len(lines), reason)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", m.Log())
	}
	if rss := daemonRSS(t, m.Pid()); rss > 1<<30 {
		t.Errorf("the daemon uses %d MiB after the hostile store, want far less", rss>>20)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	requireSameFiles(t, before, storeFiles(t, dir))
	requireSameFiles(t, outsideBefore, storeFiles(t, outside))

	for _, cmd := range []string{"check", "info"} {
		out, err := exec.Command(zarrfsBin, cmd, dir).CombinedOutput()
		if cmd == "check" && !isExit(err, 1) || cmd == "info" && err != nil {
			t.Errorf("zarrfs %s of the hostile store: %v\n%s", cmd, err, out)
		}
		for key := range broken {
			if cmd == "info" && strings.Contains(key, "/c/") {
				continue // info counts broken shards; check names them
			}
			if !bytes.Contains(out, []byte(key)) {
				t.Errorf("zarrfs %s does not name %s:\n%s", cmd, key, out)
			}
		}
	}
}

// linkOut moves the file or directory at key of the store at dir into
// outside and leaves a symbolic link to it in its place.
func linkOut(t *testing.T, dir, key, outside string) {
	t.Helper()
	from := filepath.Join(dir, filepath.FromSlash(key))
	to := filepath.Join(outside, strings.ReplaceAll(key, "/", "_"))
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(to, from); err != nil {
		t.Fatal(err)
	}
}

// daemonRSS is the peak resident memory of process pid, in bytes.
func daemonRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status := fmt.Sprintf("/proc/%d/status", pid)
	if _, err := os.Stat(status); err != nil {
		t.Fatal(err)
	}
	return vmHWM(status)
}

// vmHWM is the peak RSS a /proc/PID/status file gives, 0 when it cannot
// be read (the process is gone).
func vmHWM(status string) int64 {
	b, _ := os.ReadFile(status)
	var kb int64
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
		}
	}
	return kb << 10
}
