package blosc

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

var allCnames = []string{"blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd"}

// randomCase draws compression options and an input from rng. Inputs mix
// smooth, repetitive and random data so every codec path (matches, literal
// runs, raw splits, stored frames) is taken.
func randomCase(rng *rand.Rand, maxN int) ([]byte, Options) {
	typesizes := []int{1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 24, 33, 255, 300}
	opts := Options{
		Compressor: allCnames[rng.IntN(len(allCnames))],
		Level:      rng.IntN(10),
		Shuffle:    Shuffle(rng.IntN(3)),
		TypeSize:   typesizes[rng.IntN(len(typesizes))],
	}
	switch rng.IntN(4) {
	case 0:
		opts.BlockSize = []int{1, 100, 128, 1000, 4096, 1 << 16}[rng.IntN(6)]
	}
	var n int
	switch rng.IntN(8) {
	case 0, 1:
		n = rng.IntN(300)
	case 2, 3, 4, 5, 6:
		n = rng.IntN(40000)
	default:
		n = rng.IntN(maxN)
	}
	src := make([]byte, n)
	seed := rng.Uint64()
	switch rng.IntN(5) {
	case 0: // random
		for i := range src {
			src[i] = byte(splitmix64(seed, uint64(i)))
		}
	case 1: // smooth elements
		ts := max(opts.TypeSize, 1)
		w := walk(seed, int64(1+rng.IntN(50)), n/ts+1)
		for i := range src {
			src[i] = byte(uint64(w[i/ts]) >> (8 * (i % ts % 8)))
		}
	case 2: // repeats of a short random pattern with occasional noise
		period := 1 + rng.IntN(300)
		for i := range src {
			src[i] = byte(splitmix64(seed, uint64(i%period)))
			if rng.IntN(100) == 0 {
				src[i] ^= byte(rng.Uint32())
			}
		}
	case 3: // runs
		for i := 0; i < n; {
			run := 1 + rng.IntN(2000)
			b := byte(rng.Uint32())
			for k := 0; k < run && i < n; k++ {
				src[i] = b
				i++
			}
		}
	case 4: // half compressible, half random
		for i := range src {
			if i < n/2 {
				src[i] = byte(i / 97)
			} else {
				src[i] = byte(splitmix64(seed, uint64(i)))
			}
		}
	}
	return src, opts
}

func TestRoundTripRandom(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	iters := 1000
	if testing.Short() {
		iters = 200
	}
	var dst []byte
	for i := range iters {
		src, opts := randomCase(rng, 1<<20)
		frame, err := Compress(src, opts)
		if err != nil {
			t.Fatalf("case %d %+v n=%d: Compress: %v", i, opts, len(src), err)
		}
		dst, err = Decompress(dst, frame, len(src))
		if err != nil {
			t.Fatalf("case %d %+v n=%d: Decompress: %v", i, opts, len(src), err)
		}
		if !bytes.Equal(dst, src) {
			t.Fatalf("case %d %+v n=%d: round trip differs", i, opts, len(src))
		}
		h, err := ReadHeader(frame)
		if err != nil || h.CBytes != len(frame) || h.NBytes != len(src) {
			t.Fatalf("case %d: header %+v, %v", i, h, err)
		}
	}
}

// TestCompressCompresses checks that every codec really compresses
// compressible data (stored frames are only a fallback).
func TestCompressCompresses(t *testing.T) {
	t.Parallel()
	src, err := genInput(genParams{Kind: "walk", TS: 4, NBytes: 256 << 10, Seed: 1, Amp: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, cname := range allCnames {
		for _, sh := range []Shuffle{NoShuffle, ByteShuffle, BitShuffle} {
			for _, level := range []int{1, 5, 9} {
				frame, err := Compress(src, Options{Compressor: cname, Level: level, Shuffle: sh, TypeSize: 4})
				if err != nil {
					t.Fatal(err)
				}
				ratio := float64(len(src)) / float64(len(frame))
				if sh != NoShuffle && ratio < 2 {
					t.Errorf("%s shuffle %d level %d: ratio %.2f", cname, sh, level, ratio)
				}
				if testing.Verbose() {
					t.Logf("%-8s shuffle %d level %d: ratio %.2f", cname, sh, level, ratio)
				}
			}
		}
	}
}

func TestCompressOptions(t *testing.T) {
	src := make([]byte, 1000)
	bad := []Options{
		{Compressor: "lzma", Level: 5, TypeSize: 1},
		{Compressor: "", Level: 5, TypeSize: 1},
		{Compressor: "lz4", Level: 10, TypeSize: 1},
		{Compressor: "lz4", Level: -1, TypeSize: 1},
		{Compressor: "lz4", Level: 5, TypeSize: 0},
		{Compressor: "lz4", Level: 5, TypeSize: 1, Shuffle: 3},
		{Compressor: "lz4", Level: 5, TypeSize: 1, BlockSize: -1},
	}
	for _, o := range bad {
		if _, err := Compress(src, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := Compress(src, Options{Compressor: "lzma", Level: 5, TypeSize: 1}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown compressor: %v", err)
	}
	// typesize above 255 is recorded as 1, as c-blosc does.
	frame, err := Compress(src, Options{Compressor: "lz4", Level: 5, TypeSize: 300, Shuffle: ByteShuffle})
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := ReadHeader(frame); h.TypeSize != 1 {
		t.Errorf("typesize 300 recorded as %d", h.TypeSize)
	}
}

// TestOutOfOrderBlocks rewrites frames with their blocks stored in reverse
// order, as c-blosc's threads may store them, and with overlapping blocks.
func TestOutOfOrderBlocks(t *testing.T) {
	src, _ := genInput(genParams{Kind: "walk", TS: 2, NBytes: 300000, Seed: 3, Amp: 3})
	for _, cname := range allCnames {
		frame, err := Compress(src, Options{Compressor: cname, Level: 1, Shuffle: ByteShuffle, TypeSize: 2, BlockSize: 16384})
		if err != nil {
			t.Fatal(err)
		}
		rev := reverseBlocks(t, frame)
		got, err := Decompress(nil, rev, -1)
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("%s: reversed blocks: %v", cname, err)
		}
		// Point block 1 at block 0's data: same size, overlapping.
		bad := bytes.Clone(frame)
		copy(bad[headerSize+4:headerSize+8], bad[headerSize:headerSize+4])
		if _, err := Decompress(nil, bad, -1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: overlapping blocks: %v", cname, err)
		}
	}
}

// reverseBlocks returns frame with its block data stored in reverse order.
func reverseBlocks(t *testing.T, frame []byte) []byte {
	h, err := ReadHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	nb := h.nblocks()
	if nb < 2 {
		t.Fatalf("need several blocks, have %d", nb)
	}
	dataStart := headerSize + 4*nb
	out := bytes.Clone(frame[:dataStart])
	for j := nb - 1; j >= 0; j-- {
		end, err := blockEnd(&h, frame, j, dataStart)
		if err != nil {
			t.Fatal(err)
		}
		le.PutUint32(out[headerSize+4*j:], uint32(len(out)))
		out = append(out, frame[bstart(frame, j):end]...)
	}
	return out
}

func TestHeaderErrors(t *testing.T) {
	good, err := Compress(bytes.Repeat([]byte("abcd"), 1000), Options{Compressor: "lz4", Level: 5, TypeSize: 4, Shuffle: ByteShuffle})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(f []byte) []byte
		want error
	}{
		{"short", func(f []byte) []byte { return f[:10] }, ErrCorrupt},
		{"version", func(f []byte) []byte { f[0] = 3; return f }, ErrUnsupported},
		{"codec", func(f []byte) []byte { f[2] = f[2]&0x1f | 5<<5; return f }, ErrUnsupported},
		{"reserved", func(f []byte) []byte { f[2] |= flagReserved; return f }, ErrCorrupt},
		{"both shuffles", func(f []byte) []byte { f[2] |= flagShuffle | flagBitShuffle; return f }, ErrUnsupported},
		{"typesize 0", func(f []byte) []byte { f[3] = 0; return f }, ErrCorrupt},
		{"cbytes small", func(f []byte) []byte { le.PutUint32(f[12:], 10); return f }, ErrCorrupt},
		{"cbytes beyond frame", func(f []byte) []byte { le.PutUint32(f[12:], uint32(len(f)+1)); return f }, ErrCorrupt},
		{"blocksize 0", func(f []byte) []byte { le.PutUint32(f[8:], 0); return f }, ErrCorrupt},
		{"huge nbytes", func(f []byte) []byte { le.PutUint32(f[4:], 0xFFFFFFFF); return f }, ErrCorrupt},
		{"bstart in header", func(f []byte) []byte { le.PutUint32(f[16:], 8); return f }, ErrCorrupt},
		{"bstart beyond", func(f []byte) []byte { le.PutUint32(f[16:], uint32(len(f))); return f }, ErrCorrupt},
		{"negative csize", func(f []byte) []byte { le.PutUint32(f[20:], 0xFFFFFFF0); return f }, ErrCorrupt},
		{"csize beyond", func(f []byte) []byte { le.PutUint32(f[20:], uint32(len(f))); return f }, ErrCorrupt},
	}
	for _, c := range cases {
		f := c.edit(bytes.Clone(good))
		_, err := Decompress(nil, f, -1)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		} else if testing.Verbose() {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

func ExampleCompress() {
	data := bytes.Repeat([]byte{1, 0, 0, 0, 2, 0, 0, 0}, 1000)
	frame, err := Compress(data, Options{Compressor: "lz4", Level: 5, Shuffle: ByteShuffle, TypeSize: 4})
	if err != nil {
		panic(err)
	}
	out, err := Decompress(nil, frame, 1<<20)
	fmt.Println(len(frame) < len(data)/10, bytes.Equal(out, data), err)
	// Output: true true <nil>
}
