package meta

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

// gridShape is the number of chunks along each dimension: ceil(shape/chunks).
func gridShape(shape, chunks []int) []int {
	grid := make([]int, len(shape))
	for i := range grid {
		if i < len(chunks) && chunks[i] > 0 {
			grid[i] = shape[i] / chunks[i]
			if shape[i]%chunks[i] != 0 {
				grid[i]++
			}
		}
	}
	return grid
}
