package blosc

import (
	"errors"
	"fmt"
)

// Options configure Compress. Compressor is one of "blosclz", "lz4",
// "lz4hc", "snappy", "zlib", "zstd".
type Options struct {
	Compressor string
	Level      int     // 0..9; 0 = store (memcpyed frame)
	Shuffle    Shuffle // NoShuffle, ByteShuffle or BitShuffle
	TypeSize   int     // element size in bytes (1..255; larger is treated as 1, like c-blosc)
	BlockSize  int     // 0 = automatic, as c-blosc 1.21 chooses it
}

// Cache sizes c-blosc 1.x assumes when choosing a block size.
const (
	l1Size          = 32 << 10
	maxSplitPlane   = 1 << 18 // a split (one byte plane) is kept below 256 KiB...
	minSplitBlock   = 1 << 16 // ...while a split block is at least 64 KiB...
	maxSplitBlock   = 1 << 20 // ...and at most 1 MiB
	compactSlackDiv = 4       // results with more than len/4 spare capacity are copied to fit
)

// params is a validated Options for one input.
type params struct {
	codec     int
	hc        bool // lz4hc: codec is codecLZ4, encoded with the HC compressor
	level     int
	shuffle   Shuffle
	typesize  int
	blocksize int
	flags     uint8
}

func newParams(opts Options, nbytes int) (params, error) {
	p := params{level: opts.Level, shuffle: opts.Shuffle, typesize: opts.TypeSize}
	switch opts.Compressor {
	case "blosclz":
		p.codec = codecBloscLZ
	case "lz4":
		p.codec = codecLZ4
	case "lz4hc":
		p.codec, p.hc = codecLZ4, true
	case "snappy":
		p.codec = codecSnappy
	case "zlib":
		p.codec = codecZlib
	case "zstd":
		p.codec = codecZstd
	default:
		return p, fmt.Errorf("%w: compressor %q", ErrUnsupported, opts.Compressor)
	}
	if p.level < 0 || p.level > 9 {
		return p, fmt.Errorf("blosc: level %d outside 0..9", p.level)
	}
	if p.typesize < 1 {
		return p, fmt.Errorf("blosc: typesize %d < 1", p.typesize)
	}
	if p.typesize > maxTypeSize {
		p.typesize = 1
	}
	if opts.BlockSize < 0 {
		return p, fmt.Errorf("blosc: negative blocksize %d", opts.BlockSize)
	}
	if nbytes > maxBufferSize {
		return p, fmt.Errorf("blosc: input of %d bytes exceeds the blosc maximum %d", nbytes, maxBufferSize)
	}
	switch p.shuffle {
	case NoShuffle:
	case ByteShuffle:
		p.flags |= flagShuffle
	case BitShuffle:
		p.flags |= flagBitShuffle
	default:
		return p, fmt.Errorf("blosc: invalid shuffle %d", p.shuffle)
	}
	p.blocksize = p.computeBlocksize(nbytes, opts.BlockSize)
	p.flags |= uint8(p.codec) << 5
	if !p.splits(p.blocksize) {
		p.flags |= flagDontSplit
	}
	return p, nil
}

// highRatio reports the codecs c-blosc gives larger blocks because they
// are slow to start on small ones.
func (p *params) highRatio() bool {
	return p.hc || p.codec == codecZlib || p.codec == codecZstd
}

// splits is c-blosc's default ("forward compatible") split rule: every codec
// but zstd splits blocks of small types into byte planes.
func (p *params) splits(blocksize int) bool {
	return p.codec != codecZstd && p.typesize <= maxSplits && blocksize/p.typesize >= minBufferSize
}

// computeBlocksize follows c-blosc 1.21's compute_blocksize, whose results
// the test vectors record: an L1-sized block scaled by clevel (doubled for
// high-ratio codecs), then, for split blocks, one byte plane per element
// byte kept between 64 KiB and 1 MiB in total.
func (p *params) computeBlocksize(nbytes, forced int) int {
	ts := p.typesize
	if nbytes < ts {
		return 1
	}
	bs := nbytes
	switch {
	case forced > 0:
		bs = max(forced, minBufferSize)
	case nbytes >= l1Size:
		bs = l1Size
		if p.highRatio() {
			bs *= 2
		}
		switch p.level {
		case 0:
			bs /= 4
		case 1:
			bs /= 2
		case 2:
		case 3:
			bs *= 2
		case 4, 5:
			bs *= 4
		case 6, 7, 8:
			bs *= 8
		case 9:
			bs *= 8
			if p.highRatio() {
				bs *= 2
			}
		}
	}
	if p.level > 0 && p.splits(bs) {
		bs = min(bs, maxSplitPlane) * ts
		bs = min(max(bs, minSplitBlock), maxSplitBlock)
	}
	bs = min(bs, nbytes)
	if bs > ts {
		bs = bs / ts * ts
	}
	return bs
}

// Compress encodes src as one blosc1 frame that c-blosc 1.x can read. Like
// c-blosc it stores the input unchanged (a memcpyed frame) when Level is 0,
// when src is shorter than 128 bytes, or when compression does not pay.
func Compress(src []byte, opts Options) ([]byte, error) {
	nbytes := len(src)
	p, err := newParams(opts, nbytes)
	if err != nil {
		return nil, err
	}
	if p.level == 0 || nbytes < minBufferSize {
		return memcpyFrame(make([]byte, headerSize+nbytes), src, &p), nil
	}

	h := Header{Flags: p.flags, TypeSize: p.typesize, NBytes: nbytes, BlockSize: p.blocksize}
	nblocks := h.nblocks()
	_, fullSplits := h.blockLayout(0)
	region := p.blocksize + 4*fullSplits // worst case of one encoded block
	dataStart := headerSize + 4*nblocks
	// Blocks are encoded into fixed regions (so they can be encoded in
	// parallel) and then packed to the front. The buffer is also large
	// enough for the memcpyed fallback.
	work := make([]byte, dataStart+nblocks*region)
	sizes := make([]int, nblocks)
	err = forEachBlock(nbytes, nblocks, getEncState, putEncState, func(j int, e *encState) error {
		bsize, nsplits := h.blockLayout(j)
		in := src[j*p.blocksize : j*p.blocksize+bsize]
		n, err := e.encodeBlock(work[dataStart+j*region:dataStart+(j+1)*region], in, nsplits, &p)
		sizes[j] = n
		return err
	})
	if err != nil {
		return nil, err
	}

	total := dataStart
	for _, n := range sizes {
		total += n
	}
	if total >= headerSize+nbytes {
		return memcpyFrame(work[:headerSize+nbytes], src, &p), nil
	}
	pos := dataStart
	for j, n := range sizes {
		copy(work[pos:], work[dataStart+j*region:dataStart+j*region+n])
		le.PutUint32(work[headerSize+4*j:], uint32(pos))
		pos += n
	}
	putHeader(work, p.flags, p.typesize, nbytes, p.blocksize, total)
	out := work[:total]
	if cap(out)-len(out) > len(out)/compactSlackDiv {
		out = append([]byte(nil), out...) // do not pin the worst-case buffer
	}
	return out, nil
}

// memcpyFrame writes a stored frame of src into dst (len 16+len(src)).
func memcpyFrame(dst, src []byte, p *params) []byte {
	putHeader(dst, p.flags|flagMemcpyed, p.typesize, len(src), p.blocksize, headerSize+len(src))
	copy(dst[headerSize:], src)
	return dst
}

var errFull = errors.New("blosc: output full")

// encodeBlock filters one block and writes its splits, each as a 4-byte
// size and a stream, to dst. It returns the number of bytes written.
func (e *encState) encodeBlock(dst, src []byte, nsplits int, p *params) (int, error) {
	bsize, ts := len(src), p.typesize
	filtered := src
	switch {
	case p.shuffle == ByteShuffle && ts > 1:
		filtered = e.buf(bsize)
		shuffle(filtered, src, ts)
	case p.shuffle == BitShuffle && bitShuffled(bsize, ts):
		buf := e.buf(2 * bsize)
		filtered = buf[:bsize]
		bitshuffle(filtered, src, buf[bsize:], ts)
	}
	neblock := bsize / nsplits
	pos := 0
	for k := range nsplits {
		part := filtered[k*neblock : (k+1)*neblock]
		out := dst[pos+4 : pos+4+neblock]
		// A stream must be shorter than the split: c-blosc reads a split
		// whose size equals neblock as stored raw.
		n, err := e.encodeStream(out[:neblock-1], part, p)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			n = copy(out, part)
		}
		le.PutUint32(dst[pos:], uint32(n))
		pos += 4 + n
	}
	return pos, nil
}
