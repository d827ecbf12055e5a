package keyspace

import (
	"context"
	"errors"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// storeRoot writes the root group of a new store (Options.NewStore) before
// the first node or attribute goes into the store: an empty store mounts
// as an empty root group, and becomes a Zarr store only when something is
// written to it. A root written meanwhile by another writer is kept.
func (f *FS) storeRoot(ctx context.Context) error {
	if !f.rootUnstored.Load() {
		return nil
	}
	f.rootMu.Lock()
	defer f.rootMu.Unlock()
	if !f.rootUnstored.Load() {
		return nil
	}
	doc, err := (&meta.GroupV3{}).Marshal()
	if err != nil {
		return err
	}
	_, err = store.Put(ctx, f.store, zarr.ZarrJSON, [][]byte{doc}, store.Cond{IfNoneMatch: store.AnyGeneration})
	if err != nil && !errors.Is(err, store.ErrPrecondition) {
		return err
	}
	f.rootUnstored.Store(false)
	f.opts.Logger.InfoContext(ctx, "created the root group of the new store", "key", zarr.ZarrJSON)
	return nil
}
