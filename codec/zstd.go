package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstd (RFC 8878): v3 "zstd" and numcodecs "zstd".

func init() {
	Register("zstd", newZstd)
	Register("numcodecs.zstd", newZstd)
}

// zstdCodec encodes with shared encoders (EncodeAll is safe for concurrent
// use). Inputs below 256 bytes go to a single-segment encoder: otherwise
// klauspost leaves the content size out of the frame header, and numcodecs
// before 0.15 (zarr-python 2) cannot decode such frames.
type zstdCodec struct {
	enc, small *zstd.Encoder
}

const zstdSmall = 256

// zstdSlack is spare output capacity the decoder's unchecked block copies
// need (klauspost/compress's compressedBlockOverAlloc).
const zstdSlack = 16

// zstdMaxMemory bounds what one DecodeAll may produce whatever the caller's
// bound, as a last line against hostile frames.
const zstdMaxMemory = 1 << 31

var (
	// zstdDec serves every one-shot decode. WithDecodeAllCapLimit makes
	// DecodeAll stop at cap(dst), which is how maxSize is enforced.
	zstdDec, _ = zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(zstdMaxMemory),
		zstd.WithDecodeAllCapLimit(true))
	// zstdStreams decode frames whose size is neither recorded nor
	// bounded tightly enough to reserve, in a streaming fashion.
	zstdStreams sync.Pool

	zstdEncMu sync.Mutex
	zstdEncs  = map[zstdEncKey]*zstd.Encoder{}
)

type zstdEncKey struct {
	level           zstd.EncoderLevel
	checksum, small bool
}

func newZstd(config json.RawMessage, _ Spec) (any, error) {
	var cfg struct {
		Level    pyInt `json:"level"`
		Checksum bool  `json:"checksum"`
	}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	if cfg.Level < -131072 || cfg.Level > 22 {
		return nil, configError("zstd level %d is outside -131072..22", cfg.Level)
	}
	if cfg.Level == 0 {
		cfg.Level = 3 // zstd's default level
	}
	level := zstd.EncoderLevelFromZstd(int(cfg.Level))
	enc, err := zstdEncoder(zstdEncKey{level, cfg.Checksum, false})
	if err != nil {
		return nil, err
	}
	small, err := zstdEncoder(zstdEncKey{level, cfg.Checksum, true})
	if err != nil {
		return nil, err
	}
	return &zstdCodec{enc, small}, nil
}

// zstdEncoder returns the shared encoder for key.
func zstdEncoder(key zstdEncKey) (*zstd.Encoder, error) {
	zstdEncMu.Lock()
	defer zstdEncMu.Unlock()
	if e := zstdEncs[key]; e != nil {
		return e, nil
	}
	opts := []zstd.EOption{
		zstd.WithEncoderLevel(key.level),
		zstd.WithEncoderCRC(key.checksum),
		zstd.WithZeroFrames(true),
	}
	if key.small {
		opts = append(opts, zstd.WithSingleSegment(true))
	}
	e, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		return nil, err
	}
	zstdEncs[key] = e
	return e, nil
}

func (*zstdCodec) EncodedSize(int) (int, bool) { return 0, false }

func (c *zstdCodec) Encode(b []byte) ([]byte, error) {
	if len(b) < zstdSmall {
		return c.small.EncodeAll(b, nil), nil
	}
	return c.enc.EncodeAll(b, nil), nil
}

func (c *zstdCodec) Decode(b []byte, maxSize int) ([]byte, error) {
	return c.DecodeInto(nil, b, maxSize)
}

func (c *zstdCodec) DecodeInto(dst, b []byte, maxSize int) ([]byte, error) {
	// DecodeAll stops at the capacity it is given (WithDecodeAllCapLimit).
	buffer := func(n int) []byte {
		if cap(dst) >= n {
			return dst[:0:n]
		}
		return make([]byte, 0, n)
	}
	var h zstd.Header
	if err := h.Decode(b); err != nil {
		return nil, corruptErr(err)
	}
	if h.HasFCS {
		if maxSize >= 0 && h.FrameContentSize > uint64(maxSize) {
			return nil, sizeExceeded(maxSize)
		}
		if h.FrameContentSize <= zstdMaxMemory {
			// The slack lets the decoder use its fast copies for the last
			// block too; it only ever fills when more frames follow.
			out, err := zstdDec.DecodeAll(b, buffer(int(h.FrameContentSize)+zstdSlack))
			if err == nil && maxSize >= 0 && len(out) > maxSize {
				return nil, sizeExceeded(maxSize)
			}
			if !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				return zstdResult(out, err)
			}
			// More frames follow the first: decode again below.
		}
	}
	if maxSize >= 0 && maxSize <= preallocLimit {
		out, err := zstdDec.DecodeAll(b, buffer(maxSize))
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, sizeExceeded(maxSize)
		}
		return zstdResult(out, err)
	}
	d, _ := zstdStreams.Get().(*zstd.Decoder)
	if d == nil {
		var err error
		d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(zstdMaxMemory))
		if err != nil {
			return nil, err
		}
	}
	defer zstdStreams.Put(d)
	if err := d.Reset(bytes.NewReader(b)); err != nil {
		return nil, corruptErr(err)
	}
	return zstdResult(readAllLimited(d, initialCap(0, len(b), maxSize), maxSize))
}

func zstdResult(out []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, mapLibError(err)
	}
	return out, nil
}
