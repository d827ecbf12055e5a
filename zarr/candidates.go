package zarr

import (
	"context"
	"errors"
	"iter"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// ChunkCandidates yields the grid coordinates of the chunks (shards) that
// may be stored: those listed, or on a store that cannot list, every chunk
// of the grid, which the caller finds missing or not as it reads them.
// Keys that name no chunk of the grid are skipped.
func (a *Array) ChunkCandidates(ctx context.Context) iter.Seq2[[]int, error] {
	return func(yield func([]int, error) bool) {
		prefix := a.Path
		if prefix != "" {
			prefix += "/"
		}
		for key, err := range store.List(ctx, a.store, prefix) {
			if errors.Is(err, store.ErrNoListing) {
				grid := a.Grid()
				c := make([]int, len(grid))
				for ok := nd.Size(grid) > 0; ok; ok = nd.Next(c, grid) {
					if !yield(slices.Clone(c), nil) {
						return
					}
				}
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if c, ok := a.ParseChunkKey(strings.TrimPrefix(key, prefix)); ok && !yield(c, nil) {
				return
			}
		}
	}
}
