package codec

import (
	"bytes"
	stdbzip2 "compress/bzip2"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	dsbzip2 "github.com/dsnet/compress/bzip2"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

func init() {
	Register("gzip", newGzip)
	Register("numcodecs.gzip", newGzip)
	Register("numcodecs.zlib", newZlib)
	Register("zstd", newZstd)
	Register("numcodecs.zstd", newZstd)
	Register("numcodecs.lz4", newLZ4)
	Register("numcodecs.bz2", newBZ2)
	Register("numcodecs.lzma", newLZMA)
}

// levelConfig is the configuration of gzip, zlib and bz2.
type levelConfig struct {
	Level *int `json:"level"`
}

func parseLevel(config json.RawMessage, def, lo, hi int) (int, error) {
	var cfg levelConfig
	if err := parseConfig(config, &cfg); err != nil {
		return 0, err
	}
	if cfg.Level == nil {
		return def, nil
	}
	if *cfg.Level < lo || *cfg.Level > hi {
		return 0, configError("level %d is outside %d..%d", *cfg.Level, lo, hi)
	}
	return *cfg.Level, nil
}

// ---- gzip (RFC 1952), v3 "gzip" and numcodecs "gzip" ----

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
	pool := &gzipWriters[c.level+1]
	var buf bytes.Buffer
	buf.Grow(len(b)/2 + 64)
	w, _ := pool.Get().(*gzip.Writer)
	if w == nil {
		var err error
		if w, err = gzip.NewWriterLevel(&buf, c.level); err != nil {
			return nil, err
		}
	} else {
		w.Reset(&buf)
	}
	defer func() { w.Reset(io.Discard); pool.Put(w) }()
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
	pool := &zlibWriters[c.level+1]
	var buf bytes.Buffer
	buf.Grow(len(b)/2 + 64)
	w, _ := pool.Get().(*zlib.Writer)
	if w == nil {
		var err error
		if w, err = zlib.NewWriterLevel(&buf, c.level); err != nil {
			return nil, err
		}
	} else {
		w.Reset(&buf)
	}
	defer func() { w.Reset(io.Discard); pool.Put(w) }()
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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

// ---- zstd (RFC 8878), v3 "zstd" and numcodecs "zstd" ----

// zstdCodec encodes with shared encoders (EncodeAll is safe for concurrent
// use). Inputs below 256 bytes go to a single-segment encoder: otherwise
// klauspost leaves the content size out of the frame header, and numcodecs
// before 0.15 (zarr-python 2) cannot decode such frames.
type zstdCodec struct {
	enc, small *zstd.Encoder
}

const zstdSmall = 256

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
		Level    int  `json:"level"`
		Checksum bool `json:"checksum"`
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
	level := zstd.EncoderLevelFromZstd(cfg.Level)
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
	return zstdDecode(b, maxSize)
}

func zstdDecode(b []byte, maxSize int) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(b); err != nil {
		return nil, corruptErr(err)
	}
	if h.HasFCS {
		if maxSize >= 0 && h.FrameContentSize > uint64(maxSize) {
			return nil, sizeExceeded(maxSize)
		}
		if h.FrameContentSize <= zstdMaxMemory {
			out, err := zstdDec.DecodeAll(b, make([]byte, 0, int(h.FrameContentSize)))
			if !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				// Otherwise more frames follow: decode again below.
				return out, mapLibError(err)
			}
		}
	}
	if maxSize >= 0 && maxSize <= preallocLimit {
		out, err := zstdDec.DecodeAll(b, make([]byte, 0, maxSize))
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, sizeExceeded(maxSize)
		}
		return out, mapLibError(err)
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
	out, err := readAllLimited(d, initialCap(0, len(b), maxSize), maxSize)
	return out, mapLibError(err)
}

// ---- numcodecs "lz4": uint32 LE decoded size, then one raw LZ4 block ----

type lz4Codec struct{ acceleration int }

var lz4Compressors sync.Pool

func newLZ4(config json.RawMessage, _ Spec) (any, error) {
	cfg := struct {
		Acceleration int `json:"acceleration"`
	}{1}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	return &lz4Codec{max(cfg.Acceleration, 1)}, nil
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

// ---- numcodecs "bz2" ----

type bz2Codec struct{ level int }

func newBZ2(config json.RawMessage, _ Spec) (any, error) {
	level, err := parseLevel(config, 1, 1, 9)
	if err != nil {
		return nil, err
	}
	return &bz2Codec{level}, nil
}

func (*bz2Codec) EncodedSize(int) (int, bool) { return 0, false }

func (c *bz2Codec) Encode(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := dsbzip2.NewWriter(&buf, &dsbzip2.WriterConfig{Level: c.level})
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (c *bz2Codec) Decode(b []byte, maxSize int) ([]byte, error) {
	r := stdbzip2.NewReader(bytes.NewReader(b))
	return readAllLimited(r, initialCap(0, len(b), maxSize), maxSize)
}

// ---- numcodecs "lzma" (Python's lzma module) ----

// Python lzma constants.
const (
	lzmaFormatAuto  = 0
	lzmaFormatXZ    = 1
	lzmaFormatAlone = 2
	lzmaFormatRaw   = 3
)

// lzmaMaxDict bounds the dictionary a stream may ask for: the largest any
// xz preset uses. Larger values only come from hostile or exotic streams and
// would make the decoder allocate them.
const lzmaMaxDict = 64 << 20

type lzmaCodec struct {
	format  int
	check   byte
	dictCap int
}

func newLZMA(config json.RawMessage, _ Spec) (any, error) {
	cfg := struct {
		Format  int             `json:"format"`
		Check   int             `json:"check"`
		Preset  *int            `json:"preset"`
		Filters json.RawMessage `json:"filters"`
	}{Format: lzmaFormatXZ, Check: -1}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	if f := bytes.TrimSpace(cfg.Filters); len(f) > 0 && string(f) != "null" {
		return nil, configError("lzma: custom filter chains are not supported (github.com/ulikunitz/xz implements LZMA2 only)")
	}
	c := &lzmaCodec{format: cfg.Format, dictCap: 8 << 20}
	switch cfg.Format {
	case lzmaFormatAuto, lzmaFormatXZ, lzmaFormatAlone:
	case lzmaFormatRaw:
		return nil, configError("lzma: FORMAT_RAW is not supported")
	default:
		return nil, configError("lzma: unknown format %d", cfg.Format)
	}
	switch cfg.Check {
	case -1:
		c.check = xz.CRC64
		if cfg.Format == lzmaFormatAlone {
			c.check = xz.None
		}
	case 0, 1, 4, 10:
		c.check = byte(cfg.Check)
	default:
		return nil, configError("lzma: check %d is not supported (0 none, 1 CRC32, 4 CRC64, 10 SHA256)", cfg.Check)
	}
	if cfg.Preset != nil {
		// xz's dictionary sizes by preset level; the extreme flag only
		// changes the match finder.
		dicts := [10]int{256 << 10, 1 << 20, 2 << 20, 4 << 20, 4 << 20, 8 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20}
		p := *cfg.Preset &^ (1 << 31)
		if p < 0 || p > 9 {
			return nil, configError("lzma: preset %d is outside 0..9", *cfg.Preset)
		}
		c.dictCap = dicts[p]
	}
	return c, nil
}

func (*lzmaCodec) EncodedSize(int) (int, bool) { return 0, false }

func (c *lzmaCodec) Encode(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	if c.format == lzmaFormatAlone {
		w, err = lzma.WriterConfig{DictCap: c.dictCap, EOSMarker: true}.NewWriter(&buf)
	} else {
		w, err = xz.WriterConfig{DictCap: c.dictCap, CheckSum: c.check, NoCheckSum: c.check == xz.None}.NewWriter(&buf)
	}
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var xzMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0}

func (c *lzmaCodec) Decode(b []byte, maxSize int) ([]byte, error) {
	format := c.format
	if format == lzmaFormatAuto {
		format = lzmaFormatAlone
		if bytes.HasPrefix(b, xzMagic) {
			format = lzmaFormatXZ
		}
	}
	var r io.Reader
	var err error
	if format == lzmaFormatXZ {
		if err := checkXZDict(b); err != nil {
			return nil, err
		}
		r, err = xz.NewReader(bytes.NewReader(b))
	} else {
		r, err = lzma.ReaderConfig{DictCap: lzmaMaxDict}.NewReader(bytes.NewReader(b))
	}
	if err != nil {
		return nil, corruptErr(err)
	}
	return readAllLimited(r, initialCap(0, len(b), maxSize), maxSize)
}

// checkXZDict refuses an xz stream whose first block asks for a dictionary
// above lzmaMaxDict, before the decoder allocates it.
func checkXZDict(b []byte) error {
	const streamHeader = 12
	if len(b) < streamHeader+2 || !bytes.HasPrefix(b, xzMagic) {
		return corrupt("lzma: not an xz stream")
	}
	h := b[streamHeader:]
	if h[0] == 0 { // the index: no blocks
		return nil
	}
	size := (int(h[0]) + 1) * 4
	if len(h) < size {
		return corrupt("lzma: truncated xz block header")
	}
	flags := h[1]
	p := 2
	varint := func() uint64 {
		v, n := binary.Uvarint(h[p:size])
		if n <= 0 {
			p = size
			return 0
		}
		p += n
		return v
	}
	if flags&0x40 != 0 {
		varint() // compressed size
	}
	if flags&0x80 != 0 {
		varint() // uncompressed size
	}
	for i := 0; i <= int(flags&3) && p < size; i++ {
		id, props := varint(), varint()
		if props > uint64(size-p) {
			break
		}
		n := int(props)
		if id == 0x21 && n == 1 { // LZMA2
			bitsV := h[p] & 0x3f
			if bitsV > 40 {
				return corrupt("lzma: invalid LZMA2 dictionary size")
			}
			dict := uint64(2|bitsV&1) << (bitsV/2 + 11)
			if bitsV == 40 || dict > lzmaMaxDict {
				return corrupt("lzma: dictionary of %d bytes exceeds the %d-byte limit", dict, lzmaMaxDict)
			}
		}
		p += n
	}
	return nil
}
