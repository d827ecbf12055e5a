package sharding

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/zarrfs/zarrfs/codec"
)

// ErrInvalidIndex: the shard index is unreadable or points outside the
// shard. Checksum failures wrap codec.ErrChecksum as well.
var ErrInvalidIndex = errors.New("invalid shard index")

// Empty marks an inner chunk that is not stored (both offset and nbytes).
const Empty = math.MaxUint64

// Index is a decoded shard index.
type Index struct {
	// entries holds (offset, nbytes) per inner chunk in C order.
	entries []uint64
}

// NewIndex returns an index of n inner chunks, all empty.
func NewIndex(n int) *Index {
	ix := &Index{entries: make([]uint64, 2*n)}
	for i := range ix.entries {
		ix.entries[i] = Empty
	}
	return ix
}

// Len is the number of inner chunks.
func (ix *Index) Len() int { return len(ix.entries) / 2 }

// Chunk returns where inner chunk i is stored; ok is false for empty chunks.
func (ix *Index) Chunk(i int) (offset, nbytes int64, ok bool) {
	o, n := ix.entries[2*i], ix.entries[2*i+1]
	if o == Empty {
		return 0, 0, false
	}
	return int64(o), int64(n), true
}

// Set records that inner chunk i is stored at [offset, offset+nbytes).
func (ix *Index) Set(i int, offset, nbytes int64) {
	ix.entries[2*i], ix.entries[2*i+1] = uint64(offset), uint64(nbytes)
}

// Stored counts the stored inner chunks and their bytes.
func (ix *Index) Stored() (chunks int, bytes int64) {
	for i := 0; i < ix.Len(); i++ {
		if _, n, ok := ix.Chunk(i); ok {
			chunks++
			bytes += n
		}
	}
	return chunks, bytes
}

// DeadBytes is how many bytes of a shard of size bytes with index ix
// neither the index nor a stored inner chunk covers: what rewriting the
// shard densely reclaims.
func (c *Codec) DeadBytes(ix *Index, size int64) int64 {
	_, used := ix.Stored()
	return max(size-used-int64(c.indexSize), 0)
}

// IndexOffset is where the index lies in a shard of size bytes.
func (c *Codec) IndexOffset(size int64) int64 {
	if c.atStart {
		return 0
	}
	return size - int64(c.indexSize)
}

// ReadIndex reads and validates the index of the shard r of size bytes,
// reading only the index bytes.
func (c *Codec) ReadIndex(r io.ReaderAt, size int64) (*Index, error) {
	if size < int64(c.indexSize) {
		return nil, fmt.Errorf("%w: shard of %d bytes is shorter than its %d-byte index", ErrInvalidIndex, size, c.indexSize)
	}
	b := make([]byte, c.indexSize)
	if _, err := r.ReadAt(b, c.IndexOffset(size)); err != nil {
		return nil, fmt.Errorf("read shard index: %w", err)
	}
	return c.DecodeIndex(b, size)
}

// DecodeIndex decodes the encoded index b of a shard of size bytes and
// validates every entry against the shard.
func (c *Codec) DecodeIndex(b []byte, size int64) (*Index, error) {
	chunk, err := c.index.Decode(b)
	if err != nil {
		if errors.Is(err, codec.ErrChecksum) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidIndex, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidIndex, err)
	}
	ix := &Index{entries: make([]uint64, len(chunk.Data)/8)}
	for i := range ix.entries {
		ix.entries[i] = binary.LittleEndian.Uint64(chunk.Data[8*i:])
	}
	if err := c.validate(ix, size); err != nil {
		return nil, err
	}
	return ix, nil
}

// validate checks that every stored chunk lies inside the shard, outside
// the index, does not partly overlap another chunk, and has the size the
// inner codecs produce when that size is fixed.
func (c *Codec) validate(ix *Index, size int64) error {
	indexStart := c.IndexOffset(size)
	indexEnd := indexStart + int64(c.indexSize)
	fixedSize, fixed := c.inner.EncodedSize()
	type span struct{ i, off, end int64 }
	spans := make([]span, 0, ix.Len())
	for i := 0; i < ix.Len(); i++ {
		o, n := ix.entries[2*i], ix.entries[2*i+1]
		if o == Empty || n == Empty {
			if o != n {
				return fmt.Errorf("%w: entry %d is (%d, %d): only one half is the empty marker", ErrInvalidIndex, i, int64(o), int64(n))
			}
			continue
		}
		if o > uint64(size) || n > uint64(size)-o {
			return fmt.Errorf("%w: entry %d: bytes [%d, +%d) lie beyond the shard's %d bytes", ErrInvalidIndex, i, o, n, size)
		}
		off, end := int64(o), int64(o+n)
		if off < indexEnd && end > indexStart {
			return fmt.Errorf("%w: entry %d: bytes [%d, %d) overlap the index at [%d, %d)", ErrInvalidIndex, i, off, end, indexStart, indexEnd)
		}
		if fixed && n != uint64(fixedSize) {
			return fmt.Errorf("%w: entry %d: %d bytes, but the inner codecs always produce %d", ErrInvalidIndex, i, n, fixedSize)
		}
		spans = append(spans, span{int64(i), off, end})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Or(cmp.Compare(a.off, b.off), cmp.Compare(a.end, b.end)) })
	for k := 1; k < len(spans); k++ {
		a, b := spans[k-1], spans[k]
		same := a.off == b.off && a.end == b.end // shared bytes for identical chunks are fine
		if b.off < a.end && !same {
			return fmt.Errorf("%w: entries %d and %d overlap: [%d, %d) and [%d, %d)", ErrInvalidIndex, a.i, b.i, a.off, a.end, b.off, b.end)
		}
	}
	return nil
}

// EncodeIndex encodes ix with the index codecs.
func (c *Codec) EncodeIndex(ix *Index) ([]byte, error) {
	chunk := codec.NewChunk(c.index.Spec())
	for i, e := range ix.entries {
		binary.LittleEndian.PutUint64(chunk.Data[8*i:], e)
	}
	return c.index.Encode(chunk)
}

// ReadChunk returns the stored bytes of inner chunk i, or ok=false when
// it is empty.
func (c *Codec) ReadChunk(r io.ReaderAt, ix *Index, i int) (b []byte, ok bool, err error) {
	off, n, ok := ix.Chunk(i)
	if !ok {
		return nil, false, nil
	}
	b = make([]byte, n)
	if _, err := r.ReadAt(b, off); err != nil {
		return nil, true, fmt.Errorf("read inner chunk %d: %w", i, err)
	}
	return b, true, nil
}
