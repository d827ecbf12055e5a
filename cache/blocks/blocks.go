// Package blocks reads byte ranges of immutable stored objects (one
// generation of a remote object) as whole aligned blocks, the unit the
// caches below the views keep: a memory LRU, the disk cache and the
// cluster, looked up in that order, before the origin store. A block's
// key names the store, the object, its generation and size and the
// block's index, so every reader, and every node of a cluster, asks for
// the same keys for the same bytes whatever ranges its readers asked for
// (mountpoint-s3 and gcsfuse cut objects into parts the same way).
package blocks

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Size is the size of a block. A mount alone fetches the chunks of a shard
// in runs of up to 8 MiB with one request each; blocks as large make a
// cluster, which fetches each block with one request by its owner, send
// about as many requests to the store as one mount does. A miss costs at
// most one block per run edge more than the run itself: at S3's 50-100
// MiB/s per stream, 8 MiB is about one more round trip.
const Size = 8 << 20

// version changes whenever what a key names does (the block size, the
// layout of keys or values), so that nodes or cache directories of
// another version never share a value.
const version = "1"

// kind leads every block key.
const kind = "block." + version

// Object is one generation of a stored object.
type Object struct {
	// Store is the store's canonical identity: its URL with what else
	// chooses the server (store.Store's String), free of secrets.
	Store string
	Key   string
	Gen   store.Generation
	Size  int64
}

// Blocks returns the number of blocks of the object.
func (o Object) Blocks() int64 { return (o.Size + Size - 1) / Size }

// Block returns where block i lies in the object.
func (o Object) Block(i int64) (off, n int64) {
	off = i * Size
	return off, min(Size, o.Size-off)
}

// BlockKey is the cache key of block i of o.
func (o Object) BlockKey(i int64) string {
	return strings.Join([]string{kind, o.Store, o.Key, string(o.Gen), strconv.FormatInt(o.Size, 10), strconv.FormatInt(i, 10)}, "\x00")
}

// Prefix leads the keys of every block of the store named s.
func Prefix(s string) string { return kind + "\x00" + s + "\x00" }

// ParseKey returns the object and block index a key names.
func ParseKey(k string) (Object, int64, error) {
	f := strings.Split(k, "\x00")
	if len(f) != 6 || f[0] != kind {
		return Object{}, 0, fmt.Errorf("not a block key: %q", k)
	}
	size, err1 := strconv.ParseInt(f[4], 10, 64)
	i, err2 := strconv.ParseInt(f[5], 10, 64)
	o := Object{Store: f[1], Key: f[2], Gen: store.Generation(f[3]), Size: size}
	if err1 != nil || err2 != nil || size <= 0 || i < 0 || i >= o.Blocks() {
		return Object{}, 0, fmt.Errorf("bad block key %q", k)
	}
	return o, i, nil
}

// Memory is the in-memory LRU (cache.Cache).
type Memory interface {
	Get(key string) (any, bool)
	Add(key string, value any, size int64)
}

// Disk is the disk cache (diskcache.Cache), which checks what it returns
// against a checksum of key and value.
type Disk interface {
	Get(key string) ([]byte, bool)
	Put(key string, value []byte)
}

// Peers is the cluster (cluster.Cluster): a key's owner loads it once for
// every node.
type Peers interface {
	Get(ctx context.Context, key string, check cluster.Check) ([]byte, error)
}

// Checks say what the bytes of blocks must be, as far as the format of
// the object allows; each may be nil.
type Checks struct {
	// Block verifies block i on its own (the inner chunks that lie in it
	// whole), before a peer's value is used.
	Block func(i int64, b []byte) error
	// Span verifies the bytes a Read returns (the inner chunks it
	// covers): when bytes from a peer or the disk fail it, the blocks are
	// read from the store instead.
	Span func(b []byte) error
}

// Reader reads objects by blocks. Memory, Disk and Peers may be nil.
type Reader struct {
	Memory Memory
	Disk   Disk
	Peers  Peers
	// Origin reads len(p) bytes at off of o from the store, failing with
	// store.ErrPrecondition when o's generation is gone.
	Origin func(ctx context.Context, o Object, p []byte, off int64) error
}

// peerFetches bounds the blocks of one Read asked of peers at once.
const peerFetches = 8

// Read returns n bytes at off of o, read from the blocks that cover them:
// each from memory, the disk or the peers, and those missing everywhere
// from the store, with one request per run of adjacent blocks. Blocks
// read are kept on disk; those the returned bytes do not cover whole are
// kept in memory too, for the read of their neighbours. Without a disk
// cache or peers, which share blocks, Read fetches just the n bytes: the
// caller sized the range to what its readers need.
func (r *Reader) Read(ctx context.Context, o Object, off, n int64, checks Checks) ([]byte, error) {
	if off < 0 || n <= 0 || off+n > o.Size {
		return nil, fmt.Errorf("%s: bytes %d+%d of an object of %d", o.Key, off, n, o.Size)
	}
	if r.Disk == nil && r.Peers == nil {
		buf := make([]byte, n)
		if err := r.Origin(ctx, o, buf, off); err != nil {
			return nil, err
		}
		return buf, nil
	}
	first, last := off/Size, (off+n-1)/Size
	got := make([][]byte, last-first+1)
	from := make([]source, len(got))
	var missing []int64
	for i := first; i <= last; i++ {
		if v, ok := r.memory(o, i); ok {
			got[i-first], from[i-first] = v, fromMemory
		} else if b := r.cached(o, i); b != nil {
			got[i-first], from[i-first] = b, fromDisk
		} else {
			missing = append(missing, i)
		}
	}
	fetched := func(s source) func(int64, []byte) {
		return func(i int64, b []byte) { got[i-first], from[i-first] = b, s }
	}
	if r.Peers != nil && len(missing) > 0 {
		if err := r.fromPeers(ctx, o, missing, checks.Block, fetched(fromPeers)); err != nil {
			return nil, err
		}
		missing = nil
	}
	if err := r.fromOrigin(ctx, o, missing, fetched(fromOrigin)); err != nil {
		return nil, err
	}
	trusted := !slices.ContainsFunc(from, func(s source) bool { return s == fromDisk || s == fromPeers })
	span := assemble(got, off-first*Size, n)
	if !trusted && checks.Span != nil && checks.Span(span) != nil {
		// A peer's or the disk's blocks passed their own checks but not
		// the chunks across them: read them all from the store.
		all := make([]int64, 0, len(got))
		for i := first; i <= last; i++ {
			all = append(all, i)
		}
		if err := r.fromOrigin(ctx, o, all, fetched(fromOrigin)); err != nil {
			return nil, err
		}
		span = assemble(got, off-first*Size, n)
	}
	for i := first; i <= last; i++ {
		b, s := got[i-first], from[i-first]
		if r.Disk != nil && s != fromDisk && s != fromMemory {
			r.Disk.Put(o.BlockKey(i), b)
		}
		if bo, bn := o.Block(i); r.Memory != nil && s != fromMemory && (bo < off || bo+bn > off+n) {
			if s == fromOrigin {
				b = bytes.Clone(b) // not the buffer of all the blocks one request read
			}
			r.Memory.Add(o.BlockKey(i), b, int64(len(b)))
		}
	}
	return span, nil
}

// source is where Read found a block.
type source int

const (
	fromOrigin source = iota
	fromMemory
	fromDisk
	fromPeers
)

// memory returns block i from the memory LRU.
func (r *Reader) memory(o Object, i int64) ([]byte, bool) {
	if r.Memory == nil {
		return nil, false
	}
	v, ok := r.Memory.Get(o.BlockKey(i))
	if !ok {
		return nil, false
	}
	b, ok := v.([]byte)
	return b, ok
}

// cached returns block i from the disk cache, if it holds it whole.
func (r *Reader) cached(o Object, i int64) []byte {
	if r.Disk == nil {
		return nil
	}
	b, ok := r.Disk.Get(o.BlockKey(i))
	if _, n := o.Block(i); !ok || int64(len(b)) != n {
		return nil
	}
	return b
}

// fromPeers gets blocks through the cluster, a few at a time: each from
// its owner (or loaded here when this node owns it, or its owner fails
// or sends bytes that fail their check).
func (r *Reader) fromPeers(ctx context.Context, o Object, blocks []int64, check func(int64, []byte) error, keep func(int64, []byte)) error {
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	slots := make(chan struct{}, peerFetches)
	for _, i := range blocks {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			_, want := o.Block(i)
			c := cluster.Check{Size: func(n int64) error {
				if n != want {
					return fmt.Errorf("%d bytes for a block of %d", n, want)
				}
				return nil
			}}
			if check != nil {
				c.Value = func(b []byte) error { return check(i, b) }
			}
			b, err := r.Peers.Get(ctx, o.BlockKey(i), c)
			if err == nil && int64(len(b)) != want {
				err = fmt.Errorf("%s: the cluster gave %d bytes for a block of %d", o.Key, len(b), want)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				return
			}
			keep(i, b)
		})
	}
	wg.Wait()
	return firstErr
}

// fromOrigin reads blocks (in ascending order) from the store, one
// request per run of adjacent ones, and hands each to keep.
func (r *Reader) fromOrigin(ctx context.Context, o Object, blocks []int64, keep func(int64, []byte)) error {
	for len(blocks) > 0 {
		j := 1
		for j < len(blocks) && blocks[j] == blocks[j-1]+1 {
			j++
		}
		start, _ := o.Block(blocks[0])
		endOff, endN := o.Block(blocks[j-1])
		buf := make([]byte, endOff+endN-start)
		if err := r.Origin(ctx, o, buf, start); err != nil {
			return err
		}
		for _, i := range blocks[:j] {
			bo, bn := o.Block(i)
			keep(i, buf[bo-start:bo-start+bn:bo-start+bn])
		}
		blocks = blocks[j:]
	}
	return nil
}

// assemble returns the n bytes at off of the concatenated blocks: a slice
// of the one block that holds them all, or a copy.
func assemble(blocks [][]byte, off, n int64) []byte {
	if off+n <= int64(len(blocks[0])) {
		return blocks[0][off : off+n : off+n]
	}
	out := make([]byte, 0, n)
	for _, b := range blocks {
		if off >= int64(len(b)) {
			off -= int64(len(b))
			continue
		}
		take := min(int64(len(b))-off, n-int64(len(out)))
		out = append(out, b[off:off+take]...)
		off = 0
		if int64(len(out)) == n {
			break
		}
	}
	return out
}

// Load reads the block a key names from s, for a peer that asked for it:
// the store must be the one the key names.
func Load(ctx context.Context, s store.Store, key string) ([]byte, error) {
	o, i, err := ParseKey(key)
	if err != nil {
		return nil, err
	}
	if o.Store != s.String() {
		return nil, errors.New("block key of another store")
	}
	off, n := o.Block(i)
	buf := make([]byte, n)
	if err := s.ReadAt(ctx, o.Key, o.Gen, buf, off); err != nil {
		return nil, err
	}
	return buf, nil
}
