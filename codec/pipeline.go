package codec

import (
	"fmt"
	"sync"

	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// MaxDecodedSize bounds what decoding holds in memory: intermediate sizes
// the chunk spec cannot predict (variable-length types, compressors in
// front of a compressor), so that a decompression bomb fails instead of
// exhausting memory, and chunks whose spec is larger, which are refused.
var MaxDecodedSize = 1 << 30

// Pipeline is a complete v3 codec chain for one chunk spec.
type Pipeline struct {
	spec  Spec
	aa    []ArrayToArray
	ab    ArrayToBytes
	bb    []BytesToBytes
	names []string
	// sizes[i] is the exact input size of bb[i] (its decoded size), or -1.
	sizes []int
}

// NewPipeline builds the chain for chunks of spec, checking the order of
// codec kinds: array->array codecs, one array->bytes codec, bytes->bytes codecs.
func NewPipeline(chain []meta.Codec, spec Spec) (*Pipeline, error) {
	p := &Pipeline{spec: spec}
	cur := spec
	for i, m := range chain {
		c, err := New(m, cur)
		if err != nil {
			return nil, err
		}
		p.names = append(p.names, m.Name)
		switch c := c.(type) {
		case ArrayToArray:
			if p.ab != nil {
				return nil, fmt.Errorf("%w: array->array codec %s (codecs[%d]) after the array->bytes codec", ErrConfig, m.Name, i)
			}
			p.aa = append(p.aa, c)
			cur = c.EncodedSpec()
		case ArrayToBytes:
			if p.ab != nil {
				return nil, fmt.Errorf("%w: second array->bytes codec %s (codecs[%d])", ErrConfig, m.Name, i)
			}
			p.ab = c
		case BytesToBytes:
			if p.ab == nil {
				return nil, fmt.Errorf("%w: bytes->bytes codec %s (codecs[%d]) before an array->bytes codec", ErrConfig, m.Name, i)
			}
			p.bb = append(p.bb, c)
		default:
			return nil, fmt.Errorf("codec %s: factory returned %T", m.Name, c)
		}
	}
	if p.ab == nil {
		return nil, fmt.Errorf("%w: no array->bytes codec (such as bytes) in the chain", ErrConfig)
	}
	size, fixed := p.ab.EncodedSize()
	for _, b := range p.bb {
		if !fixed {
			size = -1
		}
		p.sizes = append(p.sizes, size)
		if fixed {
			size, fixed = b.EncodedSize(size)
		}
	}
	return p, nil
}

// Spec is the decoded chunk spec.
func (p *Pipeline) Spec() Spec { return p.spec }

// Names lists the codec names in chain order.
func (p *Pipeline) Names() []string { return p.names }

// EncodedSize is the size of every encoded chunk, when it is fixed.
func (p *Pipeline) EncodedSize() (int, bool) {
	size, fixed := p.ab.EncodedSize()
	for _, b := range p.bb {
		if !fixed {
			return 0, false
		}
		size, fixed = b.EncodedSize(size)
	}
	return size, fixed
}

// MaxEncodedSize bounds the encoded size of a chunk this pipeline can
// decode: compressors expand incompressible data only slightly. Larger
// stored chunks are not read into memory.
func (p *Pipeline) MaxEncodedSize() int64 {
	n := p.spec.DecodedSize()
	if n < 0 || n > MaxDecodedSize {
		n = MaxDecodedSize
	}
	return 2*int64(n) + 1<<20
}

// CheckEncodedSize refuses a stored chunk of n bytes larger than
// MaxEncodedSize: a corrupt index entry (or one in a sparse file) whose
// bytes must not be read into memory.
func (p *Pipeline) CheckEncodedSize(n int64) error {
	if limit := p.MaxEncodedSize(); n > limit {
		return fmt.Errorf("%w: %d bytes stored, more than any chunk of this array encodes to (%d)", store.ErrTooLarge, n, limit)
	}
	return nil
}

// Encode serialises a chunk of the pipeline's spec.
func (p *Pipeline) Encode(c *Chunk) ([]byte, error) {
	if err := c.Check(p.spec); err != nil {
		return nil, err
	}
	var err error
	for i, a := range p.aa {
		if c, err = a.Encode(c); err != nil {
			return nil, fmt.Errorf("encode %s: %w", p.names[i], err)
		}
	}
	b, err := p.ab.Encode(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", p.names[len(p.aa)], err)
	}
	for i, x := range p.bb {
		if b, err = x.Encode(b); err != nil {
			return nil, fmt.Errorf("encode %s: %w", p.names[len(p.aa)+1+i], err)
		}
	}
	return b, nil
}

// Decode deserialises one encoded chunk and checks that it is exactly one
// chunk of the pipeline's spec.
func (p *Pipeline) Decode(b []byte) (*Chunk, error) { return p.decode(b, nil) }

// checkScratch holds the decompressed bytes of chunks being checked;
// buffers beyond checkScratchMax are not kept.
var checkScratch = sync.Pool{New: func() any { return new([]byte) }}

const checkScratchMax = 16 << 20

// Check reports whether b decodes to exactly one chunk of the pipeline's
// spec, as Decode would, without keeping the chunk: a compressor that
// can decode into given memory (DecoderInto) decodes into a pooled
// buffer, so that validating written chunks one after another does not
// allocate and fault in a chunk's worth of fresh memory each time.
func (p *Pipeline) Check(b []byte) error {
	scratch := checkScratch.Get().(*[]byte)
	defer checkScratch.Put(scratch)
	_, err := p.decode(b, scratch)
	return err
}

// decode is Decode; with scratch set, the first decompressor that can
// decodes into *scratch (growing it), so the chunk it returns may be in
// the scratch memory.
func (p *Pipeline) decode(b []byte, scratch *[]byte) (*Chunk, error) {
	if n := p.spec.DecodedSize(); n > MaxDecodedSize {
		return nil, fmt.Errorf("%w: a chunk of %d bytes, more than the %d decoded in memory", store.ErrTooLarge, n, MaxDecodedSize)
	}
	var err error
	for i := len(p.bb) - 1; i >= 0; i-- {
		want := p.sizes[i]
		limit := want
		if want < 0 {
			limit = MaxDecodedSize
		}
		if into, ok := p.bb[i].(DecoderInto); ok && scratch != nil {
			b, err = into.DecodeInto(*scratch, b, limit)
			if err == nil && cap(b) > cap(*scratch) && cap(b) <= checkScratchMax {
				*scratch = b[:0]
			}
			scratch = nil // later stages read b: they must not write over it
		} else {
			b, err = p.bb[i].Decode(b, limit)
		}
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", p.names[len(p.aa)+1+i], err)
		}
		if want >= 0 && len(b) != want {
			return nil, fmt.Errorf("decode %s: %w: %d bytes, want %d", p.names[len(p.aa)+1+i], ErrCorrupt, len(b), want)
		}
	}
	c, err := p.ab.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", p.names[len(p.aa)], err)
	}
	for i := len(p.aa) - 1; i >= 0; i-- {
		if c, err = p.aa[i].Decode(c); err != nil {
			return nil, fmt.Errorf("decode %s: %w", p.names[i], err)
		}
	}
	if err := c.Check(p.spec); err != nil {
		return nil, err
	}
	return c, nil
}
