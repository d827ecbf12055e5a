package blosc

import (
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// encState is one goroutine's encoder working memory, pooled. Codec state is
// created on first use, since a frame only ever needs one codec.
type encState struct {
	tmp    []byte
	blz    *blzEncoder
	lz4    *lz4.Compressor
	lz4hc  *lz4.CompressorHC
	snappy []byte
	zlib   [10]*zlib.Writer // by level
	sink   fixedWriter
}

var encStatePool = sync.Pool{New: func() any { return new(encState) }}

func getEncState() *encState { return encStatePool.Get().(*encState) }

func putEncState(e *encState) {
	if cap(e.tmp) > maxPooledScratch {
		e.tmp = nil
	}
	if cap(e.snappy) > maxPooledScratch {
		e.snappy = nil
	}
	encStatePool.Put(e)
}

func (e *encState) buf(n int) []byte {
	if cap(e.tmp) < n {
		e.tmp = make([]byte, n)
	}
	return e.tmp[:n]
}

// encodeStream compresses src into dst with the frame's codec and returns
// the compressed length, or 0 when the result does not fit in dst.
func (e *encState) encodeStream(dst, src []byte, p *params) (int, error) {
	switch {
	case p.codec == codecBloscLZ:
		if e.blz == nil {
			e.blz = new(blzEncoder)
		}
		return e.blz.encode(dst, src, p.level), nil
	case p.codec == codecLZ4 && p.hc:
		if e.lz4hc == nil {
			e.lz4hc = new(lz4.CompressorHC)
		}
		// The search depth doubles with each level, as in the LZ4HC levels
		// c-blosc passes clevel to; 2^(L+2) matches c-blosc's ratios on the
		// benchmark data at a higher speed.
		e.lz4hc.Level = lz4.CompressionLevel(1 << (p.level + 2))
		n, err := e.lz4hc.CompressBlock(src, dst)
		if err != nil {
			return 0, nil // does not fit
		}
		return n, nil
	case p.codec == codecLZ4:
		if e.lz4 == nil {
			e.lz4 = new(lz4.Compressor)
		}
		n, err := e.lz4.CompressBlock(src, dst)
		if err != nil {
			return 0, nil
		}
		return n, nil
	case p.codec == codecSnappy:
		if need := s2.MaxEncodedLen(len(src)); cap(e.snappy) < need {
			e.snappy = make([]byte, need)
		}
		// Snappy has no levels; s2 writes standard Snappy blocks at two
		// speed/ratio trade-offs.
		encode := s2.EncodeSnappy
		if p.level > 3 {
			encode = s2.EncodeSnappyBetter
		}
		out := encode(e.snappy[:cap(e.snappy)], src)
		if len(out) > len(dst) {
			return 0, nil
		}
		return copy(dst, out), nil
	case p.codec == codecZlib:
		return e.encodeZlib(dst, src, p.level)
	case p.codec == codecZstd:
		out := zstdEncoder(p.level).EncodeAll(src, dst[:0])
		if len(out) > len(dst) {
			return 0, nil
		}
		if len(out) > 0 && &out[0] != &dst[0] {
			copy(dst, out)
		}
		return len(out), nil
	}
	return 0, nil
}

// fixedWriter is an io.Writer into a fixed buffer that fails once full.
type fixedWriter struct {
	buf []byte
	n   int
}

func (w *fixedWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.buf)-w.n {
		return 0, errFull
	}
	w.n += copy(w.buf[w.n:], p)
	return len(p), nil
}

func (e *encState) encodeZlib(dst, src []byte, level int) (int, error) {
	e.sink = fixedWriter{buf: dst}
	w := e.zlib[level]
	if w == nil {
		var err error
		if w, err = zlib.NewWriterLevel(&e.sink, level); err != nil {
			return 0, err
		}
		e.zlib[level] = w
	} else {
		w.Reset(&e.sink)
	}
	if _, err := w.Write(src); err != nil {
		return 0, nil // full
	}
	if err := w.Close(); err != nil {
		return 0, nil
	}
	return e.sink.n, nil
}

// zstdEncoders holds one encoder per klauspost level. EncodeAll is safe for
// concurrent use, so they are shared.
var zstdEncoders [4]struct {
	once sync.Once
	enc  *zstd.Encoder
}

// zstdEncoder maps a blosc clevel to zstd's level as c-blosc does (2*clevel-1,
// and the maximum for 9) and then to the nearest klauspost level.
func zstdEncoder(clevel int) *zstd.Encoder {
	zl := 2*clevel - 1
	if clevel >= 9 {
		zl = 22
	}
	level := zstd.EncoderLevelFromZstd(zl)
	slot := &zstdEncoders[level-zstd.SpeedFastest]
	slot.once.Do(func() {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(level),
			zstd.WithEncoderCRC(false), // c-blosc's one-shot ZSTD_compress writes none
		)
		if err != nil {
			panic(err) // only reachable with invalid static options
		}
		slot.enc = enc
	})
	return slot.enc
}
