package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/zarrfs/zarrfs/zarr/nd"
)

// fetchAhead fetches, from stores read by ranges, chunks ahead of their
// readers: the chunks after a sequential reader (ReadAheadFrom) and the
// chunks of shards read densely (fetchShard).
type fetchAhead struct {
	work sync.WaitGroup
	// One walk at a time looks ahead of the sequential readers, and
	// fetches holds one token per request under way.
	walking atomic.Bool
	fetches chan struct{}
	shards  sync.Map // store key of a dense shard being fetched ahead
}

const (
	// remoteAhead is how far in key order a walk looks: at a few hundred
	// microseconds per cached chunk, a reader takes longer to get there
	// than a round trip to a remote store.
	remoteAhead = 256
	// remoteFetchesAhead bounds the requests under way ahead of readers.
	// A legacy reader walks chunk keys in C order, across several shards
	// per row of chunks, so the next shards' indexes and runs are needed
	// at once: one request at a time would make it wait for a round trip
	// per shard.
	remoteFetchesAhead = 8
)

// ReadAheadFrom prepares, for a reader of a store read by ranges that
// reads the array's chunks in key order and just read the chunk at
// coords, the chunks that follow, in the background (walkAhead); one walk
// at a time, for all arrays.
func (a *Array) ReadAheadFrom(coords []int) {
	r := &a.e.ahead
	if !a.e.opts.ReadAhead || a.e.files != nil || !r.walking.CompareAndSwap(false, true) {
		return
	}
	coords = slices.Clone(coords)
	r.work.Go(func() {
		defer r.walking.Store(false)
		a.walkAhead(coords)
	})
}

// walkAhead loads (or, past the revalidation interval, checks) the index
// of each shard the chunks after coords in key order lie in, and fetches
// each run of them not cached yet, each in the background, as far as
// remoteFetchesAhead allows. A walk starts where the last one left chunks
// undone (a shard whose index was under way, no request free), so each
// chunk is looked at about once.
func (a *Array) walkAhead(coords []int) {
	ctx := a.e.bg
	start := nd.Linear(coords, a.grid) + 1
	end := min(start+remoteAhead, nd.Size(a.grid))
	a.mu.Lock()
	from := start
	if a.fetched > start && a.fetched < end {
		from = a.fetched
	}
	a.mu.Unlock()
	started := map[string]bool{} // shards checked and runs fetched by this walk
	undone := -1
	next := make([]int, len(a.grid))
	i := from
	for ; i < end; i++ {
		nd.Unravel(i, a.grid, next)
		done, more := a.fetchChunk(ctx, next, started)
		if !done && undone < 0 {
			undone = i
		}
		if !more {
			break
		}
	}
	if undone < 0 {
		undone = i
	}
	a.mu.Lock()
	a.fetched = undone
	a.mu.Unlock()
}

// fetchChunk starts what the chunk at coords needs: its shard's index, or
// the run of its stored bytes. done reports that nothing is left to start
// for it; more that requests were free for the next chunk.
func (a *Array) fetchChunk(ctx context.Context, coords []int, started map[string]bool) (done, more bool) {
	r := &a.e.ahead
	objCoords, _ := a.z.InnerChunk(coords)
	if a.unlisted(objCoords) {
		return true, true
	}
	key := a.z.ChunkKey(objCoords)
	if _, ok := a.cachedObject(key); !ok {
		if started[key] {
			return false, true
		}
		started[key] = true
		return false, a.e.fetch(func() { a.object(ctx, key, false) })
	}
	loc, ok, err := a.Locate(ctx, coords, false)
	if err != nil || !ok || loc.Data != nil || a.e.cache.Contains(chunkRangeKey(loc)) {
		return true, true
	}
	if _, held := a.e.fetching.Load(chunkRangeKey(loc)); held {
		return true, true
	}
	select {
	case r.fetches <- struct{}{}:
	default:
		return false, false
	}
	a.fetchAheadSpan(loc)
	return true, true
}

// fetch runs load in the background when fewer than remoteFetchesAhead
// fetches are under way, and reports whether it did.
func (e *Engine) fetch(load func()) bool {
	r := &e.ahead
	select {
	case r.fetches <- struct{}{}:
	default:
		return false
	}
	r.work.Go(func() {
		defer func() { <-r.fetches }()
		load()
	})
	return true
}

// fetchAheadSpan fetches in the background the span from loc, as far as
// coalesceMax reaches, holding a token of fetches the caller took.
func (a *Array) fetchAheadSpan(loc Location) {
	r := &a.e.ahead
	var sp *span
	if a.source.CheckEncodedSize(loc.N) == nil { // the reader says what is wrong
		sp = a.claim(loc, allChunks)
	}
	if sp == nil {
		<-r.fetches
		return
	}
	r.work.Go(func() {
		defer func() { <-r.fetches }()
		if _, err := a.fetchSpan(a.e.bg, loc, sp); err == nil {
			a.e.counts.ahead.Add(uint64(len(sp.chunks)))
		}
	})
}

// fetchShard fetches, ahead of its readers, the chunks of a dense shard
// (see Touched) neither cached nor being fetched: spans of up to
// coalesceMax, as many at once as remoteFetchesAhead allows, by one walk
// per shard at a time.
func (a *Array) fetchShard(loc Location) {
	r := &a.e.ahead
	if !a.e.opts.ReadAhead {
		return
	}
	if _, busy := r.shards.LoadOrStore(loc.Key, struct{}{}); busy {
		return
	}
	r.work.Go(func() {
		defer r.shards.Delete(loc.Key)
		s := a.shardState(loc)
		if s == nil {
			return
		}
		// From the chunk read on, round to those before it, as far as a
		// quarter of the cache holds: what is fetched must stay cached
		// until read.
		stored := s.sorted()
		p, _ := s.position(loc.Off)
		budget := a.e.opts.CacheBytes / 4
		for _, c := range slices.Concat(stored[p:], stored[:p]) {
			if budget -= c.n; budget < 0 {
				return
			}
			l := Location{Key: loc.Key, Gen: loc.Gen, Off: c.off, N: c.n, Size: loc.Size}
			k := chunkRangeKey(l)
			if _, held := a.e.fetching.Load(k); held || a.e.cache.Contains(k) {
				continue
			}
			select {
			case r.fetches <- struct{}{}:
			case <-a.e.bg.Done():
				return
			}
			a.fetchAheadSpan(l)
		}
	})
}
