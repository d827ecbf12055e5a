package meta

import "github.com/zarrfs/zarrfs/zarr/nd"

// checkShape checks the lengths of an array's dimensions.
func checkShape(shape []int, field string) error {
	for i, n := range shape {
		if n < 0 {
			return invalid("%s[%d]: %d is negative", field, i, n)
		}
	}
	return nil
}

// checkChunkShape checks a chunk shape against the array's rank.
func checkChunkShape(chunks []int, rank int, field string) error {
	if len(chunks) != rank {
		return invalid("%s: has %d dimensions, shape has %d", field, len(chunks), rank)
	}
	for i, n := range chunks {
		if n <= 0 {
			return invalid("%s[%d]: %d is not positive", field, i, n)
		}
	}
	return nil
}

// checkSizes refuses shapes whose chunks, or whose grid of chunks, hold
// more elements than an int counts: every index computation would wrap.
func checkSizes(shape, chunks []int, field string) error {
	if _, ok := nd.SizeFits(chunks); !ok {
		return invalid("%s: %v: a chunk of more than 2^63 elements", field, chunks)
	}
	if _, ok := nd.SizeFits(nd.Grid(shape, chunks)); !ok {
		return invalid("%s: %v: more than 2^63 chunks in shape %v", field, chunks, shape)
	}
	return nil
}
