package engine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// ObjectReport describes one stored object of an array: a shard, or an
// unsharded chunk.
type ObjectReport struct {
	Key    string
	Coords []int // in the grid of shards (or chunks)
	Size   int64
	// Stored and Empty count the inner chunks of a shard within the
	// array's shape (an unsharded chunk counts as one stored chunk);
	// StoredBytes is the size of the stored inner chunks.
	Stored, Empty int
	StoredBytes   int64
	// Dead is the bytes of a shard that neither its index nor an inner
	// chunk covers (left by appends and in-place writes).
	Dead int64
	// Err is why the object is broken, nil when it is healthy.
	Err error
}

// Inspect reads every stored object of the array with workers goroutines
// and yields a report on each as it completes. It always validates a
// shard's index (checksum and bounds); with verify it also reads and
// decodes every stored inner chunk (or the whole unsharded chunk), which
// checks chunk checksums and sizes. The objects are found by the array's
// listing (on a store that cannot list, every object of the grid is
// tried); an error (of the listing, or ctx's) ends the sequence.
func (a *Array) Inspect(ctx context.Context, verify bool, workers int) iter.Seq2[ObjectReport, error] {
	return func(yield func(ObjectReport, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		coords := make(chan []int)
		reports := make(chan ObjectReport)
		var listErr error
		go func() {
			defer close(coords)
			for c, err := range a.candidates(ctx) {
				if err != nil {
					listErr = err
					return
				}
				select {
				case coords <- c:
				case <-ctx.Done():
					return
				}
			}
		}()
		var wg sync.WaitGroup
		for range max(workers, 1) {
			wg.Go(func() {
				for c := range coords {
					r, stored := a.inspectObject(ctx, c, verify, false)
					if errors.Is(r.Err, ErrStale) { // rewritten while it was read
						r, stored = a.inspectObject(ctx, c, verify, true)
					}
					if !stored {
						continue
					}
					select {
					case reports <- r:
					case <-ctx.Done():
						return
					}
				}
			})
		}
		go func() { wg.Wait(); close(reports) }()
		for r := range reports {
			if !yield(r, nil) {
				return
			}
		}
		if err := cmp.Or(listErr, ctx.Err()); err != nil {
			yield(ObjectReport{Key: a.z.Path}, err)
		}
	}
}

// inspectObject reads the object at objCoords (of the grid of shards or
// chunks), its state checked in the store when fresh; stored is false
// when there is none.
func (a *Array) inspectObject(ctx context.Context, objCoords []int, verify, fresh bool) (r ObjectReport, stored bool) {
	r = ObjectReport{Key: a.z.ChunkKey(objCoords), Coords: objCoords}
	var s *objectState
	var err error
	if verify && a.e.files == nil {
		s, err = a.loadWhole(ctx, r.Key)
	} else {
		s, err = a.object(ctx, r.Key, fresh)
	}
	switch {
	case err != nil:
		r.Err = err
		return r, true
	case s.err != nil:
		r.Err = s.err
		return r, true
	case !s.exists:
		return r, false
	}
	r.Size = s.info.Size
	at := Location{Key: r.Key, Gen: s.info.Generation, Size: s.info.Size, ModTime: s.info.ModTime}
	if s.index == nil {
		r.Stored, r.StoredBytes = 1, r.Size
		if verify {
			at.N = r.Size
			r.Err = a.verify(ctx, at)
		}
		return r, true
	}
	var errs []error
	var locs []Location
	var inner []int // the index of each of locs
	for i := range s.index.Len() {
		off, n, ok := s.index.Chunk(i)
		if !nd.Inside(a.z.InnerCoords(objCoords, i), a.grid) {
			if ok {
				errs = append(errs, fmt.Errorf("inner chunk %d lies outside the array but is stored", i))
			}
			continue
		}
		if !ok {
			r.Empty++
			continue
		}
		r.Stored++
		r.StoredBytes += n
		loc := at
		loc.Off, loc.N = off, n
		locs, inner = append(locs, loc), append(inner, i)
	}
	r.Dead = a.shard.DeadBytes(s.index, r.Size)
	if verify {
		// In offset order, so that the reads of a store read by ranges
		// coalesce as a dense reader's do.
		order := make([]int, len(locs))
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(x, y int) int { return cmp.Compare(locs[x].Off, locs[y].Off) })
		for _, j := range order {
			if a.e.files == nil {
				a.Touched(locs[j])
			}
			if err := a.verify(ctx, locs[j]); err != nil {
				errs = append(errs, fmt.Errorf("inner chunk %d: %w", inner[j], err))
			}
		}
	}
	r.Err = errors.Join(errs...)
	return r, true
}

// verify reads the chunk at loc and decodes it.
func (a *Array) verify(ctx context.Context, loc Location) error {
	b, err := a.ReadStored(ctx, loc)
	if err == nil {
		_, err = a.source.Decode(b)
	}
	return err
}

// loadWhole loads the state of a stored object from a store read by
// ranges, as object does, with one request that also fetches as much of
// the object as one block holds: all of a small shard or chunk, whose
// stored chunks are then cached for reading. A shard whose index that
// request misses (a large one with its index at the start) is loaded as
// object does.
func (a *Array) loadWhole(ctx context.Context, key string) (*objectState, error) {
	e := a.e
	now := time.Now().UnixNano()
	b, info, err := e.store.Get(ctx, key, store.Last(blocks.Size), store.Cond{})
	if errors.Is(err, store.ErrNotFound) {
		return &objectState{key: key, rewrites: e.rewrites(key)}, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return &objectState{key: key, rewrites: e.rewrites(key), err: err}, nil
	}
	at := info.Size - int64(len(b))
	s := &objectState{key: key, rewrites: e.rewrites(key), exists: true, info: info}
	s.checked.Store(now)
	if a.shard != nil {
		var found bool
		if s.index, found, s.err = a.z.ShardIndexIn(b, at, info.Size); !found {
			return a.object(ctx, key, false)
		}
		e.counts.indexLoads.Add(1)
		a.keepIndex(s)
	}
	e.objects.Add(a.objectKey(key), s, s.size())
	if s.err != nil {
		return s, nil
	}
	// What a fetched span would cache (fetchSpan) of the chunks b holds.
	ranges := []storedRange{{0, info.Size}}
	if s.index != nil {
		ranges = s.sorted()
	}
	for _, c := range ranges {
		if c.off >= at && c.off+c.n <= info.Size {
			chunk := bytes.Clone(b[c.off-at : c.off-at+c.n])
			e.cache.Add(e.chunkRangeKey(Location{Key: key, Gen: info.Generation, Off: c.off}), chunk, c.n)
		}
	}
	return s, nil
}
