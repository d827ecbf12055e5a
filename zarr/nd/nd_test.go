package nd

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCopyMatchesElementwise compares Copy with an element-by-element copy
// over random shapes, boxes and element sizes.
func TestCopyMatchesElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		ndim := r.IntN(5)
		elem := []int{1, 2, 3, 8}[r.IntN(4)]
		srcShape, dstShape := make([]int, ndim), make([]int, ndim)
		srcStart, dstStart, count := make([]int, ndim), make([]int, ndim), make([]int, ndim)
		for d := 0; d < ndim; d++ {
			count[d] = r.IntN(4) + 1
			if r.IntN(3) == 0 {
				count[d] = 0
			}
			srcShape[d] = count[d] + r.IntN(3)
			dstShape[d] = count[d] + r.IntN(3)
			srcStart[d] = r.IntN(srcShape[d] - count[d] + 1)
			dstStart[d] = r.IntN(dstShape[d] - count[d] + 1)
		}
		src := make([]byte, Size(srcShape)*elem)
		for i := range src {
			src[i] = byte(r.IntN(256))
		}
		got := make([]byte, Size(dstShape)*elem)
		want := slices.Clone(got)
		Copy(got, dstShape, dstStart, src, srcShape, srcStart, count, elem)
		pos := make([]int, ndim)
		s, dd := make([]int, ndim), make([]int, ndim)
		if Size(count) > 0 {
			for {
				for d := range pos {
					s[d], dd[d] = srcStart[d]+pos[d], dstStart[d]+pos[d]
				}
				so, do := Linear(s, srcShape)*elem, Linear(dd, dstShape)*elem
				copy(want[do:do+elem], src[so:so+elem])
				if !Next(pos, count) {
					break
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Copy(dst %v at %v, src %v at %v, count %v, elem %d) differs", dstShape, dstStart, srcShape, srcStart, count, elem)
		}
	}
}

func TestLinearUnravel(t *testing.T) {
	shape := []int{3, 4, 5}
	out := make([]int, 3)
	for i := 0; i < Size(shape); i++ {
		Unravel(i, shape, out)
		if Linear(out, shape) != i || !Inside(out, shape) {
			t.Fatalf("Unravel(%d) = %v", i, out)
		}
	}
	if g := Grid([]int{10, 9, 0}, []int{4, 3, 2}); !slices.Equal(g, []int{3, 3, 0}) {
		t.Fatalf("Grid = %v", g)
	}
}

func TestOverflow(t *testing.T) {
	if g := Grid([]int{math.MaxInt, math.MaxInt - 1}, []int{2, math.MaxInt}); !slices.Equal(g, []int{math.MaxInt/2 + 1, 1}) {
		t.Errorf("Grid near MaxInt = %v", g)
	}
	for _, c := range []struct {
		shape []int
		size  int
		fits  bool
	}{
		{[]int{3, 4}, 12, true},
		{[]int{}, 1, true},
		{[]int{0, math.MaxInt, math.MaxInt}, 0, true},
		{[]int{1 << 32, 1 << 31}, 0, false},
		{[]int{math.MaxInt, 2}, 0, false},
		{[]int{1 << 31, 1 << 31}, 1 << 62, true},
	} {
		size, fits := SizeFits(c.shape)
		if fits != c.fits || fits && size != c.size {
			t.Errorf("SizeFits(%v) = %d, %v; want %d, %v", c.shape, size, fits, c.size, c.fits)
		}
	}
}
