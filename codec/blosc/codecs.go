package blosc

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Internal streams (c-blosc blosc.c): blosclz, a raw LZ4 block, a raw snappy
// block, a zlib (RFC 1950) stream, or a complete zstd frame. Each split
// decompresses to exactly its expected length.

// zstdDecoder is shared: DecodeAll is safe for concurrent use. The cap limit
// makes it refuse to produce more than cap(dst), so a hostile frame cannot
// make it allocate.
var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxWindow(1<<27),
	)
	if err != nil {
		panic(err) // only reachable with invalid static options
	}
	return d
})

// zlibReader is a pooled zlib decompressor with its input reader.
type zlibReader struct {
	src bytes.Reader
	r   io.ReadCloser
	one [1]byte // for the final read; a local would escape
}

var zlibReaderPool sync.Pool // of *zlibReader

// decodeStream decompresses src, a stream of the given codec, into all of dst.
// Bytes between len(dst) and cap(dst) are scratch the codec may overwrite.
// Its errors describe the stream; the caller wraps them in ErrCorrupt.
func decodeStream(codec int, dst, src []byte) error {
	switch codec {
	case codecBloscLZ:
		n, err := blosclzDecode(dst, src)
		if err != nil {
			return err
		}
		return checkLen("blosclz", n, len(dst))
	case codecLZ4:
		n, err := lz4.UncompressBlock(src, dst)
		if err != nil {
			return fmt.Errorf("lz4: %v", err)
		}
		return checkLen("lz4", n, len(dst))
	case codecSnappy:
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return fmt.Errorf("snappy: %v", err)
		}
		if err := checkLen("snappy", n, len(dst)); err != nil {
			return err
		}
		if _, err := snappy.Decode(dst[:n], src); err != nil {
			return fmt.Errorf("snappy: %v", err)
		}
		return nil
	case codecZlib:
		return decodeZlib(dst, src)
	case codecZstd:
		out, err := zstdDecoder().DecodeAll(src, dst[:0:cap(dst)])
		if err != nil {
			return fmt.Errorf("zstd: %v", err)
		}
		if len(out) > 0 && &out[0] != &dst[0] {
			return fmt.Errorf("zstd: output reallocated") // cannot happen with the cap limit
		}
		return checkLen("zstd", len(out), len(dst))
	}
	return fmt.Errorf("%w: internal codec id %d", ErrUnsupported, codec)
}

func checkLen(codec string, got, want int) error {
	if got != want {
		return fmt.Errorf("%s stream decodes to %d bytes, want %d", codec, got, want)
	}
	return nil
}

func decodeZlib(dst, src []byte) error {
	z, _ := zlibReaderPool.Get().(*zlibReader)
	if z == nil {
		z = new(zlibReader)
	}
	defer zlibReaderPool.Put(z)
	z.src.Reset(src)
	var err error
	if z.r == nil {
		z.r, err = zlib.NewReader(&z.src)
	} else {
		err = z.r.(zlib.Resetter).Reset(&z.src, nil)
	}
	if err != nil {
		z.r = nil
		return fmt.Errorf("zlib: %v", err)
	}
	if n, err := io.ReadFull(z.r, dst); err != nil {
		return fmt.Errorf("zlib: %v after %d of %d bytes", err, n, len(dst))
	}
	// Reading to the end verifies the Adler-32 checksum and that the stream
	// holds no more data than expected.
	for range 16 { // a Reader may return (0, nil); do not spin forever
		n, err := z.r.Read(z.one[:])
		switch {
		case n != 0:
			return fmt.Errorf("zlib stream decodes to more than %d bytes", len(dst))
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("zlib: %v", err)
		}
	}
	return fmt.Errorf("zlib stream does not end")
}
