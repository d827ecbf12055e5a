package codec

import (
	"encoding/json"

	"github.com/zarrfs/zarrfs/zarr/dtype"
)

func init() {
	Register("bytes", newBytesCodec)
	// zarr-python 3 still reads the pre-release name.
	Register("endian", newBytesCodec)
}

// bytesCodec is the v3 "bytes" codec: fixed-size elements in C order with
// the configured byte order.
type bytesCodec struct {
	spec Spec
	// swap is the size of the units to byte-swap, 0 when the stored order
	// is the decoded (little-endian) order.
	swap int
}

func newBytesCodec(config json.RawMessage, spec Spec) (any, error) {
	var cfg struct {
		Endian *string `json:"endian"`
	}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	if spec.Type.Variable() {
		return nil, configError("bytes cannot serialise variable-length %s elements (use vlen-utf8 or vlen-bytes)", spec.Type)
	}
	e := dtype.Little // the spec requires endian for multi-byte types; be lenient
	if cfg.Endian != nil {
		switch *cfg.Endian {
		case "little":
		case "big":
			e = dtype.Big
		default:
			return nil, configError("endian must be \"little\" or \"big\", got %q", *cfg.Endian)
		}
	}
	c := &bytesCodec{spec: spec}
	if e == dtype.Big && spec.Type.SwapSize() > 1 {
		c.swap = spec.Type.SwapSize()
	}
	return c, nil
}

func (c *bytesCodec) EncodedSize() (int, bool) { return c.spec.DecodedSize(), true }

func (c *bytesCodec) Encode(ch *Chunk) ([]byte, error) {
	if err := ch.Check(c.spec); err != nil {
		return nil, err
	}
	if c.swap == 0 {
		return ch.Data, nil
	}
	out := make([]byte, len(ch.Data))
	swapBytes(out, ch.Data, c.swap)
	return out, nil
}

// Decode returns a chunk that shares memory with b when no byte swap is needed.
func (c *bytesCodec) Decode(b []byte) (*Chunk, error) {
	if want := c.spec.DecodedSize(); len(b) != want {
		return nil, corrupt("%d bytes, want %d for %v %s", len(b), want, c.spec.Shape, c.spec.Type)
	}
	var data []byte
	if c.swap == 0 {
		data = normalizeSmall(b, c.spec.Type)
	} else {
		data = make([]byte, len(b))
		swapBytes(data, b, c.swap)
	}
	return &Chunk{Shape: c.spec.Shape, Type: c.spec.Type, Data: data}, nil
}

// normalizeSmall returns b with bool elements as 0/1 and sub-byte integers
// sign- or zero-extended from their width, copying only when some element
// needs it (so that stored bytes are never modified).
func normalizeSmall(b []byte, t dtype.DataType) []byte {
	var fix func(byte) byte
	first := -1
	switch {
	case t.Kind == dtype.Bool:
		for i, x := range b {
			if x > 1 {
				first = i
				break
			}
		}
		fix = func(x byte) byte {
			if x != 0 {
				return 1
			}
			return 0
		}
	case (t.Kind == dtype.Int || t.Kind == dtype.Uint) && t.Size == 1 && t.Bits > 0 && t.Bits < 8:
		shift := 8 - t.Bits
		if t.Kind == dtype.Int {
			fix = func(x byte) byte { return byte(int8(x<<shift) >> shift) }
			for i, x := range b {
				if byte(int8(x<<shift)>>shift) != x {
					first = i
					break
				}
			}
		} else {
			fix = func(x byte) byte { return x << shift >> shift }
			for i, x := range b {
				if x>>t.Bits != 0 {
					first = i
					break
				}
			}
		}
	}
	if first < 0 {
		return b
	}
	out := make([]byte, len(b))
	copy(out, b[:first])
	for j := first; j < len(b); j++ {
		out[j] = fix(b[j])
	}
	return out
}
