package engine

import (
	"encoding/json"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// The disk cache (Options.DiskCache) keeps, for stores read by ranges,
// what a mount fetched so that a remount does not fetch it again: shard
// indexes with the generation they belong to (revalidated with one
// conditional request, which costs no body when the shard is unchanged)
// and the aligned blocks of shards' bytes by shard generation (never
// stale; see fetchRange and package blocks).

// diskIndex is a shard index as the disk cache keeps it.
type diskIndex struct {
	Generation store.Generation
	Size       int64
	ModTime    time.Time
	Index      []byte // encoded as in the shard
}

// cachedIndex returns the state of the shard at key the disk cache holds,
// to be revalidated; nil when it holds none.
func (a *Array) cachedIndex(key string) *objectState {
	dc := a.e.opts.DiskCache
	if dc == nil || a.e.files != nil {
		return nil
	}
	b, ok := dc.Get(a.diskIndexKey(key))
	if !ok {
		return nil
	}
	var d diskIndex
	if json.Unmarshal(b, &d) != nil {
		return nil
	}
	ix, err := a.shard.DecodeIndex(d.Index, d.Size)
	if err != nil {
		return nil
	}
	s := &objectState{key: key, exists: true, info: store.Info{Size: d.Size, ModTime: d.ModTime, Generation: d.Generation}, index: ix, rewrites: a.e.rewrites(key)}
	return s
}

// keepIndex writes a shard's index to the disk cache.
func (a *Array) keepIndex(s *objectState) {
	dc := a.e.opts.DiskCache
	if dc == nil || a.e.files != nil || s.index == nil || s.err != nil {
		return
	}
	enc, err := a.shard.EncodeIndex(s.index)
	if err != nil {
		return
	}
	b, err := json.Marshal(diskIndex{Generation: s.info.Generation, Size: s.info.Size, ModTime: s.info.ModTime, Index: enc})
	if err == nil {
		dc.Put(a.diskIndexKey(s.key), b)
	}
}
