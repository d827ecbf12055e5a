package engine

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/zarrfs/zarrfs/zarr/nd"
)

// Stores that do not open files (object stores, web servers) cost a round
// trip per request, so a miss may fetch, with one ranged read, the chunks
// stored after the one asked for (a span). How far it reaches is what the
// readers of the shard proved they need, as mountpoint-s3's prefetcher
// doubles its requests: a shard read once in a while (a random reader)
// fetches its chunk alone, and one that many recent reads touched, in any
// order (threads, processes, async tasks), fetches twice as far with each
// read up to coalesceMax, and becomes dense (so does one whose chunks
// several readers wait for at once): its remaining chunks are fetched
// ahead of the readers (fetchShard), and the next shards too when the one
// next to it is dense (fetchFollowing). A miss in a shard being fetched
// ahead so fetches as far as coalesceMax, once the fetches under way
// leave room for a span that long, and speculates nothing: many readers
// missing at once in shards read densely (node's 16 threads reading a 3-d
// array) otherwise each fetch their chunk alone, ten requests where one
// would do. A shard read densely once and at random later is not: its
// fetch ahead has ended. A miss of a chunk fetched alone otherwise has
// the chunks after it fetched too, concurrently (speculate). A span
// never crosses a gap over coalesceGap and stops at a chunk cached or
// being fetched, so concurrent readers do not fetch bytes twice. A span
// is read from the aligned blocks that cover it (fetchRange), the unit
// of the disk cache and the cluster.
const (
	coalesceGap = 1 << 20
	coalesceMax = 8 << 20
	// fetchMin is the least a miss fetches when chunks are that small: a
	// request costs a round trip, in which tens of KiB more cost nothing.
	fetchMin = 64 << 10
	// recentReads is the window of an Array's last reads in which a
	// shard's share of them shows how densely it is read: counted in reads,
	// not time, so that a fast random reader is never taken for a dense one.
	recentReads = 16
	// denseReads of the last recentReads touching one shard make it dense,
	// as does a run of denseRun chunks read next to each other in it (the
	// readers of an array of several dimensions, reading in key order,
	// visit many shards in turn).
	denseReads = 8
	denseRun   = 8
	// concurrentMisses reads waiting at once on fetches of one shard's
	// chunks make it dense, whatever the order of their chunks: many
	// readers (threads, async tasks) read it together. One reader at a
	// time, as a random reader, never does.
	concurrentMisses = 3
)

// storedRange is where one chunk's bytes lie in its shard.
type storedRange struct{ off, n int64 }

// recent is the window of an Array's last chunk reads from a store
// read by ranges: the chunks read, by shard key and offset, each once
// (a chunk file is read in several requests).
type recent struct {
	mu     sync.Mutex
	chunks [recentReads]recentChunk
	next   int
}

type recentChunk struct {
	key string
	off int64
}

// touch records a read of the chunk at loc and returns how many of the
// last recentReads chunks read (this one included) were of its shard.
func (r *recent) touch(loc Location) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := recentChunk{loc.Key, loc.Off}
	if !slices.Contains(r.chunks[:], c) {
		r.chunks[r.next] = c
		r.next = (r.next + 1) % recentReads
	}
	return r.countLocked(loc.Key)
}

// count is how many of the last recentReads chunks read were of the
// shard key.
func (r *recent) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.countLocked(key)
}

func (r *recent) countLocked(key string) int {
	n := 0
	for _, c := range r.chunks {
		if c.key == key {
			n++
		}
	}
	return n
}

// Touched records a reader's read of the chunk at loc, from a store read
// by ranges; a shard it makes dense is fetched ahead.
func (a *Array) Touched(loc Location) {
	recent := a.recent.touch(loc)
	run := 0
	if s := a.shardState(loc); s != nil {
		run = s.touch(loc.Off)
	}
	if recent >= denseReads || run >= denseRun {
		a.fetchShard(loc)
		a.fetchFollowing(loc)
	}
}

// wanted is how many chunks a miss of the chunk at loc fetches: one for a
// shard read once in a while, and twice what the readers proved they read,
// either as a share of the array's recent reads or as a run of chunks read
// next to it (whichever is more).
func (a *Array) wanted(loc Location) int {
	want := 1
	if c := a.recent.count(loc.Key); c > 2 {
		want = 1 << min(c-2, 20)
	}
	if s := a.shardState(loc); s != nil {
		want = max(want, 2*s.runAround(loc.Off))
	}
	return want
}

// shardState is the cached state of loc's shard when it is of loc's
// generation and has an index; nil otherwise.
func (a *Array) shardState(loc Location) *objectState {
	v, ok := a.e.objects.Peek(a.objectKey(loc.Key))
	if !ok {
		return nil
	}
	s := v.(*objectState)
	if s.index == nil || s.info.Generation != loc.Gen {
		return nil
	}
	return s
}

// denseCached reports whether the chunk at (inner grid) coordinates is in a dense
// shard and cached, without loading or fetching anything (see Upcoming).
func (a *Array) denseCached(coords []int) bool {
	if a.e.files != nil || a.shard == nil || !nd.Inside(coords, a.grid) {
		return false
	}
	objCoords, local := a.z.InnerChunk(coords)
	key := a.z.ChunkKey(objCoords)
	if a.recent.count(key) < denseReads {
		return false
	}
	s, ok := a.cachedObject(key)
	if !ok || s.index == nil {
		return false
	}
	off, _, ok := s.index.Chunk(local)
	return ok && a.e.cache.Contains(a.e.chunkRangeKey(Location{Key: key, Gen: s.info.Generation, Off: off}))
}

// readRange returns a chunk's stored bytes from a store read by ranges,
// fetching its span unless it is cached.
func (a *Array) readRange(ctx context.Context, loc Location) ([]byte, error) {
	if err := a.CheckSize(ctx, loc); err != nil {
		return nil, err
	}
	e := a.e
	key := a.e.chunkRangeKey(loc)
	if e.opts.ReadAhead && !e.cache.Contains(key) {
		defer a.waiting(loc)()
	}
	// Other readers of the chunk wait for this load: each leaves when its
	// request is interrupted, and the fetch stops when all have.
	v, err := e.cache.GetOrLoad(ctx, key, func(ctx context.Context) (any, int64, error) {
		for range 3 {
			// Cached by a fetch that ended since this load began, or held
			// by one under way: wait for it.
			if b, ok := e.cache.Peek(key); ok {
				return b, int64(len(b.([]byte))), nil
			}
			if v, ok := e.fetching.Load(key); ok {
				select {
				case <-v.(*span).done:
				case <-ctx.Done():
					return nil, 0, ctx.Err()
				}
				continue // cached, or it failed (its readers left): claim it
			}
			want := allChunks
			if a.readDensely(loc.Key) {
				if !e.inflight.wait(ctx, aheadRoom) {
					return nil, 0, ctx.Err()
				}
			} else {
				want = a.wanted(loc)
			}
			if sp := a.claim(loc, want); sp != nil {
				if want != allChunks {
					a.speculate(loc, sp)
				}
				b, err := a.fetchSpan(ctx, loc, sp)
				return b, int64(len(b)), err
			}
		}
		// The fetches holding it keep failing: fetch it alone, unclaimed.
		if b, ok := e.cache.Peek(key); ok {
			return b, int64(len(b.([]byte))), nil
		}
		b, err := a.fetchSpan(ctx, loc, &span{chunks: []storedRange{{loc.Off, loc.N}}})
		return b, int64(len(b)), err
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// waiting counts a read of the chunk at loc waiting on its fetch until
// the function returned is called; with concurrentMisses waiting on one
// shard's chunks at once, the shard is read densely.
func (a *Array) waiting(loc Location) func() {
	a.mu.Lock()
	if a.misses == nil {
		a.misses = map[string]int{}
	}
	a.misses[loc.Key]++
	n := a.misses[loc.Key]
	a.mu.Unlock()
	if n >= concurrentMisses {
		a.fetchShard(loc)
		a.fetchFollowing(loc)
	}
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.misses[loc.Key]--; a.misses[loc.Key] <= 0 {
			delete(a.misses, loc.Key)
		}
	}
}

// span is one ranged read of a shard: the chunks it fetches, in offset
// order. While it is under way each of them is claimed in Engine.fetching,
// its bytes are counted in Engine.inflight, and done is closed once they
// are cached (or the fetch failed).
type span struct {
	chunks []storedRange
	bytes  int64
	done   chan struct{}
}

func (sp *span) byteRange() storedRange {
	first, last := sp.chunks[0], sp.chunks[len(sp.chunks)-1]
	return storedRange{first.off, last.off + last.n - first.off}
}

// claim claims for one fetch the chunk at loc and up to want-1 chunks
// stored after it that are neither cached nor claimed, as many as the
// bytes left to fetches allow (see inflight); nil when the chunk at loc is
// cached or claimed already.
func (a *Array) claim(loc Location, want int) *span {
	e := a.e
	sp := &span{done: make(chan struct{})}
	e.inflight.reserve(func(room int64) int64 {
		for _, r := range a.following(loc, want) {
			if len(sp.chunks) > 0 && r.off+r.n-sp.chunks[0].off > room {
				break
			}
			k := a.e.chunkRangeKey(Location{Key: loc.Key, Gen: loc.Gen, Off: r.off})
			if _, held := e.fetching.LoadOrStore(k, sp); held {
				break
			}
			// Checked once claimed: a fetch that held it has cached it.
			if e.cache.Contains(k) {
				e.fetching.Delete(k)
				break
			}
			sp.chunks = append(sp.chunks, r)
		}
		if len(sp.chunks) > 0 {
			sp.bytes = sp.byteRange().n
		}
		return sp.bytes
	})
	if len(sp.chunks) == 0 {
		return nil
	}
	return sp
}

// speculate fetches in the background, with another request, the chunks
// stored right after the span sp that a miss of the chunk at loc fetches,
// as long as the two together fetch at most twice the chunk's bytes: when
// no reader proved it needs more than the chunk (a random reader). Such a
// reader later finds as many of them cached as the share of the shard it
// reads, each a round trip it does not wait for, at the cost of at most
// the bytes it reads again and no time: it waits for its own request.
// The fetch is tied to loc's generation, like the miss's: it caches
// nothing of a shard replaced since.
func (a *Array) speculate(loc Location, sp *span) {
	r := &a.e.ahead
	budget := 2*loc.N - sp.byteRange().n
	s := a.shardState(loc)
	if !a.e.opts.ReadAhead || budget <= 0 || s == nil {
		return
	}
	last := sp.chunks[len(sp.chunks)-1]
	stored := s.sorted()
	p, ok := s.position(last.off)
	if !ok {
		return
	}
	want := 0
	for _, c := range stored[p+1:] {
		if budget -= c.n; budget < 0 {
			break
		}
		want++
	}
	if want == 0 {
		return
	}
	select {
	case r.fetches <- struct{}{}:
	default:
		return // as many requests under way as the store takes ahead of readers
	}
	next := stored[p+1]
	a.fetchAheadSpan(Location{Key: loc.Key, Gen: loc.Gen, Off: next.off, N: next.n, Size: loc.Size}, want)
}

// release ends a claimed span's hold on its chunks.
func (a *Array) release(loc Location, sp *span) {
	if sp.done == nil {
		return // unclaimed
	}
	for _, r := range sp.chunks {
		a.e.fetching.Delete(a.e.chunkRangeKey(Location{Key: loc.Key, Gen: loc.Gen, Off: r.off}))
	}
	a.e.inflight.add(-sp.bytes)
	close(sp.done)
}

// inflight counts the bytes of the spans being fetched: their buffers are
// in memory besides the cache until their chunks are cached, so with many
// readers and the fetches ahead of them under way at once they would take
// tens of MiB past --cache-size. A span is cut to the bytes left (the
// chunk its reader waits for at least), and fetches ahead of readers wait
// for room.
type inflight struct {
	max   int64
	mu    sync.Mutex
	bytes int64
	freed chan struct{} // closed when bytes are given back, then replaced
}

// maxInflight bounds the bytes fetched at once: enough to keep a remote
// store busy (8 MiB is a round trip of 20 ms at 400 MB/s) at a small
// share of the memory a mount takes besides its cache (an eighth of a
// cache under 128 MiB).
const maxInflight = 16 << 20

func newInflight(cacheBytes int64) *inflight {
	return &inflight{max: min(maxInflight, max(cacheBytes/8, aheadRoom)), freed: make(chan struct{})}
}

// reserve counts as taken the bytes claim returns, given the bytes left,
// under one lock: readers woken together by freed room (see readRange)
// would otherwise each see all of it, and take it many times over.
func (f *inflight) reserve(claim func(room int64) int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bytes += claim(f.max - f.bytes)
}

// room is how many bytes a span may take now.
func (f *inflight) room() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.max - f.bytes
}

func (f *inflight) add(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bytes += n
	if n < 0 {
		close(f.freed)
		f.freed = make(chan struct{})
	}
}

// wait waits until n bytes are free, or none is fetched (a span larger
// than the bound goes alone), or ctx is done; false then.
func (f *inflight) wait(ctx context.Context, n int64) bool {
	for {
		f.mu.Lock()
		ok, freed := f.bytes == 0 || f.max-f.bytes >= n, f.freed
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// fetchSpan fetches a span of loc's shard, caches each of its chunks, and
// returns the chunk at loc.
func (a *Array) fetchSpan(ctx context.Context, loc Location, sp *span) ([]byte, error) {
	e := a.e
	defer a.release(loc, sp)
	r := sp.byteRange()
	started := time.Now()
	chunks, err := a.fetchRange(ctx, loc, r, sp.chunks)
	if err != nil {
		return nil, err
	}
	if e.cluster == nil && e.opts.DiskCache == nil {
		// The read went to the store tied to the shard's generation: the
		// shard is unchanged, and needs no check for another interval.
		a.confirmed(loc, started)
	}
	var own []byte
	for i, c := range sp.chunks {
		b := chunks[i]
		e.cache.Add(e.chunkRangeKey(Location{Key: loc.Key, Gen: loc.Gen, Off: c.off}), b, int64(len(b)))
		if c.off == loc.Off {
			own = b
		}
	}
	return own, nil
}

// confirmed marks the cached state of loc's shard as checked at t, when
// it is of loc's generation: a read tied to that generation answered.
func (a *Array) confirmed(loc Location, t time.Time) {
	v, ok := a.e.objects.Peek(a.objectKey(loc.Key))
	if !ok {
		return
	}
	if s := v.(*objectState); s.exists && s.info.Generation == loc.Gen && s.checked.Load() < t.UnixNano() {
		s.checked.Store(t.UnixNano())
	}
}

// following returns the chunk at loc and up to want-1 chunks stored right
// after it in its shard, in offset order: no gap over coalesceGap, at most
// coalesceMax bytes, and at least fetchMin when the chunks are that small.
// Without the shard's cached index (an unsharded chunk) it is the chunk
// alone.
func (a *Array) following(loc Location, want int) []storedRange {
	alone := []storedRange{{loc.Off, loc.N}}
	s := a.shardState(loc)
	if s == nil {
		return alone
	}
	stored := s.sorted()
	i, found := slices.BinarySearchFunc(stored, loc.Off, func(r storedRange, off int64) int { return cmp.Compare(r.off, off) })
	if !found {
		return alone
	}
	j := i + 1
	for ; j < len(stored); j++ {
		prev, r := stored[j-1], stored[j]
		if enough := prev.off + prev.n - loc.Off; j-i >= want && enough >= fetchMin {
			break
		}
		if r.off-(prev.off+prev.n) > coalesceGap || r.off+r.n-loc.Off > coalesceMax {
			break
		}
	}
	return stored[i:j]
}

// sorted returns the stored chunks of a shard in offset order, computed
// once per loaded index.
func (s *objectState) sorted() []storedRange {
	s.sortOnce.Do(func() {
		for i := range s.index.Len() {
			if off, n, ok := s.index.Chunk(i); ok {
				s.byOffset = append(s.byOffset, storedRange{off, n})
			}
		}
		slices.SortFunc(s.byOffset, func(a, b storedRange) int { return cmp.Compare(a.off, b.off) })
	})
	return s.byOffset
}

// position is the place of the chunk stored at off among the shard's
// stored chunks in offset order; false when none is stored there.
func (s *objectState) position(off int64) (int, bool) {
	return slices.BinarySearchFunc(s.sorted(), off, func(r storedRange, off int64) int { return cmp.Compare(r.off, off) })
}

// touch marks the chunk stored at off as read and returns runAround.
func (s *objectState) touch(off int64) int {
	p, ok := s.position(off)
	if !ok {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.touched == nil {
		s.touched = make([]bool, len(s.sorted()))
	}
	s.touched[p] = true
	return s.runAroundLocked(p)
}

// runAround is how many chunks stored right before the chunk at off, or
// right after it, were read: the longer run.
func (s *objectState) runAround(off int64) int {
	p, ok := s.position(off)
	if !ok {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runAroundLocked(p)
}

func (s *objectState) runAroundLocked(p int) int {
	if s.touched == nil {
		return 0
	}
	before, after := 0, 0
	for i := p - 1; i >= 0 && s.touched[i] && before < maxRun; i-- {
		before++
	}
	for i := p + 1; i < len(s.touched) && s.touched[i] && after < maxRun; i++ {
		after++
	}
	return max(before, after)
}

// maxRun bounds the runs runAround counts: a span ends at coalesceMax
// long before, whatever the chunks' size.
const maxRun = 1 << 12

// allChunks asks for every chunk of a span.
const allChunks = math.MaxInt
