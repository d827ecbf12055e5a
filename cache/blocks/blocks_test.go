package blocks_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/zarrfs/zarrfs/cache"
	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/cache/diskcache"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// object writes an object of 2.5 blocks of random bytes to a directory
// store and returns the store, the object and its bytes.
func object(t *testing.T) (*store.Dir, blocks.Object, []byte) {
	t.Helper()
	dir := t.TempDir()
	b := make([]byte, 2*blocks.Size+blocks.Size/2)
	rand.NewChaCha8([32]byte{1}).Read(b)
	if err := os.WriteFile(filepath.Join(dir, "shard"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := store.OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	info, err := s.Stat(t.Context(), "shard")
	if err != nil {
		t.Fatal(err)
	}
	return s, blocks.Object{Store: s.String(), Key: "shard", Gen: info.Generation, Size: info.Size}, b
}

// reader reads s through a memory LRU and the disk cache in cacheDir
// (none when empty), counting the requests to s.
func reader(t *testing.T, s store.Store, cacheDir string) (*blocks.Reader, *atomic.Int32) {
	t.Helper()
	var requests atomic.Int32
	r := &blocks.Reader{Memory: cache.New(64 << 20), Origin: func(ctx context.Context, o blocks.Object, p []byte, off int64) error {
		requests.Add(1)
		return s.ReadAt(ctx, o.Key, o.Gen, p, off)
	}}
	if cacheDir != "" {
		dc, err := diskcache.Open(cacheDir, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		r.Disk = dc
	}
	return r, &requests
}

func read(t *testing.T, r *blocks.Reader, o blocks.Object, want []byte, off, n int64, checks blocks.Checks) {
	t.Helper()
	got, err := r.Read(t.Context(), o, off, n, checks)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[off:off+n]) {
		t.Fatalf("bytes %d+%d are not the object's", off, n)
	}
}

// TestReadByBlocks: reads of ranges fetch whole blocks, adjacent missing
// ones with one request; a range next to one read before finds the block
// they share in memory; and a reader with another memory but the same
// disk cache reads ranges other than those read before without a request,
// as the blocks' keys do not depend on the ranges read.
func TestReadByBlocks(t *testing.T) {
	s, o, want := object(t)
	cacheDir := t.TempDir()
	r, requests := reader(t, s, cacheDir)
	read(t, r, o, want, 100, 3<<20, blocks.Checks{})
	if n := requests.Load(); n != 1 {
		t.Fatalf("a range inside block 0: %d requests, want 1", n)
	}
	read(t, r, o, want, blocks.Size-1<<20, 2<<20, blocks.Checks{}) // across blocks 0 and 1
	if n := requests.Load(); n != 2 {
		t.Fatalf("a range across blocks 0 and 1 after one in block 0: %d requests in all, want 2", n)
	}
	other, requests2 := reader(t, s, cacheDir)
	read(t, other, o, want, 5<<20, 6<<20, blocks.Checks{})
	if n := requests2.Load(); n != 0 {
		t.Fatalf("blocks on disk: %d requests, want none", n)
	}
	cold, requests3 := reader(t, s, t.TempDir())
	read(t, cold, o, want, 1, o.Size-2, blocks.Checks{})
	if n := requests3.Load(); n != 1 {
		t.Fatalf("three adjacent missing blocks: %d requests, want 1", n)
	}
}

// TestReadWithoutSharing: a reader without a disk cache or peers fetches
// just the bytes asked for, with one request each time: nothing would
// share the rest of a block.
func TestReadWithoutSharing(t *testing.T) {
	s, o, want := object(t)
	r, requests := reader(t, s, "")
	var fetched atomic.Int64
	origin := r.Origin
	r.Origin = func(ctx context.Context, o blocks.Object, p []byte, off int64) error {
		fetched.Add(int64(len(p)))
		return origin(ctx, o, p, off)
	}
	read(t, r, o, want, blocks.Size-10, 20, blocks.Checks{})
	read(t, r, o, want, blocks.Size+10, 20, blocks.Checks{})
	if n, b := requests.Load(), fetched.Load(); n != 2 || b != 40 {
		t.Fatalf("two ranges of 20 bytes: %d requests for %d bytes, want 2 for 40", n, b)
	}
}

// TestReadChecksDisk: a block on disk whose bytes fail the range's check
// (planted under its key with the right length) is read from the store
// instead, and replaced on disk.
func TestReadChecksDisk(t *testing.T) {
	s, o, want := object(t)
	cacheDir := t.TempDir()
	dc, err := diskcache.Open(cacheDir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	dc.Put(o.BlockKey(1), bytes.Repeat([]byte{0xAA}, blocks.Size))
	r, requests := reader(t, s, cacheDir)
	off, n := int64(blocks.Size+10), int64(100)
	checks := blocks.Checks{Span: func(b []byte) error {
		if !bytes.Equal(b, want[off:off+n]) {
			return errors.New("not the object's bytes")
		}
		return nil
	}}
	read(t, r, o, want, off, n, checks)
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d requests, want 1: the planted block was served", n)
	}
	again, requests2 := reader(t, s, cacheDir)
	read(t, again, o, want, off, n, checks)
	if n := requests2.Load(); n != 0 {
		t.Fatalf("%d requests, want 0: the block read from the store did not replace the planted one", n)
	}
}

// TestKeys: a key names the store, object, generation, size and block,
// and one that names no block of its object is refused, as is a peer's
// request for a block of another store.
func TestKeys(t *testing.T) {
	s, o, want := object(t)
	for i := range o.Blocks() {
		k := o.BlockKey(i)
		got, j, err := blocks.ParseKey(k)
		if err != nil || got != o || j != i {
			t.Errorf("ParseKey(%q) = %v, %d, %v", k, got, j, err)
		}
		b, err := blocks.Load(t.Context(), s, k)
		off, n := o.Block(i)
		if err != nil || !bytes.Equal(b, want[off:off+n]) {
			t.Errorf("Load block %d: %v; not the object's bytes", i, err)
		}
	}
	if o.BlockKey(0) == (blocks.Object{Store: o.Store, Key: o.Key, Gen: "other", Size: o.Size}).BlockKey(0) {
		t.Error("two generations share a key")
	}
	for _, k := range []string{
		o.BlockKey(o.Blocks()),
		o.BlockKey(-1),
		(blocks.Object{Store: o.Store, Key: o.Key, Gen: o.Gen}).BlockKey(0),
		"block.1\x00" + o.Store + "\x00shard\x00g\x00x\x000",
		"block.0\x00" + o.Store + "\x00shard\x00g\x001\x000",
		"range\x00" + o.Store + "\x00shard\x00g\x000\x001",
	} {
		if _, _, err := blocks.ParseKey(k); err == nil {
			t.Errorf("ParseKey(%q) accepted a key that names no block", k)
		}
		if _, err := blocks.Load(t.Context(), s, k); err == nil {
			t.Errorf("Load(%q) loaded a key that names no block", k)
		}
	}
	foreign := blocks.Object{Store: "/elsewhere", Key: o.Key, Gen: o.Gen, Size: o.Size}.BlockKey(0)
	if _, err := blocks.Load(t.Context(), s, foreign); err == nil {
		t.Error("Load read a block of another store")
	}
}
