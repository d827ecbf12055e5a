package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"unsafe"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// parseConfig decodes a codec configuration into v, which holds the
// defaults. An absent or null configuration keeps them. Unknown keys are
// ignored: writers add informational keys (numcodecs ids, versions).
func parseConfig(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return nil
}

// parseLevel reads the "level" of gzip, zlib and bz2 configurations.
func parseLevel(config json.RawMessage, def, lo, hi int) (int, error) {
	var cfg struct {
		Level *pyInt `json:"level"`
	}
	if err := parseConfig(config, &cfg); err != nil {
		return 0, err
	}
	if cfg.Level == nil {
		return def, nil
	}
	level := int(*cfg.Level)
	if level < lo || level > hi {
		return 0, configError("level %d is outside %d..%d", level, lo, hi)
	}
	return level, nil
}

// configError formats an ErrConfig.
func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// corrupt formats an ErrCorrupt.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// corruptErr wraps a library decoding error as ErrCorrupt, keeping the
// library's error in the chain for mapLibError.
func corruptErr(err error) error {
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrChecksum) {
		return err
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

// mapLibError turns the checksum errors of the compression libraries into
// ErrChecksum.
func mapLibError(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range []error{gzip.ErrChecksum, zlib.ErrChecksum, zstd.ErrCRCMismatch} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %v", ErrChecksum, e)
		}
	}
	return corruptErr(err)
}

// sizeExceeded reports output larger than the caller's bound.
func sizeExceeded(maxSize int) error {
	return fmt.Errorf("%w: decoded data exceeds %d bytes", ErrCorrupt, maxSize)
}

// preallocLimit is the largest decoded size that decoders reserve up front
// from maxSize alone. The pipeline passes the exact decoded size as maxSize
// whenever it is known, so reserving it avoids growing the output; loose
// bounds (MaxDecodedSize) are larger than this and are not reserved.
const preallocLimit = 256 << 20

// initialCap is the capacity to start a decoded buffer with: hint when the
// format recorded the size, else maxSize when it is small enough to be the
// exact size, else a multiple of the input size.
func initialCap(hint, inLen, maxSize int) int {
	if hint <= 0 {
		if maxSize >= 0 && maxSize <= preallocLimit {
			hint = maxSize
		} else {
			hint = 4*inLen + 4096
		}
	}
	if maxSize >= 0 && hint > maxSize {
		hint = maxSize
	}
	return hint
}

// compressAll writes b through the compressor w, which writes into buf,
// and closes w to flush its last block; the result is buf's bytes.
func compressAll(w io.WriteCloser, buf *bytes.Buffer, b []byte) ([]byte, error) {
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readAllLimited reads r to EOF into a buffer starting with capacity
// initCap, failing with ErrCorrupt once more than maxSize bytes (maxSize
// >= 0) come out.
func readAllLimited(r io.Reader, initCap, maxSize int) ([]byte, error) {
	if maxSize >= 0 && initCap > maxSize {
		initCap = maxSize
	}
	buf := make([]byte, 0, max(initCap, 64))
	for {
		end := cap(buf)
		if maxSize >= 0 && end > maxSize {
			end = maxSize
		}
		if len(buf) == end {
			if len(buf) == maxSize {
				// Full at the bound: the stream must end here.
				return buf, expectEOF(r, maxSize)
			}
			nb := make([]byte, len(buf), 2*cap(buf))
			copy(nb, buf)
			buf = nb
			continue
		}
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, corruptErr(err)
		}
	}
}

// expectEOF checks that r has no more data after limit bytes.
func expectEOF(r io.Reader, limit int) error {
	var probe [1]byte
	for {
		n, err := r.Read(probe[:])
		if n > 0 {
			return sizeExceeded(limit)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return corruptErr(err)
		}
	}
}

// swapBytes copies src into dst reversing the byte order of each size-byte
// unit (size 1, 2, 4, 8), eight bytes at a time. dst and src may be the
// same slice.
func swapBytes(dst, src []byte, size int) {
	n := len(src)
	i := 0
	switch size {
	case 1:
		copy(dst, src)
		return
	case 2:
		for ; i+8 <= n; i += 8 {
			x := binary.LittleEndian.Uint64(src[i:])
			x = (x&0x00ff00ff00ff00ff)<<8 | (x>>8)&0x00ff00ff00ff00ff
			binary.LittleEndian.PutUint64(dst[i:], x)
		}
		for ; i+2 <= n; i += 2 {
			dst[i], dst[i+1] = src[i+1], src[i]
		}
	case 4:
		for ; i+8 <= n; i += 8 {
			x := binary.LittleEndian.Uint64(src[i:])
			binary.LittleEndian.PutUint64(dst[i:], bits.RotateLeft64(bits.ReverseBytes64(x), 32))
		}
		for ; i+4 <= n; i += 4 {
			binary.LittleEndian.PutUint32(dst[i:], binary.BigEndian.Uint32(src[i:]))
		}
	case 8:
		for ; i+8 <= n; i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], binary.BigEndian.Uint64(src[i:]))
		}
	default:
		for ; i+size <= n; i += size {
			for j := 0; j < size/2; j++ {
				dst[i+j], dst[i+size-1-j] = src[i+size-1-j], src[i+j]
			}
		}
	}
}

// asWords views b as a slice of T when b is suitably aligned, so that
// element moves compile to word moves. ok is false for misaligned input.
func asWords[T any](b []byte) (s []T, ok bool) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(b) == 0 {
		return nil, true
	}
	if uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(zero) != 0 || len(b)%size != 0 {
		return nil, false
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/size), true
}
