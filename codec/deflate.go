package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// The deflate codecs: gzip (RFC 1952; v3 "gzip", numcodecs "gzip") and
// zlib (RFC 1950; numcodecs "zlib"), with pooled readers and writers.

func init() {
	Register("gzip", newGzip)
	Register("numcodecs.gzip", newGzip)
	Register("numcodecs.zlib", newZlib)
}

type gzipCodec struct{ level int }

func newGzip(config json.RawMessage, _ Spec) (any, error) {
	level, err := parseLevel(config, 1, -1, 9)
	if err != nil {
		return nil, err
	}
	return &gzipCodec{level}, nil
}

var (
	gzipReaders sync.Pool
	gzipWriters [11]sync.Pool // by level+1
)

func (*gzipCodec) EncodedSize(int) (int, bool) { return 0, false }

func (c *gzipCodec) Encode(b []byte) ([]byte, error) {
	return encodePooled(&gzipWriters[c.level+1], b, func(w io.Writer) (*gzip.Writer, error) {
		return gzip.NewWriterLevel(w, c.level)
	})
}

func (c *gzipCodec) Decode(b []byte, maxSize int) ([]byte, error) {
	r, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if r == nil {
		r, err = gzip.NewReader(bytes.NewReader(b))
	} else {
		err = r.Reset(bytes.NewReader(b))
	}
	if err != nil {
		return nil, corruptErr(err)
	}
	defer gzipReaders.Put(r)
	// The trailer records the size (mod 2^32) of the last member; trust it
	// only as far as deflate can expand (1032:1).
	hint := 0
	if len(b) >= 18 {
		hint = int(binary.LittleEndian.Uint32(b[len(b)-4:]))
		hint = min(hint, 1032*len(b))
	}
	out, err := readAllLimited(r, initialCap(hint, len(b), maxSize), maxSize)
	return out, mapLibError(err)
}

// ---- zlib (RFC 1950), numcodecs "zlib" ----

type zlibCodec struct{ level int }

func newZlib(config json.RawMessage, _ Spec) (any, error) {
	level, err := parseLevel(config, 1, -1, 9)
	if err != nil {
		return nil, err
	}
	return &zlibCodec{level}, nil
}

var (
	zlibReaders sync.Pool
	zlibWriters [11]sync.Pool
)

func (*zlibCodec) EncodedSize(int) (int, bool) { return 0, false }

func (c *zlibCodec) Encode(b []byte) ([]byte, error) {
	return encodePooled(&zlibWriters[c.level+1], b, func(w io.Writer) (*zlib.Writer, error) {
		return zlib.NewWriterLevel(w, c.level)
	})
}

func (c *zlibCodec) Decode(b []byte, maxSize int) ([]byte, error) {
	r, _ := zlibReaders.Get().(io.ReadCloser)
	var err error
	if r == nil {
		r, err = zlib.NewReader(bytes.NewReader(b))
	} else {
		err = r.(zlib.Resetter).Reset(bytes.NewReader(b), nil)
	}
	if err != nil {
		return nil, corruptErr(err)
	}
	defer zlibReaders.Put(r)
	out, err := readAllLimited(r, initialCap(0, len(b), maxSize), maxSize)
	return out, mapLibError(err)
}

// pooledWriter is a compressor that can be reused for another output.
type pooledWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// encodePooled compresses b with a writer from pool, made by newWriter when
// the pool is empty: deflate writers allocate hundreds of KiB each.
func encodePooled[W pooledWriter](pool *sync.Pool, b []byte, newWriter func(io.Writer) (W, error)) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(b)/2 + 64)
	w, ok := pool.Get().(W)
	if ok {
		w.Reset(&buf)
	} else {
		var err error
		if w, err = newWriter(&buf); err != nil {
			return nil, err
		}
	}
	defer func() { w.Reset(io.Discard); pool.Put(w) }()
	return compressAll(w, &buf, b)
}
