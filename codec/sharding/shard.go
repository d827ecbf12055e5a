package sharding

import (
	"bytes"
	"fmt"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/nd"
)

// EncodeShard assembles a shard from encoded inner chunks in C order (nil
// entries are empty), packing them densely in order. It returns nil when
// every chunk is empty: such a shard is not stored at all.
func (c *Codec) EncodeShard(chunks [][]byte) ([]byte, error) {
	parts, err := c.ShardParts(chunks)
	if parts == nil || err != nil {
		return nil, err
	}
	return bytes.Join(parts, nil), nil
}

// ShardParts lays a shard out as EncodeShard does without copying the
// chunks: the parts, one after another, are the shard (the chunks and the
// encoded index). Writing them with one vectored write spares a buffer of
// the shard's size.
func (c *Codec) ShardParts(chunks [][]byte) ([][]byte, error) {
	if len(chunks) != c.NumChunks() {
		return nil, fmt.Errorf("sharding: %d inner chunks, the shard holds %d", len(chunks), c.NumChunks())
	}
	if allNil(chunks) {
		return nil, nil
	}
	ix := NewIndex(len(chunks))
	parts := make([][]byte, 0, len(chunks)+1)
	var off int64
	if c.atStart {
		parts = append(parts, nil) // the index, filled in below
		off = int64(c.indexSize)
	}
	for i, b := range chunks {
		if b == nil {
			continue
		}
		ix.Set(i, off, int64(len(b)))
		off += int64(len(b))
		parts = append(parts, b)
	}
	enc, err := c.EncodeIndex(ix)
	if err != nil {
		return nil, fmt.Errorf("encode shard index: %w", err)
	}
	if c.atStart {
		parts[0] = enc
		return parts, nil
	}
	return append(parts, enc), nil
}

func allNil(chunks [][]byte) bool {
	for _, b := range chunks {
		if b != nil {
			return false
		}
	}
	return true
}

// Encode encodes a whole shard. Inner chunks equal to the fill value are
// left empty, as zarr-python does by default.
func (c *Codec) Encode(shard *codec.Chunk) ([]byte, error) {
	if err := shard.Check(c.spec); err != nil {
		return nil, err
	}
	innerSpec := c.inner.Spec()
	chunks := make([][]byte, c.NumChunks())
	coords := make([]int, len(c.grid))
	start := make([]int, len(c.grid))
	zero := make([]int, len(c.grid))
	for i := range chunks {
		nd.Unravel(i, c.grid, coords)
		for d := range start {
			start[d] = coords[d] * innerSpec.Shape[d]
		}
		sub := codec.NewChunk(innerSpec)
		sub.CopyBox(zero, shard, start, innerSpec.Shape)
		if sub.IsFill(innerSpec.Fill) {
			continue
		}
		b, err := c.inner.Encode(sub)
		if err != nil {
			return nil, fmt.Errorf("inner chunk %v: %w", coords, err)
		}
		chunks[i] = b
	}
	out, err := c.EncodeShard(chunks)
	if out == nil && err == nil {
		// Inside an outer codec chain a shard always has bytes: an
		// all-empty index.
		return c.encodeEmpty()
	}
	return out, err
}

func (c *Codec) encodeEmpty() ([]byte, error) {
	return c.EncodeIndex(NewIndex(c.NumChunks()))
}

// Decode decodes a whole shard; empty inner chunks read as the fill value.
func (c *Codec) Decode(b []byte) (*codec.Chunk, error) {
	size := int64(len(b))
	if size < int64(c.indexSize) {
		return nil, fmt.Errorf("%w: shard of %d bytes is shorter than its %d-byte index", ErrInvalidIndex, size, c.indexSize)
	}
	off := c.IndexOffset(size)
	ix, err := c.DecodeIndex(b[off:off+int64(c.indexSize)], size)
	if err != nil {
		return nil, err
	}
	out := codec.NewChunk(c.spec)
	innerShape := c.inner.Spec().Shape
	coords := make([]int, len(c.grid))
	start := make([]int, len(c.grid))
	zero := make([]int, len(c.grid))
	for i := 0; i < ix.Len(); i++ {
		o, n, ok := ix.Chunk(i)
		if !ok {
			continue
		}
		nd.Unravel(i, c.grid, coords)
		sub, err := c.inner.Decode(b[o : o+n])
		if err != nil {
			return nil, fmt.Errorf("inner chunk %v: %w", coords, err)
		}
		for d := range start {
			start[d] = coords[d] * innerShape[d]
		}
		out.CopyBox(start, sub, zero, innerShape)
	}
	return out, nil
}
