// Package xz reads and writes what liblzma writes for Python's lzma module,
// and so for numcodecs' LZMA codec and GDAL's Zarr driver: the .xz
// container (xz-file-format 1.1.0) with any filter chain Python can ask for
// (delta or the BCJ filters of x86, PowerPC, IA-64, ARM, ARM-Thumb and
// SPARC, before LZMA2), the integrity checks CRC32, CRC64 and SHA-256 and
// concatenated streams; and raw filter chains ending in LZMA1 or LZMA2.
// LZMA and LZMA2 themselves come from github.com/ulikunitz/xz/lzma, whose
// own xz reader knows LZMA2 alone; the container and the filters are
// written here from the format.
//
// Decoding is bounded: by the caller's size limit, and by MaxDict for the
// dictionary a stream asks for, which is allocated no larger than the
// output may grow.
package xz

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// Filter IDs (liblzma's LZMA_FILTER_*).
const (
	IDDelta    uint64 = 0x03
	IDX86      uint64 = 0x04
	IDPowerPC  uint64 = 0x05
	IDIA64     uint64 = 0x06
	IDARM      uint64 = 0x07
	IDARMThumb uint64 = 0x08
	IDSPARC    uint64 = 0x09
	IDLZMA2    uint64 = 0x21
	IDLZMA1    uint64 = 0x4000000000000001
)

// Integrity checks of a stream.
const (
	CheckNone   byte = 0x00
	CheckCRC32  byte = 0x01
	CheckCRC64  byte = 0x04
	CheckSHA256 byte = 0x0a
)

// MaxDict is the largest dictionary a stream may ask for: the largest any
// preset uses (preset 9). Larger ones only come from hostile or exotic
// streams.
const MaxDict = 64 << 20

// maxFilters is the longest chain the format allows.
const maxFilters = 4

var (
	// ErrCorrupt: the data is not what the format allows.
	ErrCorrupt = errors.New("corrupt xz data")
	// ErrUnsupported: valid data or options this package does not implement.
	ErrUnsupported = errors.New("unsupported xz feature")
)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Filter is one filter of a chain with the options that matter for
// decoding and encoding; the last of a chain is LZMA1 or LZMA2.
type Filter struct {
	ID uint64
	// Distance is the delta filter's distance, 1..256.
	Distance int
	// StartOffset is where the BCJ filters start counting addresses.
	StartOffset uint32
	// DictSize is the dictionary size of LZMA1 and LZMA2.
	DictSize int
	// LC, LP and PB are the literal context bits, literal position bits
	// and position bits of LZMA1 (and of the LZMA2 encoder).
	LC, LP, PB int
}

// Name is the filter's name as Python's lzma module calls it.
func (f Filter) Name() string {
	switch f.ID {
	case IDDelta:
		return "delta"
	case IDX86:
		return "x86"
	case IDPowerPC:
		return "powerpc"
	case IDIA64:
		return "ia64"
	case IDARM:
		return "arm"
	case IDARMThumb:
		return "armthumb"
	case IDSPARC:
		return "sparc"
	case IDLZMA2:
		return "lzma2"
	case IDLZMA1:
		return "lzma1"
	}
	return fmt.Sprintf("filter %#x", f.ID)
}

// CheckChain reports whether chain can be decoded and encoded here: one
// to three delta or BCJ filters (or none) before LZMA2, or, raw, before
// LZMA1 or LZMA2.
func CheckChain(chain []Filter, raw bool) error {
	if len(chain) == 0 || len(chain) > maxFilters {
		return fmt.Errorf("%w: a filter chain has 1 to %d filters, not %d", ErrUnsupported, maxFilters, len(chain))
	}
	for i, f := range chain {
		last := i == len(chain)-1
		switch {
		case f.ID == IDLZMA2 || f.ID == IDLZMA1 && raw:
			if !last {
				return fmt.Errorf("%w: %s must be the last filter", ErrUnsupported, f.Name())
			}
			if f.DictSize < lzma.MinDictCap || f.DictSize > MaxDict {
				return fmt.Errorf("%w: %s dictionary of %d bytes is outside %d..%d", ErrUnsupported, f.Name(), f.DictSize, lzma.MinDictCap, MaxDict)
			}
			if f.LC < 0 || f.LP < 0 || f.PB < 0 || f.LC+f.LP > 4 || f.PB > 4 {
				return fmt.Errorf("%w: %s lc=%d lp=%d pb=%d: want lc+lp <= 4, pb <= 4", ErrUnsupported, f.Name(), f.LC, f.LP, f.PB)
			}
		case last:
			return fmt.Errorf("%w: the last filter must be LZMA2 (or, raw, LZMA1), not %s", ErrUnsupported, f.Name())
		case f.ID == IDDelta:
			if f.Distance < 1 || f.Distance > 256 {
				return fmt.Errorf("%w: delta distance %d is outside 1..256", ErrUnsupported, f.Distance)
			}
		case bcjFilters[f.ID] != nil:
		default:
			return fmt.Errorf("%w: %s (liblzma writes delta, x86, powerpc, ia64, arm, armthumb and sparc before LZMA2)", ErrUnsupported, f.Name())
		}
	}
	return nil
}

// unfilter decodes the filters before the last of chain in buf, in place,
// last first.
func unfilter(buf []byte, chain []Filter) {
	for i := len(chain) - 2; i >= 0; i-- {
		apply(buf, chain[i], false)
	}
}

func apply(buf []byte, f Filter, encode bool) {
	if f.ID == IDDelta {
		delta(buf, f.Distance, encode)
		return
	}
	bcjFilters[f.ID](buf, f.StartOffset, encode)
}

// filtered returns b encoded by the filters before the last of chain.
func filtered(b []byte, chain []Filter) []byte {
	if len(chain) < 2 {
		return b
	}
	buf := bytes.Clone(b)
	for _, f := range chain[:len(chain)-1] {
		apply(buf, f, true)
	}
	return buf
}

// DecodeRaw decodes raw data (no container) written by chain, which
// CheckChain accepts; more than maxSize bytes of output (maxSize >= 0)
// is an error.
func DecodeRaw(b []byte, chain []Filter, maxSize int) ([]byte, error) {
	if err := CheckChain(chain, true); err != nil {
		return nil, err
	}
	last := chain[len(chain)-1]
	r := bytes.NewReader(b)
	var out []byte
	var err error
	if last.ID == IDLZMA2 {
		out, err = decodeLZMA2(r, last.DictSize, nil, maxSize)
	} else {
		out, err = decodeLZMA1(r, last, maxSize)
	}
	if err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, corrupt("%d bytes after the end of the data", r.Len())
	}
	unfilter(out, chain)
	return out, nil
}

// EncodeRaw encodes b with chain, which CheckChain accepts, without a
// container: what DecodeRaw and liblzma's raw decoder read with the same
// chain.
func EncodeRaw(b []byte, chain []Filter) ([]byte, error) {
	if err := CheckChain(chain, true); err != nil {
		return nil, err
	}
	last := chain[len(chain)-1]
	data := filtered(b, chain)
	if last.ID == IDLZMA2 {
		return encodeLZMA2(data, last)
	}
	alone, err := encodeLZMA1(data, last)
	if err != nil {
		return nil, err
	}
	return alone[lzma.HeaderLen:], nil // raw data has no .lzma header
}

// encodeLZMA1 writes a .lzma file of data encoded by f.
func encodeLZMA1(data []byte, f Filter) ([]byte, error) {
	var buf bytes.Buffer
	w, err := lzma.WriterConfig{
		Properties: &lzma.Properties{LC: f.LC, LP: f.LP, PB: f.PB},
		DictCap:    f.DictSize,
		Size:       -1,
		EOSMarker:  true,
	}.NewWriter(&buf)
	return writeAll(w, err, &buf, data)
}

// encodeLZMA2 writes raw LZMA2 data of data encoded by f.
func encodeLZMA2(data []byte, f Filter) ([]byte, error) {
	var buf bytes.Buffer
	w, err := lzma.Writer2Config{
		Properties: &lzma.Properties{LC: f.LC, LP: f.LP, PB: f.PB},
		DictCap:    f.DictSize,
	}.NewWriter2(&buf)
	return writeAll(w, err, &buf, data)
}

// writeAll writes data through w, a new encoder writing into buf (err:
// whether making it failed), and closes it; the result is buf's bytes.
func writeAll(w io.WriteCloser, err error, buf *bytes.Buffer, data []byte) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// dictFor is the dictionary to decode with: the stream's, but no larger
// than the output may grow (a match cannot reach further back than the
// output's start), and at least the decoder's minimum.
func dictFor(size, maxSize int) int {
	if maxSize >= 0 && size > maxSize {
		size = maxSize
	}
	return max(size, lzma.MinDictCap)
}

// decodeLZMA2 appends the LZMA2 data read from r, up to its end marker, to
// out; r must not read ahead (bytes.Reader), so that it stops right after
// the marker.
func decodeLZMA2(r io.Reader, dictSize int, out []byte, maxSize int) ([]byte, error) {
	lr, err := lzma.Reader2Config{DictCap: dictFor(dictSize, maxSize)}.NewReader2(r)
	if err != nil {
		return nil, corrupt("lzma2: %v", err)
	}
	return readAll(lr, out, maxSize)
}

// decodeLZMA1 decodes raw LZMA1 data ending in an end marker, as
// liblzma's raw encoder writes it, through a .lzma header made from f.
func decodeLZMA1(r io.Reader, f Filter, maxSize int) ([]byte, error) {
	h := make([]byte, lzma.HeaderLen)
	h[0] = byte((f.PB*5+f.LP)*9 + f.LC)
	binary.LittleEndian.PutUint32(h[1:], uint32(dictFor(f.DictSize, maxSize)))
	binary.LittleEndian.PutUint64(h[5:], ^uint64(0)) // size unknown: an end marker ends the data
	lr, err := lzma.ReaderConfig{DictCap: MaxDict}.NewReader(io.MultiReader(bytes.NewReader(h), r))
	if err != nil {
		return nil, corrupt("lzma1: %v", err)
	}
	return readAll(lr, nil, maxSize)
}

// readAll appends what r yields until io.EOF to out, failing once out
// would exceed maxSize (maxSize >= 0).
func readAll(r io.Reader, out []byte, maxSize int) ([]byte, error) {
	for {
		if len(out) == cap(out) {
			grow := max(cap(out), 4096)
			if maxSize >= 0 && len(out)+grow > maxSize {
				grow = maxSize - len(out) + 1 // one byte over shows an overflow
			}
			out = append(out, make([]byte, grow)...)[:len(out)]
		}
		n, err := r.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if maxSize >= 0 && len(out) > maxSize {
			return nil, corrupt("decoded data exceeds %d bytes", maxSize)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, corrupt("%v", err)
		}
	}
}

var (
	streamMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
	footerMagic = []byte{'Y', 'Z'}
	crc64Table  = crc64.MakeTable(crc64.ECMA)
)

const streamHeaderSize = 12 // magic, flags, CRC32; the footer is as long

// checkSizes are the sizes of the integrity checks by type (0x00..0x0f);
// those this package verifies are none, CRC32, CRC64 and SHA-256.
var checkSizes = [16]int{0, 4, 4, 4, 8, 8, 8, 16, 16, 16, 32, 32, 32, 64, 64, 64}

// Decode decodes an .xz file: one or more streams, each followed by
// optional stream padding. More than maxSize bytes of output (maxSize >=
// 0) is an error.
func Decode(b []byte, maxSize int) ([]byte, error) {
	var out []byte
	for {
		n, err := decodeStream(b, &out, maxSize)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		pad := 0
		for pad < len(b) && b[pad] == 0 {
			pad++
		}
		if pad%4 != 0 {
			return nil, corrupt("stream padding of %d bytes is not a multiple of 4", pad)
		}
		if b = b[pad:]; len(b) == 0 {
			if out == nil {
				out = []byte{}
			}
			return out, nil
		}
	}
}

// record is one block as the index describes it.
type record struct{ unpadded, uncompressed uint64 }

// decodeStream decodes the stream at the start of b, appending its data to
// *out, and returns its length.
func decodeStream(b []byte, out *[]byte, maxSize int) (int, error) {
	if len(b) < 2*streamHeaderSize || !bytes.HasPrefix(b, streamMagic) {
		return 0, corrupt("not an xz stream")
	}
	flags := b[6:8]
	if crc32.ChecksumIEEE(flags) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, corrupt("stream header checksum mismatch")
	}
	if flags[0] != 0 || flags[1]&0xf0 != 0 {
		return 0, fmt.Errorf("%w: stream flags %#x", ErrUnsupported, flags)
	}
	check := flags[1]
	switch check {
	case CheckNone, CheckCRC32, CheckCRC64, CheckSHA256:
	default:
		return 0, fmt.Errorf("%w: integrity check type %#x", ErrUnsupported, check)
	}
	p := streamHeaderSize
	var records []record
	for {
		if p >= len(b) {
			return 0, corrupt("truncated stream")
		}
		if b[p] == 0 {
			break // the index
		}
		n, r, err := decodeBlock(b[p:], check, out, maxSize)
		if err != nil {
			return 0, err
		}
		records = append(records, r)
		p += n
	}
	n, err := checkIndex(b[p:], records)
	if err != nil {
		return 0, err
	}
	index := b[p : p+n]
	p += n
	if len(b)-p < streamHeaderSize {
		return 0, corrupt("truncated stream footer")
	}
	footer := b[p : p+streamHeaderSize]
	switch {
	case crc32.ChecksumIEEE(footer[4:10]) != binary.LittleEndian.Uint32(footer):
		return 0, corrupt("stream footer checksum mismatch")
	case !bytes.Equal(footer[10:], footerMagic):
		return 0, corrupt("no stream footer magic")
	case !bytes.Equal(footer[8:10], flags):
		return 0, corrupt("stream footer flags differ from the header's")
	case (uint64(binary.LittleEndian.Uint32(footer[4:]))+1)*4 != uint64(len(index)):
		return 0, corrupt("stream footer's index size differs from the index")
	}
	return p + streamHeaderSize, nil
}

// decodeBlock decodes the block at the start of b, appending its data to
// *out, and returns its length (padding and check included) and record.
func decodeBlock(b []byte, check byte, out *[]byte, maxSize int) (int, record, error) {
	size := (int(b[0]) + 1) * 4
	if size > len(b) {
		return 0, record{}, corrupt("truncated block header")
	}
	h := b[:size-4]
	if crc32.ChecksumIEEE(h) != binary.LittleEndian.Uint32(b[size-4:]) {
		return 0, record{}, corrupt("block header checksum mismatch")
	}
	flags := h[1]
	if flags&0x3c != 0 {
		return 0, record{}, fmt.Errorf("%w: block flags %#x", ErrUnsupported, flags)
	}
	p := 2
	compressed, uncompressed := int64(-1), int64(-1)
	var err error
	if flags&0x40 != 0 {
		var v uint64
		if v, p, err = readVLI(h, p); err != nil {
			return 0, record{}, err
		}
		if v == 0 || v > uint64(len(b)-size) {
			return 0, record{}, corrupt("block compressed size %d overruns the data", v)
		}
		compressed = int64(v)
	}
	if flags&0x80 != 0 {
		var v uint64
		if v, p, err = readVLI(h, p); err != nil {
			return 0, record{}, err
		}
		if maxSize >= 0 && v > uint64(maxSize-len(*out)) {
			return 0, record{}, corrupt("decoded data exceeds %d bytes", maxSize)
		}
		uncompressed = int64(v)
	}
	chain := make([]Filter, int(flags&3)+1)
	for i := range chain {
		if chain[i], p, err = readFilterFlags(h, p); err != nil {
			return 0, record{}, err
		}
	}
	for _, c := range h[p:] {
		if c != 0 {
			return 0, record{}, corrupt("block header padding is not zero")
		}
	}
	if err := CheckChain(chain, false); err != nil {
		return 0, record{}, err
	}
	data := b[size:]
	if compressed >= 0 {
		data = data[:compressed]
	}
	r := bytes.NewReader(data)
	start := len(*out)
	decoded, err := decodeLZMA2(r, chain[len(chain)-1].DictSize, *out, maxSize)
	if err != nil {
		return 0, record{}, err
	}
	*out = decoded
	used := len(data) - r.Len()
	block := decoded[start:]
	if compressed >= 0 && int64(used) != compressed {
		return 0, record{}, corrupt("block holds %d bytes, its header says %d", used, compressed)
	}
	if uncompressed >= 0 && int64(len(block)) != uncompressed {
		return 0, record{}, corrupt("block decodes to %d bytes, its header says %d", len(block), uncompressed)
	}
	unfilter(block, chain)
	p = size + used
	for p%4 != 0 {
		if p >= len(b) || b[p] != 0 {
			return 0, record{}, corrupt("block padding is not zero")
		}
		p++
	}
	n := checkSizes[check]
	if len(b)-p < n {
		return 0, record{}, corrupt("truncated block check")
	}
	if !bytes.Equal(checksum(check, block), b[p:p+n]) {
		return 0, record{}, corrupt("block check mismatch")
	}
	return p + n, record{unpadded: uint64(size + used + n), uncompressed: uint64(len(block))}, nil
}

// checksum computes a stream's integrity check of data.
func checksum(check byte, data []byte) []byte {
	switch check {
	case CheckCRC32:
		return binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(data))
	case CheckCRC64:
		return binary.LittleEndian.AppendUint64(nil, crc64.Checksum(data, crc64Table))
	case CheckSHA256:
		sum := sha256.Sum256(data)
		return sum[:]
	}
	return nil
}

// readFilterFlags reads one filter of a block header at h[p:].
func readFilterFlags(h []byte, p int) (Filter, int, error) {
	id, p, err := readVLI(h, p)
	if err != nil {
		return Filter{}, 0, err
	}
	n, p, err := readVLI(h, p)
	if err != nil {
		return Filter{}, 0, err
	}
	if n > uint64(len(h)-p) {
		return Filter{}, 0, corrupt("filter properties overrun the block header")
	}
	props := h[p : p+int(n)]
	p += int(n)
	f := Filter{ID: id}
	switch {
	case id == IDLZMA2:
		if len(props) != 1 || props[0] > 40 {
			return Filter{}, 0, corrupt("invalid LZMA2 properties")
		}
		bits := props[0]
		dict := uint64(2|bits&1) << (bits/2 + 11)
		if bits == 40 || dict > MaxDict {
			return Filter{}, 0, fmt.Errorf("%w: LZMA2 dictionary of %d bytes exceeds the %d-byte limit", ErrUnsupported, dict, MaxDict)
		}
		f.DictSize = int(dict)
	case id == IDDelta:
		if len(props) != 1 {
			return Filter{}, 0, corrupt("invalid delta properties")
		}
		f.Distance = int(props[0]) + 1
	case bcjFilters[id] != nil:
		switch len(props) {
		case 0:
		case 4:
			f.StartOffset = binary.LittleEndian.Uint32(props)
		default:
			return Filter{}, 0, corrupt("invalid %s properties", f.Name())
		}
	}
	return f, p, nil
}

// checkIndex checks the index at the start of b against the blocks
// decoded and returns its length.
func checkIndex(b []byte, records []record) (int, error) {
	count, p, err := readVLI(b, 1)
	if err != nil {
		return 0, err
	}
	if count != uint64(len(records)) {
		return 0, corrupt("the index lists %d blocks, the stream has %d", count, len(records))
	}
	for _, r := range records {
		var unpadded, uncompressed uint64
		if unpadded, p, err = readVLI(b, p); err != nil {
			return 0, err
		}
		if uncompressed, p, err = readVLI(b, p); err != nil {
			return 0, err
		}
		if unpadded != r.unpadded || uncompressed != r.uncompressed {
			return 0, corrupt("the index differs from the blocks")
		}
	}
	for p%4 != 0 {
		if p >= len(b) || b[p] != 0 {
			return 0, corrupt("index padding is not zero")
		}
		p++
	}
	if len(b)-p < 4 || crc32.ChecksumIEEE(b[:p]) != binary.LittleEndian.Uint32(b[p:]) {
		return 0, corrupt("index checksum mismatch")
	}
	return p + 4, nil
}

// readVLI reads a variable-length integer of the format at b[p:]: at most
// nine bytes, seven bits each, least significant first, no trailing zero
// byte.
func readVLI(b []byte, p int) (uint64, int, error) {
	var v uint64
	for i := 0; i < 9; i++ {
		if p >= len(b) {
			return 0, 0, corrupt("truncated integer")
		}
		c := b[p]
		p++
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if c == 0 && i > 0 {
				return 0, 0, corrupt("integer not in its shortest form")
			}
			return v, p, nil
		}
	}
	return 0, 0, corrupt("integer longer than nine bytes")
}

func appendVLI(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// Encode writes b as an .xz stream of one block encoded by chain (which
// CheckChain accepts for the container: LZMA2 last) with the integrity
// check check.
func Encode(b []byte, chain []Filter, check byte) ([]byte, error) {
	if err := CheckChain(chain, false); err != nil {
		return nil, err
	}
	switch check {
	case CheckNone, CheckCRC32, CheckCRC64, CheckSHA256:
	default:
		return nil, fmt.Errorf("%w: integrity check type %#x", ErrUnsupported, check)
	}
	last := chain[len(chain)-1]
	data, err := encodeLZMA2(filtered(b, chain), last)
	if err != nil {
		return nil, err
	}
	flags := []byte{0, check}
	out := append(bytes.Clone(streamMagic), flags...)
	out = binary.LittleEndian.AppendUint32(out, crc32.ChecksumIEEE(flags))

	h := []byte{0, byte(len(chain) - 1)}
	for _, f := range chain {
		h = appendVLI(h, f.ID)
		switch {
		case f.ID == IDLZMA2:
			h = append(h, 1, lzma.EncodeDictCap(int64(f.DictSize)))
		case f.ID == IDDelta:
			h = append(h, 1, byte(f.Distance-1))
		case f.StartOffset != 0:
			h = binary.LittleEndian.AppendUint32(append(h, 4), f.StartOffset)
		default:
			h = append(h, 0)
		}
	}
	for (len(h)+4)%4 != 0 {
		h = append(h, 0)
	}
	h[0] = byte((len(h)+4)/4 - 1)
	h = binary.LittleEndian.AppendUint32(h, crc32.ChecksumIEEE(h))
	blockStart := len(out)
	out = append(append(out, h...), data...)
	for (len(out)-blockStart)%4 != 0 {
		out = append(out, 0)
	}
	sum := checksum(check, b)
	out = append(out, sum...)

	index := []byte{0}
	index = appendVLI(index, 1)
	index = appendVLI(index, uint64(len(h)+len(data)+len(sum)))
	index = appendVLI(index, uint64(len(b)))
	for len(index)%4 != 0 {
		index = append(index, 0)
	}
	index = binary.LittleEndian.AppendUint32(index, crc32.ChecksumIEEE(index))
	out = append(out, index...)

	footer := binary.LittleEndian.AppendUint32(nil, uint32(len(index)/4-1))
	footer = append(footer, flags...)
	out = binary.LittleEndian.AppendUint32(out, crc32.ChecksumIEEE(footer))
	out = append(out, footer...)
	return append(out, footerMagic...), nil
}
