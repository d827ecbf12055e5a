package engine

import (
	"context"
	"slices"
	"strings"
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
	// inOrderRun is how many chunks in a row readers read in key order
	// before a walk looks ahead of them: a random reader reads two chunks
	// in a row by chance (about once in as many reads as the array has
	// chunks), a sequential reader goes on.
	inOrderRun = 3
	// remoteFetchesAhead bounds the requests under way ahead of readers.
	// A legacy reader walks chunk keys in C order, across several shards
	// per row of chunks, so the next shards' indexes and runs are needed
	// at once: one request at a time would make it wait for a round trip
	// per shard.
	remoteFetchesAhead = 8
	// maxIndexesAhead bounds the arrays whose every shard index is loaded
	// ahead of readers (loadIndexes): a few hundred requests at most, in
	// the background.
	maxIndexesAhead = 128
)

// ReadAheadFrom is told that a reader of a store read by ranges read the
// chunk at coords right after the one before it in key order (NoteRead,
// NoteLookup). Once readers read inOrderRun chunks in a row so, it
// prepares the chunks that follow, in the background (walkAhead); one walk
// at a time, for all arrays.
func (a *Array) ReadAheadFrom(coords []int) {
	r := &a.e.ahead
	if !a.e.opts.ReadAhead || a.e.files != nil || a.seq.runTo(coords) < inOrderRun || !r.walking.CompareAndSwap(false, true) {
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
	if err != nil || !ok || loc.Data != nil || a.e.cache.Contains(a.e.chunkRangeKey(loc)) {
		return true, true
	}
	if _, held := a.e.fetching.Load(a.e.chunkRangeKey(loc)); held {
		return true, true
	}
	if a.e.inflight.room() < aheadRoom {
		return false, false
	}
	select {
	case r.fetches <- struct{}{}:
	default:
		return false, false
	}
	a.fetchAheadSpan(loc, allChunks)
	return true, true
}

// aheadRoom is the room for fetches (see inflight) a fetch ahead of
// readers waits for: spans of a few MiB, not of a chunk each.
const aheadRoom = coalesceMax / 2

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

// fetchAheadSpan fetches in the background the span of up to want
// chunks from loc (allChunks: as far as coalesceMax reaches), holding a
// token of fetches the caller took.
func (a *Array) fetchAheadSpan(loc Location, want int) {
	r := &a.e.ahead
	var sp *span
	if a.source.CheckEncodedSize(loc.N) == nil { // the reader says what is wrong
		sp = a.claim(loc, want)
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
			k := a.e.chunkRangeKey(l)
			if _, held := a.e.fetching.Load(k); held || a.e.cache.Contains(k) {
				continue
			}
			if !a.e.inflight.wait(a.e.bg, aheadRoom) {
				return
			}
			select {
			case r.fetches <- struct{}{}:
			case <-a.e.bg.Done():
				return
			}
			a.fetchAheadSpan(l, allChunks)
		}
	})
}

// shardRing is a short memory of shards, by key-order position in the
// array's shard grid.
type shardRing struct {
	mu   sync.Mutex
	pos  [16]int // position+1; 0 is empty
	next int
}

// add remembers the shard at position p, and reports whether it was not
// remembered yet.
func (r *shardRing) add(p int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.pos[:], p+1) {
		return false
	}
	r.pos[r.next] = p + 1
	r.next = (r.next + 1) % len(r.pos)
	return true
}

// size counts the shards remembered.
func (r *shardRing) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.pos {
		if p != 0 {
			n++
		}
	}
	return n
}

func (r *shardRing) has(p int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.pos[:], p+1)
}

// shardPosition is the key-order position in the shard grid of the shard
// stored at key.
func (a *Array) shardPosition(key string) (int, bool) {
	if a.shard == nil {
		return 0, false
	}
	rel, ok := strings.CutPrefix(key, a.z.Path+"/")
	if a.z.Path == "" {
		rel, ok = key, true
	}
	if !ok {
		return 0, false
	}
	c, ok := a.z.ParseChunkKey(rel)
	if !ok {
		return 0, false
	}
	return nd.Linear(c, a.z.Grid()), true
}

// shardStep is the position of the shard k shards after the one at
// position p, in key order (the last axis fastest) or, with firstFastest,
// in the order with the first axis fastest (zarrita reads an array's
// chunks so); false outside the grid.
func (a *Array) shardStep(p, k int, firstFastest bool) (int, bool) {
	grid := a.z.Grid()
	if !firstFastest {
		return p + k, p+k >= 0 && p+k < nd.Size(grid)
	}
	c := make([]int, len(grid))
	nd.Unravel(p, grid, c)
	rgrid := slices.Clone(grid)
	slices.Reverse(rgrid)
	slices.Reverse(c)
	f := nd.Linear(c, rgrid) + k
	if f < 0 || f >= nd.Size(grid) {
		return 0, false
	}
	nd.Unravel(f, rgrid, c)
	slices.Reverse(c)
	return nd.Linear(c, grid), true
}

// nextShards are the positions of the shards that readers visiting the
// shard at p and others of ring next: up to n after p, or after its
// neighbour, in the order in which p neighbours a shard of ring; none
// when it neighbours none.
func (a *Array) nextShards(ring *shardRing, p, n int) []int {
	for _, firstFastest := range []bool{false, true} {
		from := p
		if q, ok := a.shardStep(p, 1, firstFastest); ok && ring.has(q) {
			from = q
		} else if q, ok := a.shardStep(p, -1, firstFastest); !ok || !ring.has(q) {
			continue
		}
		var next []int
		for k := 1; k <= n; k++ {
			q, ok := a.shardStep(from, k, firstFastest)
			if !ok {
				break
			}
			next = append(next, q)
		}
		return next
	}
	return nil
}

// shardAt is the store key of the shard at key-order position p; false
// when the store's listing shows it absent.
func (a *Array) shardAt(p int) (string, bool) {
	grid := a.z.Grid()
	c := make([]int, len(grid))
	nd.Unravel(p, grid, c)
	if a.unlisted(c) {
		return "", false
	}
	return a.z.ChunkKey(c), true
}

// aheadKey marks the context of loads made ahead of readers, which do not
// start more of them (loadFollowing).
type aheadKey struct{}

// loadFollowing is told that a reader loaded the index of the shard at
// key. Once readers loaded the indexes of two shards of an array of a few
// shards, they go from shard to shard: the indexes of all are loaded in
// the background (loadIndexes). Of a larger array, when the index of a
// shard next to it (in key order, or with the first axis fastest) was
// loaded lately too, readers visit the shards in that order (as a reader
// opening every chunk file of an array before reading any does: node's
// readFile of many files at once): the indexes of the next
// remoteFetchesAhead shards are loaded in the background, at once,
// instead of one round trip after another on the readers' path.
func (a *Array) loadFollowing(ctx context.Context, key string) {
	p, ok := a.shardPosition(key)
	if !ok {
		return
	}
	a.loaded.add(p)
	if !a.e.opts.ReadAhead || a.e.files != nil || ctx.Value(aheadKey{}) != nil {
		return
	}
	ahead := context.WithValue(a.e.bg, aheadKey{}, true)
	if a.loaded.size() >= 2 && a.loadIndexes(ahead) {
		return
	}
	for _, q := range a.nextShards(&a.loaded, p, remoteFetchesAhead) {
		k, ok := a.shardAt(q)
		if !ok {
			continue
		}
		if _, cached := a.e.objects.Peek(a.objectKey(k)); cached {
			continue
		}
		if !a.e.fetch(func() { a.object(ahead, k, false) }) {
			return
		}
	}
}

// loadIndexes loads the indexes of all the array's shards not cached
// (nor listed absent) in the background, once per Array, as many at once
// as remoteFetchesAhead allows: a reader going from shard to shard in any
// order then finds each index cached or on its way, so its first read of
// a shard costs one round trip, not two. It reports whether the array is
// small enough: at most maxIndexesAhead shards, whose indexes fill at
// most half the cache of indexes (they must stay cached until read).
func (a *Array) loadIndexes(ahead context.Context) bool {
	e := a.e
	n, ok := nd.SizeFits(a.z.Grid())
	if !ok || n > maxIndexesAhead || int64(n)*stateSize(a.shard.NumChunks()) > e.opts.CacheBytes/objectsShare/2 {
		return false
	}
	if !a.indexesLoaded.CompareAndSwap(false, true) {
		return true
	}
	r := &e.ahead
	r.work.Go(func() {
		for q := range n {
			k, ok := a.shardAt(q)
			if !ok || e.objects.Contains(a.objectKey(k)) {
				continue
			}
			select {
			case r.fetches <- struct{}{}:
			case <-e.bg.Done():
				return
			}
			r.work.Go(func() {
				defer func() { <-r.fetches }()
				a.object(ahead, k, false)
			})
		}
	})
	return true
}

// readDensely reports whether the shard at key is being fetched ahead of
// its readers (fetchShard): read densely now, not only once.
func (a *Array) readDensely(key string) bool {
	_, ok := a.e.ahead.shards.Load(key)
	return ok
}

// fetchFollowing is told that the shard at loc is read densely. When a
// shard next to it (as loadFollowing sees it) was too, the array is read
// densely in that order (as concurrent readers of all its chunks read it):
// the next shards are fetched ahead like a dense one (fetchShard), their
// indexes first, as many as remoteFetchesAhead and a quarter of the cache
// allow, so that readers reaching them find them cached instead of proving
// each dense again one round trip at a time.
func (a *Array) fetchFollowing(loc Location) {
	p, ok := a.shardPosition(loc.Key)
	if !a.e.opts.ReadAhead || !ok || !a.dense.add(p) {
		return
	}
	r := &a.e.ahead
	n := remoteFetchesAhead
	if loc.Size > 0 {
		n = int(min(int64(n), max(1, a.e.opts.CacheBytes/4/loc.Size)))
	}
	ahead := context.WithValue(a.e.bg, aheadKey{}, true)
	for _, q := range a.nextShards(&a.dense, p, n) {
		k, ok := a.shardAt(q)
		if !ok {
			continue
		}
		r.work.Go(func() {
			select {
			case r.fetches <- struct{}{}:
			case <-a.e.bg.Done():
				return
			}
			s, err := a.object(ahead, k, false)
			<-r.fetches
			if err != nil || s.index == nil {
				return
			}
			if stored := s.sorted(); len(stored) > 0 {
				a.fetchShard(Location{Key: k, Gen: s.info.Generation, Size: s.info.Size, Off: stored[0].off, N: stored[0].n})
			}
		})
	}
}
