package writeback

import (
	"context"
	"fmt"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Compact rewrites the shard at grid coordinates of a densely if it holds
// dead space (bytes no index entry covers, left by other writers' appends
// or in-place layouts), without losing concurrent updates (store.Update). It returns the
// bytes reclaimed.
func Compact(ctx context.Context, a *zarr.Array, shard []int) (reclaimed int64, err error) {
	sh := a.Sharding()
	if sh == nil {
		return 0, nil
	}
	if store.ReadOnly(a.Store()) {
		return 0, ErrNotWritable
	}
	key := a.ChunkKey(shard)
	err = store.Update(ctx, a.Store(), key, func(cur store.Object) (store.Change, error) {
		if cur == nil {
			return store.Change{}, nil
		}
		size := cur.Info().Size
		ix, err := sh.ReadIndex(cur, size)
		if err != nil {
			return store.Change{}, fmt.Errorf("cannot compact: %w", err)
		}
		if dead := sh.DeadBytes(ix, size); dead > 0 {
			reclaimed = dead
			return rebuild(sh, cur, ix, nil)
		}
		return store.Change{}, nil
	})
	return reclaimed, err
}
