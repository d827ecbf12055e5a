package keyspace

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// Stores that do not open files (object stores, web servers) cost a round
// trip per request, so chunk bytes are fetched in runs: the chunk asked
// for and the chunks stored after it in its shard, while the gaps between
// them stay under coalesceGap and the run under coalesceMax, with one
// ranged read. The run's chunks wait in the cache for the reader, which
// (a legacy reader opens chunk files in key order, one at a time) then
// reads a shard with few requests instead of one per chunk.
const (
	coalesceGap = 1 << 20
	coalesceMax = 8 << 20
)

// storedRange is where one chunk's bytes lie in its shard.
type storedRange struct{ off, n int64 }

// readRange returns a chunk's stored bytes from a store read by ranges,
// fetching the run of chunks that starts with it unless it is cached.
func (av *arrayView) readRange(ctx context.Context, loc location) ([]byte, error) {
	f := av.fs
	// Other readers wait for this load: one reader's interrupted request
	// must not fail theirs.
	ctx = context.WithoutCancel(ctx)
	v, err := f.cache.GetOrLoad(rangeKey(loc.key, loc.gen, loc.off), func() (any, int64, error) {
		dc := f.opts.DiskCache
		if dc != nil {
			if b, ok := dc.Get(diskRangeKey(f.store, loc.key, loc.gen, loc.off, loc.n)); ok && int64(len(b)) == loc.n {
				return b, int64(len(b)), nil
			}
		}
		run := av.run(ctx, loc)
		start, last := run[0].off, run[len(run)-1]
		buf := make([]byte, last.off+last.n-start)
		f.counts.rangeReads.Add(1)
		if len(run) > 1 {
			f.counts.coalesced.Add(uint64(len(run) - 1))
		}
		err := f.store.ReadAt(ctx, loc.key, loc.gen, buf, start)
		if errors.Is(err, store.ErrPrecondition) {
			return nil, 0, errStale
		}
		if err != nil {
			return nil, 0, err
		}
		for _, r := range run[1:] {
			b := bytes.Clone(buf[r.off-start : r.off-start+r.n])
			f.cache.Add(rangeKey(loc.key, loc.gen, r.off), b, int64(len(b)))
		}
		if dc != nil {
			for _, r := range run {
				dc.Put(diskRangeKey(f.store, loc.key, loc.gen, r.off, r.n), buf[r.off-start:r.off-start+r.n])
			}
		}
		b := bytes.Clone(buf[:loc.n])
		return b, int64(len(b)), nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// run returns the chunk at loc and the chunks stored after it in its shard
// that one ranged read should fetch with it: near enough, not cached yet.
func (av *arrayView) run(ctx context.Context, loc location) []storedRange {
	run := []storedRange{{loc.off, loc.n}}
	s, err := av.object(ctx, loc.key, false)
	if err != nil || s.index == nil || s.info.Generation != loc.gen {
		return run
	}
	var after []storedRange
	for i := range s.index.Len() {
		if off, n, ok := s.index.Chunk(i); ok && off > loc.off {
			after = append(after, storedRange{off, n})
		}
	}
	slices.SortFunc(after, func(a, b storedRange) int { return cmp.Compare(a.off, b.off) })
	end := loc.off + loc.n
	for _, r := range after {
		if r.off-end > coalesceGap || r.off+r.n-loc.off > coalesceMax || av.fs.cache.Contains(rangeKey(loc.key, loc.gen, r.off)) {
			break
		}
		run = append(run, r)
		end = r.off + r.n
	}
	return run
}

func rangeKey(key string, gen store.Generation, off int64) string {
	return fmt.Sprintf("raw\x00%s\x00%s\x00%d", key, gen, off)
}
