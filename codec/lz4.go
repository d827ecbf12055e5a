package codec

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// numcodecs "lz4": the decoded size as uint32 LE, then one raw LZ4 block.

func init() { Register("numcodecs.lz4", newLZ4) }

type lz4Codec struct{ acceleration int }

var lz4Compressors sync.Pool

func newLZ4(config json.RawMessage, _ Spec) (any, error) {
	cfg := struct {
		Acceleration pyInt `json:"acceleration"`
	}{1}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	return &lz4Codec{int(max(cfg.Acceleration, 1))}, nil
}

func (*lz4Codec) EncodedSize(int) (int, bool) { return 0, false }

func (c *lz4Codec) Encode(b []byte) ([]byte, error) {
	if uint64(len(b)) > 0x7e000000 { // LZ4_MAX_INPUT_SIZE
		return nil, fmt.Errorf("lz4: %d bytes is too large for one LZ4 block", len(b))
	}
	out := make([]byte, 4+lz4.CompressBlockBound(len(b)))
	binary.LittleEndian.PutUint32(out, uint32(len(b)))
	comp, _ := lz4Compressors.Get().(*lz4.CompressorCCompat)
	if comp == nil {
		comp = new(lz4.CompressorCCompat)
	}
	comp.Acceleration = c.acceleration
	n, err := comp.CompressBlock(b, out[4:])
	lz4Compressors.Put(comp)
	if err != nil {
		return nil, err
	}
	if n == 0 { // empty input: a block of one empty literal run
		out[4], n = 0, 1
	}
	return out[:4+n], nil
}

func (c *lz4Codec) Decode(b []byte, maxSize int) ([]byte, error) {
	if len(b) < 4 {
		return nil, corrupt("lz4: %d bytes is shorter than the size header", len(b))
	}
	size := int(binary.LittleEndian.Uint32(b))
	if maxSize >= 0 && size > maxSize {
		return nil, sizeExceeded(maxSize)
	}
	if size > 255*len(b)+16 { // beyond LZ4's best ratio: do not allocate it
		return nil, corrupt("lz4: header says %d bytes, more than %d bytes of LZ4 can hold", size, len(b)-4)
	}
	out := make([]byte, size)
	n, err := lz4.UncompressBlock(b[4:], out)
	if err != nil {
		return nil, corruptErr(fmt.Errorf("lz4: %w", err))
	}
	if n != size {
		return nil, corrupt("lz4: block decodes to %d bytes, header says %d", n, size)
	}
	return out, nil
}
