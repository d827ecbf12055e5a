// Package zarr opens Zarr v2 and v3 hierarchies in a store and reads and
// writes their arrays chunk by chunk, including sharded arrays, whose
// shards it can also address inner chunk by inner chunk.
package zarr

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Array is an opened array of either format.
type Array struct {
	store store.Store
	// Path is the array's key prefix in the store ("" for a root array).
	Path string
	// Format is 2 or 3; exactly one of V2 and V3 is set.
	Format int
	V2     *meta.ArrayV2
	V3     *meta.ArrayV3

	Shape []int
	// ChunkShape is the chunk grid's chunk shape: the shard shape of a
	// sharded array.
	ChunkShape []int
	Type       dtype.DataType
	Keys       meta.KeyEncoding
	// Codecs is the v3 codec chain of a chunk; for v2 arrays the equivalent
	// chain (numcodecs.* codecs) built from order, filters and compressor.
	Codecs []meta.Codec

	spec     codec.Spec
	pipeline *codec.Pipeline
	shard    *sharding.Codec // set when the chain is exactly sharding_indexed
}

// openArrayV3 opens a v3 array from its parsed zarr.json.
func openArrayV3(s store.Store, path string, m *meta.ArrayV3) (*Array, error) {
	a := &Array{
		store: s, Path: path, Format: 3, V3: m,
		Shape: m.Shape, ChunkShape: m.ChunkShape, Type: m.DataType, Keys: m.KeyEncoding,
		Codecs: m.Codecs,
	}
	return a, a.build(m.FillValue)
}

// openArrayV2 opens a v2 array from its parsed .zarray.
func openArrayV2(s store.Store, path string, m *meta.ArrayV2) (*Array, error) {
	typ, chain, err := codec.FromV2(m.DataType, m.Endian, m.Order, m.Rank(), m.Filters, m.Compressor)
	if err != nil {
		return nil, err
	}
	a := &Array{
		store: s, Path: path, Format: 2, V2: m,
		Shape: m.Shape, ChunkShape: m.Chunks, Type: typ, Keys: m.KeyEncoding(),
		Codecs: chain,
	}
	return a, a.build(m.FillValue)
}

// build sets up the codec pipeline for the array's chunks.
func (a *Array) build(fill []byte) error {
	if fill == nil && !a.Type.Variable() {
		fill = make([]byte, a.Type.Size) // v2 "no fill value": zeros
	}
	a.spec = codec.Spec{Shape: a.ChunkShape, Type: a.Type, Fill: fill}
	p, err := codec.NewPipeline(a.Codecs, a.spec)
	if err != nil {
		return err
	}
	a.pipeline = p
	if len(a.Codecs) == 1 && a.Codecs[0].Name == sharding.Name {
		c, err := codec.New(a.Codecs[0], a.spec)
		if err != nil {
			return err
		}
		a.shard = c.(*sharding.Codec)
	}
	return nil
}

// Store is the store the array lives in.
func (a *Array) Store() store.Store { return a.store }

// Spec is the spec of one chunk of the chunk grid.
func (a *Array) Spec() codec.Spec { return a.spec }

// Fill is the fill value as one decoded element.
func (a *Array) Fill() []byte { return a.spec.Fill }

// Pipeline is the codec chain of one chunk of the chunk grid.
func (a *Array) Pipeline() *codec.Pipeline { return a.pipeline }

// Sharding returns the sharding codec when the array is sharded with
// sharding_indexed as its only codec, which is what makes inner chunks
// addressable without decoding shards; nil otherwise.
func (a *Array) Sharding() *sharding.Codec { return a.shard }

// ReadShardIndex reads the index of the shard at key with one request (a
// suffix read when the index ends the shard, so the shard's size need not
// be known) and describes the shard, under cond. Store errors come back as
// they are (ErrNotFound, ErrNotModified); an index that does not decode or
// does not fit the shard is an error wrapping sharding.ErrInvalidIndex.
func (a *Array) ReadShardIndex(ctx context.Context, key string, cond store.Cond) (*sharding.Index, store.Info, error) {
	n := int64(a.shard.IndexSize())
	span := store.Last(n)
	if a.shard.IndexAtStart() {
		span = store.Range(0, n)
	}
	b, info, err := a.store.Get(ctx, key, span, cond)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, info, err
	}
	if err != nil {
		info.Size = min(info.Size, n-1) // a range past the end: shorter than the index
	}
	at := int64(0)
	if !a.shard.IndexAtStart() {
		at = info.Size - int64(len(b))
	}
	ix, _, err := a.ShardIndexIn(b, at, info.Size)
	return ix, info, err
}

// ShardIndexIn decodes the index of a shard of size bytes from b, the
// bytes at offset at of the shard; found is false when b does not hold
// the index. An index that does not decode or does not fit the shard is
// an error wrapping sharding.ErrInvalidIndex.
func (a *Array) ShardIndexIn(b []byte, at, size int64) (ix *sharding.Index, found bool, err error) {
	n := int64(a.shard.IndexSize())
	if size < n {
		return nil, true, fmt.Errorf("%w: shard of %d bytes is shorter than its %d-byte index", sharding.ErrInvalidIndex, size, n)
	}
	start := a.shard.IndexOffset(size)
	if start < at || start+n > at+int64(len(b)) {
		return nil, false, nil
	}
	ix, err = a.shard.DecodeIndex(b[start-at:start-at+n], size)
	return ix, true, err
}

// Grid is the number of chunks (shards) along each axis.
func (a *Array) Grid() []int { return nd.Grid(a.Shape, a.ChunkShape) }

// ChunkKey is the store key of the chunk (shard) at grid coordinates.
func (a *Array) ChunkKey(coords []int) string {
	return store.Join(a.Path, a.Keys.Key(coords))
}

// ParseChunkKey returns the grid coordinates of the chunk stored at key
// (relative to the array), and false if key names no chunk of the grid.
func (a *Array) ParseChunkKey(key string) ([]int, bool) {
	c, ok := a.Keys.Parse(key, len(a.Shape))
	if !ok || !nd.Inside(c, a.Grid()) {
		return nil, false
	}
	return c, true
}

// ReadChunk decodes the chunk at grid coordinates; a missing chunk reads as
// the fill value with found == false.
func (a *Array) ReadChunk(ctx context.Context, coords []int) (c *codec.Chunk, found bool, err error) {
	key := a.ChunkKey(coords)
	b, err := store.ReadAll(ctx, a.store, key)
	if errors.Is(err, store.ErrNotFound) {
		return codec.NewChunk(a.spec), false, nil
	}
	if err != nil {
		return nil, false, err
	}
	c, err = a.pipeline.Decode(b)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", key, err)
	}
	return c, true, nil
}

// WriteChunk encodes and stores the chunk at grid coordinates. A chunk that
// is entirely the fill value is deleted instead, as zarr-python does.
func (a *Array) WriteChunk(ctx context.Context, coords []int, c *codec.Chunk) error {
	key := a.ChunkKey(coords)
	if c.IsFill(a.spec.Fill) {
		return store.Delete(ctx, a.store, key, store.Cond{})
	}
	b, err := a.pipeline.Encode(c)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return store.Write(ctx, a.store, key, b)
}

// InnerGrid is the number of inner chunks along each axis of a sharded
// array that lie at least partly inside its shape; for unsharded arrays it
// is the chunk grid.
func (a *Array) InnerGrid() []int {
	if a.shard == nil {
		return a.Grid()
	}
	return nd.Grid(a.Shape, a.shard.ChunkShape())
}

// InnerChunk maps coordinates in the inner chunk grid to the shard holding
// that inner chunk and its index within the shard's index. For unsharded
// arrays the "shard" is the chunk itself, at index 0.
func (a *Array) InnerChunk(coords []int) (shard []int, local int) {
	if a.shard == nil {
		return coords, 0
	}
	per := a.shard.Grid()
	shard = make([]int, len(coords))
	inner := make([]int, len(coords))
	for d, c := range coords {
		shard[d], inner[d] = c/per[d], c%per[d]
	}
	return shard, nd.Linear(inner, per)
}

// InnerCoords is the inverse of InnerChunk.
func (a *Array) InnerCoords(shard []int, local int) []int {
	if a.shard == nil {
		return shard
	}
	per := a.shard.Grid()
	c := make([]int, len(shard))
	nd.Unravel(local, per, c)
	for d := range c {
		c[d] += shard[d] * per[d]
	}
	return c
}

// At is the array moved to path: the same array, its keys below path.
func (a *Array) At(path string) *Array {
	b := *a
	b.Path = path
	return &b
}
