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

// counted reads ranges of a store, counting the requests.
type counted struct {
	store.RangeReader
	requests atomic.Int32
}

func (c *counted) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	c.requests.Add(1)
	return c.RangeReader.ReadAt(ctx, key, gen, p, off)
}

// origin is the Origin tier of s, counting its requests.
func origin(s store.Store) (blocks.Origin, *counted) {
	c := &counted{RangeReader: s}
	return blocks.Origin{Name: s.String(), Store: c}, c
}

// errBlock: bytes that are not the block's.
var errBlock = errors.New("not the block's bytes")

// openDisk opens a disk cache in dir.
func openDisk(t *testing.T, dir string) *diskcache.Cache {
	t.Helper()
	dc, err := diskcache.Open(dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// stack reads s through a memory LRU and the disk cache in cacheDir,
// counting the requests to s.
func stack(t *testing.T, s store.Store, cacheDir string) (blocks.Source, *counted) {
	t.Helper()
	o, c := origin(s)
	return &blocks.Memory{Cache: cache.New(64 << 20), Next: &blocks.Disk{Cache: openDisk(t, cacheDir), Next: o}}, c
}

func read(t *testing.T, src blocks.Source, o blocks.Object, want []byte, off, n int64, checks blocks.Checks) {
	t.Helper()
	got, err := blocks.Read(t.Context(), src, o, off, n, checks)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[off:off+n]) {
		t.Fatalf("bytes %d+%d are not the object's", off, n)
	}
}

// spanIs checks that a read of n bytes at off returns the object's.
func spanIs(want []byte, off, n int64) blocks.Checks {
	return blocks.Checks{Span: func(b []byte) error {
		if !bytes.Equal(b, want[off:off+n]) {
			return errors.New("not the object's bytes")
		}
		return nil
	}}
}

// TestReadByBlocks: through a stack of memory, disk and store, reads of
// ranges fetch whole blocks, adjacent missing ones with one request; a
// range next to one read before finds the block they share in memory; and
// a stack with another memory but the same disk cache reads ranges other
// than those read before without a request, as the blocks' keys do not
// depend on the ranges read.
func TestReadByBlocks(t *testing.T) {
	s, o, want := object(t)
	cacheDir := t.TempDir()
	src, c := stack(t, s, cacheDir)
	read(t, src, o, want, 100, 3<<20, blocks.Checks{})
	if n := c.requests.Load(); n != 1 {
		t.Fatalf("a range inside block 0: %d requests, want 1", n)
	}
	read(t, src, o, want, blocks.Size-1<<20, 2<<20, blocks.Checks{}) // across blocks 0 and 1
	if n := c.requests.Load(); n != 2 {
		t.Fatalf("a range across blocks 0 and 1 after one in block 0: %d requests in all, want 2", n)
	}
	other, c2 := stack(t, s, cacheDir)
	read(t, other, o, want, 5<<20, 6<<20, blocks.Checks{})
	if n := c2.requests.Load(); n != 0 {
		t.Fatalf("blocks on disk: %d requests, want none", n)
	}
	cold, c3 := stack(t, s, t.TempDir())
	read(t, cold, o, want, 1, o.Size-2, blocks.Checks{})
	if n := c3.requests.Load(); n != 1 {
		t.Fatalf("three adjacent missing blocks: %d requests, want 1", n)
	}
}

// TestOrigin: the store tier reads each run of adjacent blocks with one
// request, its blocks are trusted, and it refuses blocks of another store
// or past the object's end before any request.
func TestOrigin(t *testing.T) {
	s, o, want := object(t)
	src, c := origin(s)
	got, err := src.Blocks(t.Context(), o, []int64{0, 2}, blocks.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if n := c.requests.Load(); n != 2 {
		t.Errorf("blocks 0 and 2: %d requests, want 2", n)
	}
	for j, i := range []int64{0, 2} {
		off, n := o.Block(i)
		if !got[j].Trusted || !bytes.Equal(got[j].Bytes, want[off:off+n]) {
			t.Errorf("block %d: not the object's trusted bytes", i)
		}
	}
	if _, err := src.Blocks(t.Context(), o, []int64{0, 1, 2}, blocks.Request{}); err != nil || c.requests.Load() != 3 {
		t.Errorf("blocks 0, 1 and 2: %v, %d requests; want one", err, c.requests.Load()-2)
	}
	foreign := o
	foreign.Store = "/elsewhere"
	if _, err := src.Blocks(t.Context(), foreign, []int64{0}, blocks.Request{}); err == nil {
		t.Error("a block of another store was read")
	}
	if _, err := src.Blocks(t.Context(), o, []int64{o.Blocks()}, blocks.Request{}); err == nil {
		t.Error("a block past the object's end was read")
	}
	if n := c.requests.Load(); n != 3 {
		t.Errorf("%d requests for refused blocks", n-3)
	}
}

// TestMemory: the memory tier keeps the blocks a read does not take whole
// (not those it does: their reader caches what it takes), serves them to
// the next read, and a fresh read goes past it to the store.
func TestMemory(t *testing.T) {
	s, o, want := object(t)
	src, c := origin(s)
	lru := cache.New(64 << 20)
	mem := &blocks.Memory{Cache: lru, Next: src}
	read(t, mem, o, want, 0, blocks.Size, blocks.Checks{}) // block 0 whole
	read(t, mem, o, want, blocks.Size+10, 10, blocks.Checks{})
	if lru.Contains(o.BlockKey(0)) || !lru.Contains(o.BlockKey(1)) {
		t.Errorf("memory holds block 0: %v, block 1: %v; want only block 1, the one not read whole", lru.Contains(o.BlockKey(0)), lru.Contains(o.BlockKey(1)))
	}
	read(t, mem, o, want, blocks.Size+100, 100, blocks.Checks{})
	if n := c.requests.Load(); n != 2 {
		t.Errorf("a neighbour of a range read before: %d requests in all, want 2", n)
	}
	got, err := mem.Blocks(t.Context(), o, []int64{1}, blocks.Request{Fresh: true})
	if err != nil || c.requests.Load() != 3 || !got[0].Trusted {
		t.Errorf("a fresh read: %v, %d requests in all, trusted %v; want 3, from the store", err, c.requests.Load(), got[0].Trusted)
	}
}

// TestDisk: a block on disk that fails the request's check is read from
// the next tier and replaced; one that passes its own check but fails the
// check across the range (planted under its key with the right length)
// is read again from the store by Read, and replaced too.
func TestDisk(t *testing.T) {
	s, o, want := object(t)
	dc := openDisk(t, t.TempDir())
	dc.Put(o.BlockKey(0), bytes.Repeat([]byte{0xAA}, blocks.Size))
	src, c := origin(s)
	disk := &blocks.Disk{Cache: dc, Next: src}
	isBlock := func(i int64, b []byte) error {
		if off, n := o.Block(i); !bytes.Equal(b, want[off:off+n]) {
			return errBlock
		}
		return nil
	}
	got, err := disk.Blocks(t.Context(), o, []int64{0}, blocks.Request{Check: isBlock})
	if err != nil || !bytes.Equal(got[0].Bytes, want[:blocks.Size]) || c.requests.Load() != 1 {
		t.Fatalf("a planted block failing its check: %v, %d requests; want it read from the store", err, c.requests.Load())
	}
	if b, _ := dc.Get(o.BlockKey(0)); !bytes.Equal(b, want[:blocks.Size]) {
		t.Error("the planted block was not replaced")
	}

	dc.Put(o.BlockKey(1), bytes.Repeat([]byte{0xAA}, blocks.Size))
	off, n := int64(blocks.Size+10), int64(100)
	read(t, disk, o, want, off, n, spanIs(want, off, n))
	if n := c.requests.Load(); n != 2 {
		t.Fatalf("%d requests in all, want 2: the planted block was served", n)
	}
	again, c2 := origin(s)
	read(t, &blocks.Disk{Cache: dc, Next: again}, o, want, off, n, spanIs(want, off, n))
	if n := c2.requests.Load(); n != 0 {
		t.Fatalf("%d requests, want 0: the block read from the store did not replace the planted one", n)
	}
}

// TestKeys: a key names the store, object, generation, size and block,
// and one that names no block of its object is refused, as is a peer's
// request for a block of another store.
func TestKeys(t *testing.T) {
	s, o, want := object(t)
	src, _ := origin(s)
	for i := range o.Blocks() {
		k := o.BlockKey(i)
		got, j, err := blocks.ParseKey(k)
		if err != nil || got != o || j != i {
			t.Errorf("ParseKey(%q) = %v, %d, %v", k, got, j, err)
		}
		b, err := blocks.Load(t.Context(), src, k)
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
		if _, err := blocks.Load(t.Context(), src, k); err == nil {
			t.Errorf("Load(%q) loaded a key that names no block", k)
		}
	}
	foreign := blocks.Object{Store: "/elsewhere", Key: o.Key, Gen: o.Gen, Size: o.Size}.BlockKey(0)
	if _, err := blocks.Load(t.Context(), src, foreign); err == nil {
		t.Error("Load read a block of another store")
	}
}
