package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// readdirDirs are directories of a mount of writeWideStore, from the
// root down to chunk key directories; v2/wide has 1502 entries, more than
// a dozen getdents(2) calls return.
var readdirDirs = []string{"", "v3", "v2", "v2/wide", "v3/wide", "v3/wide/c", "v3/wide/c/7"}

// TestReadDir lists directories of a read-only mount the ways programs do:
// getdents twice (as go-fuse's posixtest.ReadDirConsistency), os.File.ReadDir
// in small batches then again after Seek(0, 0), and (a port of
// posixtest.DirSeek, which needs to create files) seeking to the offset of
// every entry, both when the kernel has cached the listing and when the
// seeks reach zarrfs on a fresh mount.
func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	writeWideStore(t, dir)
	m := mount(t, dir, "--ro")
	listings := map[string][]fuse.DirEntry{}
	for _, rel := range readdirDirs {
		path := filepath.Join(m.Dir, rel)
		t.Run("consistency/"+rel, func(t *testing.T) { readDirConsistency(t, path) })
		t.Run("batches/"+rel, func(t *testing.T) { readDirBatches(t, path) })
		t.Run("seek-cached/"+rel, func(t *testing.T) {
			fd := openDir(t, path)
			all := readDirents(t, fd)
			listings[rel] = all
			seekEntries(t, fd, all, 1)
		})
	}
	if n := len(listings["v2/wide"]); n < 1500 {
		t.Fatalf("v2/wide lists %d entries, want more than 1500", n)
	}
	fresh := mount(t, dir, "--ro")
	for _, rel := range readdirDirs {
		t.Run("seek-uncached/"+rel, func(t *testing.T) {
			// Every 50th entry, as each seek restarts the listing in zarrfs.
			seekEntries(t, openDir(t, filepath.Join(fresh.Dir, rel)), listings[rel], 50)
		})
	}
}

func openDir(t *testing.T, path string) int {
	t.Helper()
	fd, err := retryEINTR(func() (int, error) { return syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY, 0) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	return fd
}

// retryEINTR calls a system call again when it was interrupted, as Go's os
// package and Python (PEP 475) do: zarrfs answers a FUSE interrupt with
// EINTR, and the kernel interrupts a request of this test process for any
// signal it handles, such as SIGCHLD from a daemon another test stopped.
func retryEINTR[T any](call func() (T, error)) (T, error) {
	for range 100 {
		v, err := call()
		if err != syscall.EINTR {
			return v, err
		}
	}
	return call()
}

// readDirConsistency lists a directory twice with getdents(2), as go-fuse's
// posixtest.ReadDirConsistency does (which gives up on EINTR): both give
// the same entries.
func readDirConsistency(t *testing.T, path string) {
	first := readDirents(t, openDir(t, path))
	if second := readDirents(t, openDir(t, path)); !reflect.DeepEqual(first, second) {
		t.Errorf("%s: listed %d entries, then %d different ones", path, len(first), len(second))
	}
}

// seekEntries seeks fd to the offset before every step-th entry of all,
// from the last to the first, and checks that getdents returns that entry.
func seekEntries(t *testing.T, fd int, all []fuse.DirEntry, step int) {
	t.Helper()
	buf := make([]byte, 4096)
	for i := len(all) - 1; i >= 0; i -= step {
		var off int64
		if i > 0 {
			off = int64(all[i-1].Off)
		}
		if _, err := syscall.Seek(fd, off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		n, err := retryEINTR(func() (int, error) { return syscall.ReadDirent(fd, buf) })
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Errorf("getdents at offset %d (entry %d) returned nothing", off, i)
			continue
		}
		var de fuse.DirEntry
		de.Parse(buf[:n])
		if !reflect.DeepEqual(de, all[i]) {
			t.Errorf("entry %d after seeking to %d: %v, want %v", i, off, de, all[i])
		}
	}
}

// readDirBatches reads a directory seven entries at a time, then again
// whole after rewinding: both give the same entries, in the same order.
func readDirBatches(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var batched []string
	for {
		batch, err := f.ReadDir(7)
		for _, e := range batch {
			batched = append(batched, e.Name())
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(batched, names) {
		t.Errorf("in batches of 7: %d entries %v...; after Seek(0, 0): %d entries %v...",
			len(batched), batched[:min(5, len(batched))], len(names), names[:min(5, len(names))])
	}
}

// writeWideStore writes an array "wide" of 30x50 inner chunks in 6 shards,
// every one stored.
func writeWideStore(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	if err := zarr.CreateGroup(ctx, s, "", 3, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	a, err := zarr.CreateArrayV3(ctx, s, "wide", &meta.ArrayV3{
		Shape: []int{60, 100}, DataType: dtype.TypeUint8, ChunkShape: []int{20, 50}, FillValue: []byte{0},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
		Codecs:      zarr.ShardedCodecs([]int{2, 2}, []meta.Codec{zarrtest.C("bytes", "")}),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &codec.Chunk{Shape: a.Shape, Type: a.Type, Data: make([]byte, 60*100)}
	for i := range c.Data {
		c.Data[i] = byte(i%250 + 1)
	}
	if err := a.Write(ctx, c); err != nil {
		t.Fatal(err)
	}
}
