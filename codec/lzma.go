package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"

	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// numcodecs "lzma", Python's lzma module: xz (the default, with CRC64 and
// preset 6) and the legacy .lzma format, through github.com/ulikunitz/xz,
// which implements the LZMA2 filter only.

func init() { Register("numcodecs.lzma", newLZMA) }

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
	return compressAll(w, &buf, b)
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
