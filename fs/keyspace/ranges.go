package keyspace

import (
	"bytes"
	"cmp"
	"context"
	"slices"
)

// Stores that do not open files (object stores, web servers) cost a round
// trip per request, so chunk bytes are fetched in runs: the stored chunks
// of a shard, in offset order, are cut into runs whose gaps stay under
// coalesceGap and whose span stays under coalesceMax, and a miss fetches
// the whole run of its chunk with one ranged read. The run's chunks wait
// in the cache for the reader, which (a legacy reader opens chunk files in
// key order, one at a time) then reads a shard with few requests instead
// of one per chunk. A run is read from the aligned blocks that cover it
// (fetchRange), the unit of the disk cache and the cluster.
const (
	coalesceGap = 1 << 20
	coalesceMax = 8 << 20
)

// storedRange is where one chunk's bytes lie in its shard.
type storedRange struct{ off, n int64 }

// readRange returns a chunk's stored bytes from a store read by ranges,
// fetching its run unless it is cached.
func (av *arrayView) readRange(ctx context.Context, loc location) ([]byte, error) {
	if err := av.fitsInMemory(ctx, loc); err != nil {
		return nil, err
	}
	f := av.fs
	// Other readers wait for this load and the run's: each leaves when its
	// request is interrupted, and the fetch stops when all have.
	v, err := f.cache.GetOrLoad(ctx, chunkRangeKey(loc), func(ctx context.Context) (any, int64, error) {
		run := av.run(ctx, loc)
		start, last := run[0].off, run[len(run)-1]
		span := storedRange{start, last.off + last.n - start}
		v, err := f.flight.Do(ctx, runKey(loc, span), func(ctx context.Context) (any, error) {
			buf, err := av.fetchRange(ctx, loc, span, run)
			if err != nil {
				return nil, err
			}
			// The run's other chunks are cached before the flight ends,
			// so that no reader misses them in between and fetches again.
			for _, r := range run {
				if r.off != loc.off {
					b := bytes.Clone(buf[r.off-start : r.off-start+r.n])
					f.cache.Add(chunkRangeKey(location{key: loc.key, gen: loc.gen, off: r.off}), b, int64(len(b)))
				}
			}
			return buf, nil
		})
		if err != nil {
			return nil, 0, err
		}
		buf := v.([]byte)
		b := bytes.Clone(buf[loc.off-start : loc.off-start+loc.n])
		return b, int64(len(b)), nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// run returns the run of the chunk at loc: the stored chunks of its shard
// that one ranged read fetches together. Without the shard's index (an
// unsharded chunk) it is the chunk alone.
func (av *arrayView) run(ctx context.Context, loc location) []storedRange {
	alone := []storedRange{{loc.off, loc.n}}
	s, err := av.object(ctx, loc.key, false)
	if err != nil || s.index == nil || s.info.Generation != loc.gen {
		return alone
	}
	var stored []storedRange
	for i := range s.index.Len() {
		if off, n, ok := s.index.Chunk(i); ok {
			stored = append(stored, storedRange{off, n})
		}
	}
	slices.SortFunc(stored, func(a, b storedRange) int { return cmp.Compare(a.off, b.off) })
	var run []storedRange
	for _, r := range stored {
		if len(run) > 0 {
			first, last := run[0], run[len(run)-1]
			if r.off-(last.off+last.n) > coalesceGap || r.off+r.n-first.off > coalesceMax {
				if containsOffset(run, loc.off) {
					return run
				}
				run = run[:0]
			}
		}
		run = append(run, r)
	}
	if containsOffset(run, loc.off) {
		return run
	}
	return alone
}

func containsOffset(run []storedRange, off int64) bool {
	return slices.ContainsFunc(run, func(r storedRange) bool { return r.off == off })
}
