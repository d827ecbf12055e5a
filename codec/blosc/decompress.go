package blosc

import (
	"fmt"
	"slices"
	"sync"
)

// Decompress decodes one blosc1 frame. The result is dst[:nbytes] when
// cap(dst) >= nbytes, else a new slice; dst must not overlap frame. Frames
// whose nbytes exceeds maxSize (maxSize < 0: no limit) are refused with
// ErrCorrupt before anything is allocated. Bytes after cbytes are ignored.
func Decompress(dst, frame []byte, maxSize int) ([]byte, error) {
	h, err := ReadHeader(frame)
	if err != nil {
		return nil, err
	}
	if maxSize >= 0 && h.NBytes > maxSize {
		return nil, fmt.Errorf("%w: nbytes %d exceeds the limit of %d", ErrCorrupt, h.NBytes, maxSize)
	}
	if len(frame) < h.CBytes {
		return nil, fmt.Errorf("%w: truncated: cbytes %d but only %d bytes", ErrCorrupt, h.CBytes, len(frame))
	}
	frame = frame[:h.CBytes]
	if h.Flags&flagMemcpyed != 0 {
		out := outBuffer(dst, h.NBytes)
		copy(out, frame[headerSize:])
		return out, nil
	}
	if err := checkLayout(&h, frame); err != nil {
		return nil, err
	}
	out := outBuffer(dst, h.NBytes)
	if err := decodeBlocks(out, frame, &h); err != nil {
		return nil, err
	}
	return out, nil
}

func outBuffer(dst []byte, n int) []byte {
	if cap(dst) >= n {
		return dst[:n]
	}
	return make([]byte, n)
}

// bstart returns the absolute frame offset of block j's data.
func bstart(frame []byte, j int) int {
	return int(int32(le.Uint32(frame[headerSize+4*j:])))
}

// nextSplit reads the split header at pos and returns the split's stream
// bounds, checking them against the frame.
func nextSplit(frame []byte, pos int) (start, end int, err error) {
	if pos > len(frame)-4 {
		return 0, 0, fmt.Errorf("split header at %d beyond cbytes %d", pos, len(frame))
	}
	csize := int(int32(le.Uint32(frame[pos:])))
	start = pos + 4
	if csize <= 0 || csize > len(frame)-start {
		return 0, 0, fmt.Errorf("split size %d at %d out of range (cbytes %d)", csize, pos, len(frame))
	}
	return start, start + csize, nil
}

// checkLayout validates every block offset and split size before anything
// is allocated or decoded, and checks that blocks do not overlap each other
// or the header. c-blosc writes blocks in order when single-threaded, but
// its threads append blocks as they finish, so order is not assumed.
func checkLayout(h *Header, frame []byte) error {
	nblocks := h.nblocks()
	dataStart := headerSize + 4*nblocks
	prevEnd, sorted := dataStart, true
	for j := range nblocks {
		end, err := blockEnd(h, frame, j, dataStart)
		if err != nil {
			return err
		}
		if bstart(frame, j) < prevEnd {
			sorted = false
		}
		prevEnd = end
	}
	if sorted {
		return nil
	}
	type span struct{ start, end, block int }
	spans := make([]span, nblocks)
	for j := range spans {
		end, _ := blockEnd(h, frame, j, dataStart)
		spans[j] = span{bstart(frame, j), end, j}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			return fmt.Errorf("%w: block %d at %d overlaps block %d at [%d,%d)", ErrCorrupt,
				spans[i].block, spans[i].start, spans[i-1].block, spans[i-1].start, spans[i-1].end)
		}
	}
	return nil
}

// blockEnd checks block j's offset and splits and returns where its data ends.
func blockEnd(h *Header, frame []byte, j, dataStart int) (int, error) {
	pos := bstart(frame, j)
	if pos < dataStart || pos >= len(frame) {
		return 0, fmt.Errorf("%w: bstarts[%d]=%d outside the data area [%d,%d)", ErrCorrupt, j, pos, dataStart, len(frame))
	}
	bsize, nsplits := h.blockLayout(j)
	if bsize%nsplits != 0 {
		return 0, fmt.Errorf("%w: blocksize %d is not a multiple of typesize %d", ErrCorrupt, bsize, nsplits)
	}
	for k := range nsplits {
		_, end, err := nextSplit(frame, pos)
		if err != nil {
			return 0, fmt.Errorf("%w: block %d split %d: %v", ErrCorrupt, j, k, err)
		}
		pos = end
	}
	return pos, nil
}

// scratch is per-goroutine working memory for unshuffling, pooled.
type scratch struct{ b []byte }

// maxPooledScratch keeps oversized buffers (from unusually large blocks) out
// of the pool.
const maxPooledScratch = 8 << 20

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (s *scratch) get(n int) []byte {
	if cap(s.b) < n {
		s.b = make([]byte, n)
	}
	return s.b[:n]
}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(s *scratch) {
	if cap(s.b) > maxPooledScratch {
		s.b = nil
	}
	scratchPool.Put(s)
}

func decodeBlocks(out, frame []byte, h *Header) error {
	nblocks := h.nblocks()
	if workers(h.NBytes, nblocks) == 1 {
		// Spelled out, unlike the parallel path, so it does not allocate.
		s := getScratch()
		defer putScratch(s)
		for j := range nblocks {
			if err := decodeBlock(out, frame, h, j, s); err != nil {
				return err
			}
		}
		return nil
	}
	hc := *h // captured copy, so that only this path puts a Header on the heap
	return forEachBlock(hc.NBytes, nblocks, getScratch, putScratch, func(j int, s *scratch) error {
		return decodeBlock(out, frame, &hc, j, s)
	})
}

// streamSlack is spare room after a split's output that a codec may use as
// scratch: with it, zstd's decoder keeps to its fast copy loops (it needs 16
// bytes) up to the end of the stream.
const streamSlack = 64

// decodeBlock decodes block j into its place in out. Splits decompress
// straight into out unless the block needs unshuffling, or the codec wants
// slack after its output that out cannot give (zstd).
func decodeBlock(out, frame []byte, h *Header, j int, s *scratch) error {
	bsize, nsplits := h.blockLayout(j)
	ts := h.TypeSize
	dest := out[j*h.BlockSize : j*h.BlockSize+bsize]
	byteShuf := h.Flags&flagShuffle != 0 && ts > 1
	bitShuf := h.Flags&flagBitShuffle != 0 && bitShuffled(bsize, ts)

	target := dest // len(target) - bsize is slack the codecs may scribble on
	var tmp []byte
	if byteShuf || bitShuf || h.codec() == codecZstd {
		n := bsize + streamSlack
		if bitShuf {
			n += bsize
		}
		buf := s.get(n)
		target, tmp = buf[:bsize+streamSlack], buf[bsize+streamSlack:]
	}

	neblock := bsize / nsplits
	pos := bstart(frame, j)
	for k := range nsplits {
		start, end, err := nextSplit(frame, pos)
		if err != nil {
			return fmt.Errorf("%w: block %d split %d: %v", ErrCorrupt, j, k, err)
		}
		pos = end
		off := k * neblock
		part := target[off : off+neblock : min(off+neblock+streamSlack, len(target))]
		if end-start == neblock {
			copy(part, frame[start:end]) // stored raw
			continue
		}
		if err := decodeStream(h.codec(), part, frame[start:end]); err != nil {
			return fmt.Errorf("%w: block %d split %d: %v", ErrCorrupt, j, k, err)
		}
	}

	switch {
	case byteShuf:
		unshuffle(dest, target[:bsize], ts)
	case bitShuf:
		bitunshuffle(dest, target[:bsize], tmp, ts)
	case len(target) != bsize:
		copy(dest, target[:bsize])
	}
	return nil
}
