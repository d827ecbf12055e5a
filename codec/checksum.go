package codec

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/adler32"
	"hash/crc32"
)

func init() {
	Register("crc32c", newCRC32C)
	Register("numcodecs.crc32c", newChecksum(CRC32C, false))
	Register("numcodecs.crc32", newChecksum(crc32.ChecksumIEEE, true))
	Register("numcodecs.adler32", newChecksum(adler32.Checksum, true))
	Register("numcodecs.fletcher32", newFletcher32)
}

// Castagnoli is the crc32c table, for the crc32c codec and for zarrfs's
// own checksums (journal records).
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C is the crc32c checksum of b, as the crc32c codec stores it.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, Castagnoli) }

// EndsWithCRC32C reports whether b ends with the crc32c of the bytes
// before it, as the crc32c codec leaves a chunk.
func EndsWithCRC32C(b []byte) bool {
	return len(b) >= 4 && CRC32C(b[:len(b)-4]) == binary.LittleEndian.Uint32(b[len(b)-4:])
}

// checksumCodec stores a 32-bit little-endian checksum of the payload before
// it (numcodecs crc32 and adler32 by default) or after it (v3 crc32c,
// numcodecs crc32c and fletcher32).
type checksumCodec struct {
	sum   func([]byte) uint32
	start bool
}

func newCRC32C(config json.RawMessage, _ Spec) (any, error) {
	return &checksumCodec{sum: CRC32C}, nil
}

// newChecksum is the factory of a numcodecs Checksum32 codec, whose
// "location" ("start" or "end") defaults per codec.
func newChecksum(sum func([]byte) uint32, start bool) Factory {
	return func(config json.RawMessage, _ Spec) (any, error) {
		var cfg struct {
			Location *string `json:"location"`
		}
		if err := parseConfig(config, &cfg); err != nil {
			return nil, err
		}
		c := &checksumCodec{sum: sum, start: start}
		if cfg.Location != nil {
			switch *cfg.Location {
			case "start":
				c.start = true
			case "end":
				c.start = false
			default:
				return nil, configError("checksum location must be \"start\" or \"end\", got %q", *cfg.Location)
			}
		}
		return c, nil
	}
}

func newFletcher32(json.RawMessage, Spec) (any, error) {
	return &checksumCodec{sum: fletcher32}, nil
}

func (*checksumCodec) EncodedSize(n int) (int, bool) { return n + 4, true }

func (c *checksumCodec) Encode(b []byte) ([]byte, error) {
	out := make([]byte, len(b)+4)
	sum := c.sum(b)
	if c.start {
		binary.LittleEndian.PutUint32(out, sum)
		copy(out[4:], b)
	} else {
		copy(out, b)
		binary.LittleEndian.PutUint32(out[len(b):], sum)
	}
	return out, nil
}

// Decode returns a subslice of b.
func (c *checksumCodec) Decode(b []byte, maxSize int) ([]byte, error) {
	if len(b) < 4 {
		return nil, corrupt("%d bytes is too short for a 4-byte checksum", len(b))
	}
	payload, stored := b[:len(b)-4], b[len(b)-4:]
	if c.start {
		payload, stored = b[4:], b[:4]
	}
	if maxSize >= 0 && len(payload) > maxSize {
		return nil, sizeExceeded(maxSize)
	}
	if got, want := c.sum(payload), binary.LittleEndian.Uint32(stored); got != want {
		return nil, checksumError(got, want)
	}
	return payload, nil
}

func checksumError(got, want uint32) error {
	return fmt.Errorf("%w: computed %#08x, stored %#08x", ErrChecksum, got, want)
}

// fletcher32 is HDF5's Fletcher-32 (H5_checksum_fletcher32), which
// numcodecs uses: big-endian 16-bit words, an odd trailing byte as the high
// half of a last word, sums folded every 360 words.
func fletcher32(b []byte) uint32 {
	var sum1, sum2 uint32
	words := len(b) / 2
	p := 0
	for words > 0 {
		n := min(words, 360)
		words -= n
		for ; n > 0; n-- {
			sum1 += uint32(b[p])<<8 | uint32(b[p+1])
			sum2 += sum1
			p += 2
		}
		sum1 = sum1&0xffff + sum1>>16
		sum2 = sum2&0xffff + sum2>>16
	}
	if len(b)%2 == 1 {
		sum1 += uint32(b[p]) << 8
		sum2 += sum1
		sum1 = sum1&0xffff + sum1>>16
		sum2 = sum2&0xffff + sum2>>16
	}
	sum1 = sum1&0xffff + sum1>>16
	sum2 = sum2&0xffff + sum2>>16
	return sum2<<16 | sum1
}
