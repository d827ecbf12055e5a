package blosc

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzMaxSize bounds what one fuzz input may make Decompress allocate.
const fuzzMaxSize = 4 << 20

// FuzzDecompress feeds arbitrary frames to Decompress: it must never panic
// or hang, and must either fail with ErrCorrupt/ErrUnsupported or return
// exactly nbytes bytes. Seeds are the c-blosc vectors.
func FuzzDecompress(f *testing.F) {
	vs := mustVectors(f)
	for i, v := range vs.Vectors {
		if len(v.frame) <= 8<<10 || i%16 == 0 {
			f.Add(v.frame)
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		out, err := Decompress(nil, frame, fuzzMaxSize)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error wraps neither ErrCorrupt nor ErrUnsupported: %v", err)
			}
			return
		}
		h, err := ReadHeader(frame)
		if err != nil {
			t.Fatalf("decoded, but ReadHeader fails: %v", err)
		}
		if len(out) != h.NBytes {
			t.Fatalf("decoded %d bytes, header says %d", len(out), h.NBytes)
		}
		// Whatever decodes must survive our own round trip.
		frame2, err := Compress(out, Options{Compressor: h.Compressor(), Level: 5, Shuffle: h.Shuffle(), TypeSize: h.TypeSize})
		if err != nil {
			t.Fatal(err)
		}
		out2, err := Decompress(nil, frame2, -1)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("re-encoding does not round-trip: %v", err)
		}
	})
}

// FuzzDecompressPatched overwrites bytes inside real c-blosc frames, which
// keeps the header and offsets mostly valid and so reaches deep into the
// codec streams, split handling and unshuffling.
func FuzzDecompressPatched(f *testing.F) {
	vs := mustVectors(f)
	f.Add(uint16(0), uint32(0), []byte{})
	f.Add(uint16(100), uint32(40), []byte{0xff, 0xff})
	f.Add(uint16(300), uint32(30), []byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, idx uint16, pos uint32, patch []byte) {
		v := vs.Vectors[int(idx)%len(vs.Vectors)]
		frame := bytes.Clone(v.frame)
		if len(frame) > 0 {
			copy(frame[int(pos)%len(frame):], patch)
		}
		out, err := Decompress(nil, frame, fuzzMaxSize)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error wraps neither ErrCorrupt nor ErrUnsupported: %v", err)
			}
			return
		}
		if h, _ := ReadHeader(frame); len(out) != h.NBytes {
			t.Fatalf("decoded %d bytes, header says %d", len(out), h.NBytes)
		}
	})
}

// FuzzBlosclz checks the blosclz decoder on arbitrary streams (no panic, no
// write past dst) and the encoder/decoder pair on arbitrary data.
func FuzzBlosclz(f *testing.F) {
	for _, s := range blosclzSeeds(f) {
		f.Add(s, uint16(4*len(s)), uint8(5))
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint16, level uint8) {
		dst := make([]byte, int(size)+1)
		guard := dst[len(dst)-1]
		n, err := blosclzDecode(dst[:size], data)
		if n < 0 || n > int(size) || (err == nil && n == 0) {
			t.Fatalf("decode returned n=%d err=%v for size %d", n, err, size)
		}
		if dst[len(dst)-1] != guard {
			t.Fatal("decoder wrote past dst")
		}

		lvl := int(level%9) + 1
		enc := new(blzEncoder)
		comp := make([]byte, len(data)+len(data)/16+64)
		cn := enc.encode(comp, data, lvl)
		if cn == 0 {
			return // incompressible or tiny: stored raw by the caller
		}
		out := make([]byte, len(data))
		m, err := blosclzDecode(out, comp[:cn])
		if err != nil || m != len(data) || !bytes.Equal(out, data) {
			t.Fatalf("round trip of %d bytes at level %d: n=%d err=%v", len(data), lvl, m, err)
		}
	})
}

// FuzzRoundTrip compresses arbitrary data with fuzzed options.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello hello"), uint8(0), uint8(5), uint8(1), uint8(4), uint16(0))
	f.Add(bytes.Repeat([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8}, 500), uint8(3), uint8(9), uint8(2), uint8(8), uint16(128))
	f.Fuzz(func(t *testing.T, src []byte, cname, level, shuffle, ts uint8, bs uint16) {
		o := Options{
			Compressor: allCnames[int(cname)%len(allCnames)],
			Level:      int(level % 10),
			Shuffle:    Shuffle(shuffle % 3),
			TypeSize:   int(ts) + 1,
			BlockSize:  int(bs),
		}
		frame, err := Compress(src, o)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Decompress(nil, frame, len(src))
		if err != nil || !bytes.Equal(out, src) {
			t.Fatalf("%+v: %v", o, err)
		}
	})
}

// blosclzSeeds extracts the blosclz streams of the c-blosc vectors.
func blosclzSeeds(tb testing.TB) [][]byte {
	vs := mustVectors(tb)
	var seeds [][]byte
	for _, v := range vs.Vectors {
		h, err := ReadHeader(v.frame)
		if err != nil || h.codec() != codecBloscLZ || h.Flags&flagMemcpyed != 0 || len(v.frame) > 16<<10 {
			continue
		}
		pos := bstart(v.frame, 0)
		_, nsplits := h.blockLayout(0)
		for range nsplits {
			start, end, err := nextSplit(v.frame, pos)
			if err != nil {
				tb.Fatal(err)
			}
			seeds = append(seeds, v.frame[start:end])
			pos = end
		}
	}
	return seeds
}
