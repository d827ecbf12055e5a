package blosc

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// Byte-at-a-time reference implementations of the filters, written straight
// from the layout descriptions.

func refShuffle(src []byte, ts int) []byte {
	dst := bytes.Clone(src)
	n := len(src) / ts
	for i := range n {
		for j := range ts {
			dst[j*n+i] = src[i*ts+j]
		}
	}
	return dst
}

func refBitshuffle(src []byte, ts int) []byte {
	dst := bytes.Clone(src)
	n := len(src) / ts
	if n == 0 || n%8 != 0 {
		return dst
	}
	clear(dst[:n*ts])
	for i := range n {
		for j := range ts {
			for k := range 8 {
				bit := src[i*ts+j] >> k & 1
				row := j*8 + k
				dst[row*n/8+i/8] |= bit << (i % 8)
			}
		}
	}
	return dst
}

func TestShuffleKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for ts := 1; ts <= 40; ts++ {
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 128, 200, 1001, 1024, 2056} {
			for _, extra := range []int{0, 1, ts - 1} {
				if extra < 0 || extra >= ts {
					continue
				}
				src := make([]byte, n*ts+extra)
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				want := refShuffle(src, ts)
				got := make([]byte, len(src))
				shuffle(got, src, ts)
				if !bytes.Equal(got, want) {
					t.Fatalf("shuffle ts=%d n=%d extra=%d differs", ts, n, extra)
				}
				back := make([]byte, len(src))
				unshuffle(back, got, ts)
				if !bytes.Equal(back, src) {
					t.Fatalf("unshuffle ts=%d n=%d extra=%d differs", ts, n, extra)
				}

				want = refBitshuffle(src, ts)
				tmp := make([]byte, len(src))
				bitshuffle(got, src, tmp, ts)
				if !bytes.Equal(got, want) {
					t.Fatalf("bitshuffle ts=%d n=%d extra=%d differs", ts, n, extra)
				}
				bitunshuffle(back, got, tmp, ts)
				if !bytes.Equal(back, src) {
					t.Fatalf("bitunshuffle ts=%d n=%d extra=%d differs", ts, n, extra)
				}
			}
		}
	}
}

func TestTransposeBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		x := rng.Uint64()
		y := transposeBits(x)
		for r := range 8 {
			for c := range 8 {
				if x>>(8*r+c)&1 != y>>(8*c+r)&1 {
					t.Fatalf("transposeBits(%#x) = %#x: bit (%d,%d)", x, y, r, c)
				}
			}
		}
	}
}
