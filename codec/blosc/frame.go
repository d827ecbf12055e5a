package blosc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Errors returned by this package. Detailed errors wrap one of these, so
// callers can test with errors.Is.
var (
	ErrCorrupt     = errors.New("blosc: corrupt frame")
	ErrUnsupported = errors.New("blosc: unsupported frame")
)

// Shuffle selects the filter applied to each block before compression.
type Shuffle int

// Shuffle filters, numbered as in c-blosc and numcodecs.
const (
	NoShuffle   Shuffle = 0
	ByteShuffle Shuffle = 1
	BitShuffle  Shuffle = 2
)

// Frame layout constants (README_CHUNK_FORMAT.rst in c-blosc).
const (
	headerSize    = 16
	formatVersion = 2 // BLOSC_VERSION_FORMAT of c-blosc 1.x
	lzVersion     = 1 // versionlz written by c-blosc 1.x for every codec

	flagShuffle    = 0x01
	flagMemcpyed   = 0x02
	flagBitShuffle = 0x04
	flagReserved   = 0x08
	flagDontSplit  = 0x10

	maxTypeSize   = 255
	maxSplits     = 16  // splitting is only done for typesize <= maxSplits
	minBufferSize = 128 // smaller inputs are stored; blocks with fewer elements are not split

	// maxBufferSize is the largest nbytes c-blosc accepts (INT32_MAX minus the header).
	maxBufferSize = math.MaxInt32 - headerSize
)

// Internal codec ids, stored in bits 5-7 of the flags byte.
const (
	codecBloscLZ = 0
	codecLZ4     = 1 // lz4 and lz4hc share the id: both write raw LZ4 blocks
	codecSnappy  = 2
	codecZlib    = 3
	codecZstd    = 4
)

var codecNames = [...]string{"blosclz", "lz4", "snappy", "zlib", "zstd"}

// Header is the fixed 16-byte blosc1 frame header.
type Header struct {
	Version, VersionLZ, Flags uint8
	TypeSize                  int
	NBytes, BlockSize, CBytes int
}

// ReadHeader parses and validates the 16-byte header at the start of frame.
// It checks the header's internal consistency only; frame may be just the
// header, so it does not check that len(frame) >= CBytes (Decompress does).
func ReadHeader(frame []byte) (Header, error) {
	if len(frame) < headerSize {
		return Header{}, fmt.Errorf("%w: %d bytes is shorter than the %d-byte header", ErrCorrupt, len(frame), headerSize)
	}
	h := Header{
		Version:   frame[0],
		VersionLZ: frame[1],
		Flags:     frame[2],
		TypeSize:  int(frame[3]),
		NBytes:    int(binary.LittleEndian.Uint32(frame[4:])),
		BlockSize: int(binary.LittleEndian.Uint32(frame[8:])),
		CBytes:    int(binary.LittleEndian.Uint32(frame[12:])),
	}
	if h.Version != formatVersion {
		return h, fmt.Errorf("%w: format version %d (only blosc1 version %d is supported)", ErrUnsupported, h.Version, formatVersion)
	}
	if id := h.codec(); id >= len(codecNames) {
		return h, fmt.Errorf("%w: internal codec id %d", ErrUnsupported, id)
	}
	if h.Flags&flagReserved != 0 {
		return h, fmt.Errorf("%w: reserved flag bit 0x08 set (flags %#02x)", ErrCorrupt, h.Flags)
	}
	if h.Flags&(flagShuffle|flagBitShuffle) == flagShuffle|flagBitShuffle {
		// blosc1 never sets both; blosc2 uses the pair to mark an extended header.
		return h, fmt.Errorf("%w: both shuffle and bitshuffle flags set (flags %#02x)", ErrUnsupported, h.Flags)
	}
	if h.TypeSize == 0 {
		return h, fmt.Errorf("%w: typesize 0", ErrCorrupt)
	}
	if h.NBytes > maxBufferSize {
		return h, fmt.Errorf("%w: nbytes %d exceeds the blosc maximum %d", ErrCorrupt, h.NBytes, maxBufferSize)
	}
	if h.CBytes < headerSize || h.CBytes > math.MaxInt32 {
		return h, fmt.Errorf("%w: cbytes %d out of range", ErrCorrupt, h.CBytes)
	}
	if h.NBytes > 0 && h.BlockSize == 0 {
		return h, fmt.Errorf("%w: blocksize 0 with nbytes %d", ErrCorrupt, h.NBytes)
	}
	if h.Flags&flagMemcpyed != 0 {
		if h.CBytes < headerSize+h.NBytes {
			return h, fmt.Errorf("%w: memcpyed frame with cbytes %d < nbytes %d + %d", ErrCorrupt, h.CBytes, h.NBytes, headerSize)
		}
	} else if h.nblocks() > (h.CBytes-headerSize)/4 {
		return h, fmt.Errorf("%w: cbytes %d too small for %d block offsets", ErrCorrupt, h.CBytes, h.nblocks())
	}
	return h, nil
}

func (h Header) codec() int { return int(h.Flags >> 5) }

// nblocks is ceil(nbytes/blocksize); the last block may be shorter.
func (h Header) nblocks() int {
	if h.NBytes == 0 {
		return 0
	}
	return (h.NBytes + h.BlockSize - 1) / h.BlockSize
}

// blockLayout describes one block: its length and how it is split.
// A frame's blocks all share blocksize except a shorter "leftover" last block,
// which c-blosc never splits.
func (h Header) blockLayout(j int) (bsize, nsplits int) {
	bsize = h.BlockSize
	leftover := false
	if j == h.nblocks()-1 && h.NBytes%h.BlockSize != 0 {
		bsize = h.NBytes % h.BlockSize
		leftover = true
	}
	nsplits = 1
	if !leftover && splitAllowed(h.Flags, h.TypeSize, h.BlockSize) {
		nsplits = h.TypeSize
	}
	return bsize, nsplits
}

// splitAllowed is the rule both sides of c-blosc use to decide whether a
// (full) block is stored as typesize separately compressed byte planes.
func splitAllowed(flags uint8, typesize, blocksize int) bool {
	return flags&flagDontSplit == 0 && typesize <= maxSplits && blocksize/typesize >= minBufferSize
}

func putHeader(dst []byte, flags uint8, typesize, nbytes, blocksize, cbytes int) {
	dst[0] = formatVersion
	dst[1] = lzVersion
	dst[2] = flags
	dst[3] = uint8(typesize)
	binary.LittleEndian.PutUint32(dst[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(dst[8:], uint32(blocksize))
	binary.LittleEndian.PutUint32(dst[12:], uint32(cbytes))
}
