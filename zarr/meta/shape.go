package meta

import "github.com/zarrfs/zarrfs/zarr/nd"

// checkGrid checks an array's shape and its chunk shape (the member named
// chunksField): non-negative lengths, one positive chunk length per
// dimension, and chunks and a grid of chunks that count at most 2^63
// elements, beyond which every index computation would wrap.
func checkGrid(shape, chunks []int, chunksField string) error {
	for i, n := range shape {
		if n < 0 {
			return invalid("shape[%d]: %d is negative", i, n)
		}
	}
	if len(chunks) != len(shape) {
		return invalid("%s: has %d dimensions, shape has %d", chunksField, len(chunks), len(shape))
	}
	for i, n := range chunks {
		if n <= 0 {
			return invalid("%s[%d]: %d is not positive", chunksField, i, n)
		}
	}
	if _, ok := nd.SizeFits(chunks); !ok {
		return invalid("%s: %v: a chunk of more than 2^63 elements", chunksField, chunks)
	}
	if _, ok := nd.SizeFits(nd.Grid(shape, chunks)); !ok {
		return invalid("%s: %v: more than 2^63 chunks in shape %v", chunksField, chunks, shape)
	}
	return nil
}
