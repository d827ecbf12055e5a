// Package nd holds the n-dimensional index arithmetic that chunk grids,
// shards and arrays share: C-order strides, grids and hyperrectangle copies.
package nd

import "math"

// Size is the number of elements of shape.
func Size(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// SizeFits is Size, and whether it fits in an int: shapes from metadata
// can describe more elements than any int counts.
func SizeFits(shape []int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d != 0 && n > math.MaxInt/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// CeilDiv is ceil(a/b) for a >= 0, b > 0, without overflowing near
// math.MaxInt.
func CeilDiv(a, b int) int {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// Grid is the number of chunks of chunk shape along each axis of shape.
func Grid(shape, chunk []int) []int {
	g := make([]int, len(shape))
	for i := range shape {
		g[i] = CeilDiv(shape[i], chunk[i])
	}
	return g
}

// Linear is the C-order position of coords in shape.
func Linear(coords, shape []int) int {
	i := 0
	for d := range shape {
		i = i*shape[d] + coords[d]
	}
	return i
}

// Unravel writes the coordinates of C-order position i in shape to out.
func Unravel(i int, shape, out []int) {
	for d := len(shape) - 1; d >= 0; d-- {
		out[d] = i % shape[d]
		i /= shape[d]
	}
}

// Inside reports whether coords lie within shape.
func Inside(coords, shape []int) bool {
	if len(coords) != len(shape) {
		return false
	}
	for d, c := range coords {
		if c < 0 || c >= shape[d] {
			return false
		}
	}
	return true
}

// Next advances coords to the next position in C order within shape and
// reports whether there was one.
func Next(coords, shape []int) bool {
	for d := len(shape) - 1; d >= 0; d-- {
		coords[d]++
		if coords[d] < shape[d] {
			return true
		}
		coords[d] = 0
	}
	return false
}

// Copy copies the box of count elements per axis starting at srcStart in
// src (shape srcShape) to dstStart in dst (shape dstShape). Each element
// is elem consecutive values of T (bytes of a packed element, or one item).
// Innermost contiguous runs are copied at once.
func Copy[T any](dst []T, dstShape, dstStart []int, src []T, srcShape, srcStart []int, count []int, elem int) {
	n := len(count)
	if n == 0 {
		copy(dst[:elem], src[:elem])
		return
	}
	for _, c := range count {
		if c == 0 {
			return
		}
	}
	// Merge trailing axes that are whole in both arrays into one run.
	run := elem
	inner := n
	for inner > 0 {
		d := inner - 1
		run *= count[d]
		if count[d] != srcShape[d] || count[d] != dstShape[d] || d == 0 {
			inner = d
			break
		}
		inner = d
	}
	srcStrides := byteStrides(srcShape, elem)
	dstStrides := byteStrides(dstShape, elem)
	pos := make([]int, inner)
	for {
		so, do := 0, 0
		for d := 0; d < n; d++ {
			p := 0
			if d < inner {
				p = pos[d]
			}
			so += (srcStart[d] + p) * srcStrides[d]
			do += (dstStart[d] + p) * dstStrides[d]
		}
		copy(dst[do:do+run], src[so:so+run])
		if !Next(pos, count[:inner]) {
			return
		}
	}
}

func byteStrides(shape []int, elem int) []int {
	s := make([]int, len(shape))
	acc := elem
	for d := len(shape) - 1; d >= 0; d-- {
		s[d] = acc
		acc *= shape[d]
	}
	return s
}
