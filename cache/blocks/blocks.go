// Package blocks reads byte ranges of immutable stored objects (one
// generation of a remote object) as whole aligned blocks, the unit the
// caches below the views keep. Each cache is a Source that wraps the next
// and ends at the store: Memory (the LRU), Disk (the disk cache) and
// Peers (the cluster), looked up in that order, before Origin. A block's
// key names the store, the object, its generation and size and the
// block's index, so every reader, and every node of a cluster, asks for
// the same keys for the same bytes whatever ranges its readers asked for
// (mountpoint-s3 and gcsfuse cut objects into parts the same way).
//
// Bytes from the disk or a peer are checked before they are used or kept
// (Request.Check for each block, Checks.Span across them in Read), and
// read from the store instead when they fail.
package blocks

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/zarrfs/zarrfs/cache"
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

// Kind leads every block key.
const Kind = "block." + version

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
	return cache.Key{Kind: Kind, Store: o.Store, Object: o.Key, Gen: string(o.Gen), Names: []string{strconv.FormatInt(o.Size, 10), strconv.FormatInt(i, 10)}}.String()
}

// ParseKey returns the object and block index a key names.
func ParseKey(k string) (Object, int64, error) {
	c, err := cache.ParseKey(k)
	if err != nil || c.Kind != Kind || len(c.Names) != 2 {
		return Object{}, 0, fmt.Errorf("not a block key: %q", k)
	}
	size, err1 := strconv.ParseInt(c.Names[0], 10, 64)
	i, err2 := strconv.ParseInt(c.Names[1], 10, 64)
	o := Object{Store: c.Store, Key: c.Object, Gen: store.Generation(c.Gen), Size: size}
	if err1 != nil || err2 != nil || size <= 0 || i < 0 || i >= o.Blocks() {
		return Object{}, 0, fmt.Errorf("bad block key %q", k)
	}
	return o, i, nil
}

// A Block is the bytes of one block of an object.
type Block struct {
	Bytes []byte
	// Trusted blocks were read from the origin store by this process
	// (and kept in memory since): their bytes need no check. Their Bytes
	// may share the buffer of one request for several blocks.
	Trusted bool
}

// Request says what a read of blocks is for.
type Request struct {
	// Off and N are the bytes of the object the caller takes from the
	// blocks: a tier that keeps blocks for the reads of their neighbours
	// keeps those the caller does not take whole (it caches what it takes
	// in its own form).
	Off, N int64
	// Check verifies block i on its own (the inner chunks that lie in it
	// whole), before bytes from the disk or a peer are used; nil: none.
	Check func(i int64, b []byte) error
	// Fresh reads every block from the origin store, past what the tiers
	// hold, which they replace with it: the bytes they held failed a
	// check across blocks.
	Fresh bool
}

// Source reads whole aligned blocks of one generation of objects: a tier
// of caches (Memory, Disk, Peers), each wrapping the next, or the store
// (Origin) they end at.
type Source interface {
	// Blocks returns blocks idx (ascending) of o, in that order, failing
	// with store.ErrPrecondition when o's generation is gone.
	Blocks(ctx context.Context, o Object, idx []int64, r Request) ([]Block, error)
}

// Checks say what the bytes of blocks must be, as far as the format of
// the object allows; each may be nil.
type Checks struct {
	// Block verifies block i on its own (Request.Check).
	Block func(i int64, b []byte) error
	// Span verifies the bytes a Read returns (the inner chunks it
	// covers): when bytes from a peer or the disk fail it, the blocks are
	// read from the store instead.
	Span func(b []byte) error
}

// Read returns n bytes at off of o, from the blocks that cover them read
// from src. When bytes not read from the store fail checks.Span (each
// block passed its own check, but not the chunks across them), the blocks
// are read again from the store.
func Read(ctx context.Context, src Source, o Object, off, n int64, checks Checks) ([]byte, error) {
	if off < 0 || n <= 0 || off+n > o.Size {
		return nil, fmt.Errorf("%s: bytes %d+%d of an object of %d", o.Key, off, n, o.Size)
	}
	first, last := off/Size, (off+n-1)/Size
	idx := make([]int64, 0, last-first+1)
	for i := first; i <= last; i++ {
		idx = append(idx, i)
	}
	r := Request{Off: off, N: n, Check: checks.Block}
	got, err := src.Blocks(ctx, o, idx, r)
	if err != nil {
		return nil, err
	}
	span := assemble(got, off-first*Size, n)
	trusted := !slices.ContainsFunc(got, func(b Block) bool { return !b.Trusted })
	if !trusted && checks.Span != nil && checks.Span(span) != nil {
		r.Fresh = true
		if got, err = src.Blocks(ctx, o, idx, r); err != nil {
			return nil, err
		}
		span = assemble(got, off-first*Size, n)
	}
	return span, nil
}

// Load reads the block a key names from src, for a peer that asked for
// it (Origin refuses keys of another store).
func Load(ctx context.Context, src Source, key string) ([]byte, error) {
	o, i, err := ParseKey(key)
	if err != nil {
		return nil, err
	}
	got, err := src.Blocks(ctx, o, []int64{i}, Request{Fresh: true})
	if err != nil {
		return nil, err
	}
	return got[0].Bytes, nil
}

// missing returns the indexes of idx at the positions of out that hold
// no bytes.
func missing(idx []int64, out []Block) (pos []int, want []int64) {
	for p, b := range out {
		if b.Bytes == nil {
			pos, want = append(pos, p), append(want, idx[p])
		}
	}
	return pos, want
}

// assemble returns the n bytes at off of the concatenated blocks: a slice
// of the one block that holds them all, or a copy.
func assemble(blocks []Block, off, n int64) []byte {
	if b := blocks[0].Bytes; off+n <= int64(len(b)) {
		return b[off : off+n : off+n]
	}
	out := make([]byte, 0, n)
	for _, blk := range blocks {
		b := blk.Bytes
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
