// Package codec implements Zarr codecs as a pipeline that mirrors the v3
// spec's three kinds: array->array codecs (transpose, numcodecs filters),
// exactly one array->bytes codec (bytes, vlen-*, sharding_indexed), and
// bytes->bytes codecs (compressors, checksums).
//
// A codec is built for one chunk specification (shape, data type, fill
// value), so Encode and Decode need no further parameters and a pipeline is
// validated once, when an array is opened. Codecs are safe for concurrent
// use.
//
// Codecs never modify their input, and their output may share memory with
// it (a little-endian bytes codec returns the stored bytes as the chunk's
// Data, a checksum codec returns a subslice): callers must not modify a
// buffer they passed in while they use what came out, nor the reverse.
package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
)

// Errors that codecs wrap with detail.
var (
	// ErrUnknownCodec: the codec name (or numcodecs id) is not implemented.
	ErrUnknownCodec = errors.New("unknown codec")
	// ErrConfig: the codec configuration is invalid for the chunk it encodes.
	ErrConfig = errors.New("invalid codec configuration")
	// ErrCorrupt: encoded bytes cannot be decoded.
	ErrCorrupt = errors.New("corrupt encoded data")
	// ErrChecksum: a checksum did not match.
	ErrChecksum = errors.New("checksum mismatch")
)

// Spec describes a chunk as a codec sees it.
type Spec struct {
	Shape []int
	Type  dtype.DataType
	// Fill is the fill value as one decoded element (little-endian), or
	// the item itself for variable-length types.
	Fill []byte
}

// NumElements is the number of elements of a chunk with this spec.
func (s Spec) NumElements() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// DecodedSize is the size of a decoded chunk in bytes, or -1 for
// variable-length types.
func (s Spec) DecodedSize() int {
	if s.Type.Variable() {
		return -1
	}
	return s.NumElements() * s.Type.Size
}

// Chunk is a decoded chunk: elements of Type in C order over Shape.
// Fixed-size elements are packed little-endian in Data; variable-length
// elements are the entries of Items.
type Chunk struct {
	Shape []int
	Type  dtype.DataType
	Data  []byte
	Items [][]byte
}

// NewChunk returns a chunk of spec filled with the fill value.
func NewChunk(s Spec) *Chunk {
	c := &Chunk{Shape: slices.Clone(s.Shape), Type: s.Type}
	n := s.NumElements()
	if s.Type.Variable() {
		c.Items = make([][]byte, n)
		for i := range c.Items {
			c.Items[i] = s.Fill
		}
		return c
	}
	c.Data = make([]byte, n*s.Type.Size)
	if len(s.Fill) == s.Type.Size && !allZero(s.Fill) {
		for i := 0; i < len(c.Data); i += len(s.Fill) {
			copy(c.Data[i:], s.Fill)
		}
	}
	return c
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// Check reports whether c matches spec s in shape, type and length.
func (c *Chunk) Check(s Spec) error {
	if !slices.Equal(c.Shape, s.Shape) {
		return fmt.Errorf("%w: chunk shape %v, want %v", ErrCorrupt, c.Shape, s.Shape)
	}
	if c.Type != s.Type {
		return fmt.Errorf("%w: chunk type %s, want %s", ErrCorrupt, c.Type, s.Type)
	}
	n := s.NumElements()
	if s.Type.Variable() {
		if len(c.Items) != n {
			return fmt.Errorf("%w: %d items, want %d", ErrCorrupt, len(c.Items), n)
		}
	} else if len(c.Data) != n*s.Type.Size {
		return fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, len(c.Data), n*s.Type.Size)
	}
	return nil
}

// ArrayToArray codecs transform a decoded chunk into another (transpose,
// numcodecs filters).
type ArrayToArray interface {
	// EncodedSpec is the spec of the chunks Encode produces.
	EncodedSpec() Spec
	Encode(c *Chunk) (*Chunk, error)
	Decode(c *Chunk) (*Chunk, error)
}

// ArrayToBytes codecs serialise a chunk (bytes, vlen-*, sharding_indexed).
type ArrayToBytes interface {
	Encode(c *Chunk) ([]byte, error)
	Decode(b []byte) (*Chunk, error)
	// EncodedSize is the size of every encoding, when it is fixed.
	EncodedSize() (int, bool)
}

// BytesToBytes codecs transform bytes (compressors, checksums).
type BytesToBytes interface {
	Encode(b []byte) ([]byte, error)
	// Decode refuses to produce more than maxSize bytes (maxSize < 0: no
	// bound), so hostile input cannot exhaust memory.
	Decode(b []byte, maxSize int) ([]byte, error)
	// EncodedSize is the encoded size of decoded bytes, when it is fixed.
	EncodedSize(decoded int) (int, bool)
}

// DecoderInto is implemented by bytes->bytes codecs that can decode into
// memory the caller owns: the result is in dst's memory when cap(dst) is
// large enough, else in a new slice. Pipeline.Check uses it, so that
// checking chunk after chunk touches no fresh memory.
type DecoderInto interface {
	DecodeInto(dst, b []byte, maxSize int) ([]byte, error)
}

// Factory builds a codec from its configuration for chunks of spec: the
// decoded spec for array->array and array->bytes codecs, and the spec of
// the array that was serialised for bytes->bytes codecs. It returns an
// ArrayToArray, ArrayToBytes or BytesToBytes.
type Factory func(config json.RawMessage, spec Spec) (any, error)

var registry = map[string]Factory{}

// Register makes a codec available under a v3 name. It panics on
// duplicates, since that is a programming error.
func Register(name string, f Factory) {
	if _, dup := registry[name]; dup {
		panic("codec: duplicate registration of " + name)
	}
	registry[name] = f
}

// New builds one codec.
func New(m meta.Codec, spec Spec) (any, error) {
	f, ok := registry[m.Name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownCodec, m.Name)
	}
	c, err := f(m.Configuration, spec)
	if err != nil {
		return nil, fmt.Errorf("codec %s: %w", m.Name, err)
	}
	return c, nil
}

// IsFill reports whether every element of c equals fill (one element, or
// the item for variable-length types).
func (c *Chunk) IsFill(fill []byte) bool {
	if c.Type.Variable() {
		for _, it := range c.Items {
			if !bytes.Equal(it, fill) {
				return false
			}
		}
		return true
	}
	if len(fill) != c.Type.Size || len(fill) == 0 {
		return false
	}
	// Compare whole blocks against the fill repeated, so the work is memcmp.
	pattern := bytes.Repeat(fill, max(1, 4096/len(fill)))
	data := c.Data
	for len(data) > 0 {
		n := min(len(data), len(pattern))
		if !bytes.Equal(data[:n], pattern[:n]) {
			return false
		}
		data = data[n:]
	}
	return true
}

// CopyBox copies the box of count elements at srcStart in src into c at
// dstStart.
func (c *Chunk) CopyBox(dstStart []int, src *Chunk, srcStart, count []int) {
	if src.Type.Variable() {
		nd.Copy(c.Items, c.Shape, dstStart, src.Items, src.Shape, srcStart, count, 1)
		return
	}
	nd.Copy(c.Data, c.Shape, dstStart, src.Data, src.Shape, srcStart, count, src.Type.Size)
}
