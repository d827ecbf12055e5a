package codec

import (
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"

	"github.com/zarrfs/zarrfs/zarr/dtype"
)

func init() {
	for _, prefix := range []string{"", "numcodecs."} {
		Register(prefix+"vlen-utf8", newVlen(dtype.String))
		Register(prefix+"vlen-bytes", newVlen(dtype.Bytes))
	}
}

// vlenCodec is vlen-utf8 / vlen-bytes, the format of numcodecs VLenUTF8 and
// VLenBytes: a uint32 LE item count, then per item a uint32 LE length and
// the bytes.
type vlenCodec struct {
	spec Spec
	utf8 bool
}

func newVlen(kind dtype.Kind) Factory {
	return func(_ json.RawMessage, spec Spec) (any, error) {
		if spec.Type.Kind != kind {
			return nil, configError("vlen-%s cannot serialise %s elements", map[dtype.Kind]string{dtype.String: "utf8", dtype.Bytes: "bytes"}[kind], spec.Type)
		}
		return &vlenCodec{spec: spec, utf8: kind == dtype.String}, nil
	}
}

func (*vlenCodec) EncodedSize() (int, bool) { return 0, false }

func (c *vlenCodec) Encode(ch *Chunk) ([]byte, error) {
	if err := ch.Check(c.spec); err != nil {
		return nil, err
	}
	size := 4
	for i, it := range ch.Items {
		if c.utf8 && !utf8.Valid(it) {
			return nil, corrupt("item %d is not valid UTF-8", i)
		}
		size += 4 + len(it)
	}
	out := make([]byte, 4, size)
	binary.LittleEndian.PutUint32(out, uint32(len(ch.Items)))
	for _, it := range ch.Items {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(it)))
		out = append(out, it...)
	}
	return out, nil
}

// Decode returns items that share memory with b.
func (c *vlenCodec) Decode(b []byte) (*Chunk, error) {
	n := c.spec.NumElements()
	if len(b) < 4 {
		return nil, corrupt("%d bytes is too short for the item count", len(b))
	}
	if got := binary.LittleEndian.Uint32(b); uint64(got) != uint64(n) {
		return nil, corrupt("%d items, want %d", got, n)
	}
	if (len(b)-4)/4 < n {
		return nil, corrupt("%d bytes cannot hold %d items", len(b), n)
	}
	items := make([][]byte, n)
	p := 4
	for i := range items {
		if len(b)-p < 4 {
			return nil, corrupt("truncated at item %d", i)
		}
		l := int(binary.LittleEndian.Uint32(b[p:]))
		p += 4
		if l > len(b)-p {
			return nil, corrupt("item %d of %d bytes overruns the data", i, l)
		}
		it := b[p : p+l : p+l]
		if c.utf8 && !utf8.Valid(it) {
			return nil, corrupt("item %d is not valid UTF-8", i)
		}
		items[i] = it
		p += l
	}
	if p != len(b) {
		return nil, corrupt("%d trailing bytes after %d items", len(b)-p, n)
	}
	return &Chunk{Shape: c.spec.Shape, Type: c.spec.Type, Items: items}, nil
}
