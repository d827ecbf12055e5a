package keyspace

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/nd"
)

// transcoded returns the chunk at coords, stored at loc, re-encoded with
// the view's codecs. Results are cached by chunk and shard generation, so a
// rewritten shard is transcoded afresh.
func (av *arrayView) transcoded(ctx context.Context, coords []int, loc location) ([]byte, error) {
	f := av.fs
	// Shared by the readers waiting for it (see GetOrLoad).
	v, err := f.cache.GetOrLoad(f.loadContext(ctx), av.transcodeKey(coords, loc.gen), func(ctx context.Context) (any, int64, error) {
		if f.cluster != nil && loc.data == nil {
			// The chunk's owner in the cluster transcodes it once for all.
			if b, err := f.cluster.Get(ctx, av.transcodedKey(coords, loc.gen), av.transcodedCheck(ctx, coords, loc)); err == nil {
				return b, int64(cap(b)), nil
			}
		}
		b, err := av.transcode(ctx, coords, loc, av.target)
		return b, int64(cap(b)), err
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// transcode re-encodes the chunk at coords, stored at loc, here with
// target (the view's codecs, or those a peer asks for).
func (av *arrayView) transcode(ctx context.Context, coords []int, loc location, target *codec.Pipeline) ([]byte, error) {
	f := av.fs
	stored, done, err := av.readStoredScratch(ctx, loc)
	if err != nil {
		return nil, err
	}
	chunk, err := av.source.Decode(stored)
	if err != nil {
		done()
		f.logOnce(ctx, loc.key, "inner chunk does not decode: its files give EIO", "array", av.path, "chunk", coords, "error", err)
		return nil, fmt.Errorf("%w: %s: inner chunk %v: %v", ErrCorrupt, loc.key, coords, err)
	}
	// Sub-byte integers decode to one byte each, which is what the view's
	// one-byte type stores.
	chunk.Type = target.Spec().Type
	b, err := target.Encode(chunk)
	if err != nil {
		done()
		return nil, fmt.Errorf("transcode %s chunk %v: %w", av.path, coords, err)
	}
	f.counts.transcodes.Add(1)
	if cap(b)-len(b) > len(b)/8 {
		// Encoders allocate for the worst case, often twice what the
		// bytes need: keep (and count against the cache's bound) only
		// the bytes. Copying an exact one would cost as much as the
		// transpose, in fresh memory.
		b = bytes.Clone(b)
	}
	// Decoders may hand back the bytes they were given (an identity
	// transpose does) and encoders the chunk's: what is kept may be the
	// stored bytes themselves, whose buffer then is not reused.
	if !overlap(b, stored) {
		done()
	}
	return b, nil
}

// scratchBuffers hold the stored bytes of local chunks read only to be
// decoded (see readStoredScratch): reused, they cost neither fresh memory
// nor zeroing nor a collection, where a new buffer per chunk was half of
// what a cold read of transcoded chunks allocated.
var scratchBuffers sync.Pool // of *[]byte

// readStoredScratch reads a chunk's stored bytes for a decode that keeps
// none of them: from a local shard file into a pooled buffer, which done
// gives back, so the caller calls it only once nothing it keeps shares the
// bytes. Stored bytes held elsewhere (pending updates, ranges cached from
// stores read by ranges) are read as readStored does, and done does
// nothing.
func (av *arrayView) readStoredScratch(ctx context.Context, loc location) (b []byte, done func(), err error) {
	if loc.data != nil || av.fs.files == nil {
		b, err := av.readStored(ctx, loc)
		return b, func() {}, err
	}
	if err := av.fitsInMemory(ctx, loc); err != nil {
		return nil, func() {}, err
	}
	buf, _ := scratchBuffers.Get().(*[]byte)
	if buf == nil || int64(cap(*buf)) < loc.n {
		b := make([]byte, loc.n)
		buf = &b
	}
	done = func() { scratchBuffers.Put(buf) }
	if b, err = av.readShardFile(ctx, loc, (*buf)[:loc.n]); err != nil {
		done()
		return nil, func() {}, err
	}
	return b, done, nil
}

// readAhead transcodes, in the background, the chunks that follow the one
// a reader is reading, when it reads an array's chunks in key order (as
// cat of a directory, cp -r, and zarr-python reading a region do). A
// transcode costs a decode and an encode, which then run on a CPU the
// reader leaves idle instead of between its requests. Pass-through chunks
// of local files need none: they are byte ranges of the shard, which the
// kernel reads ahead itself; those of stores read by ranges are fetched
// ahead (fetchAhead).
type readAhead struct {
	ctx   context.Context // the FS's background work's (FS.bg)
	depth int             // transcoded chunks prepared ahead of the reader; 0: none
	slots chan struct{}   // one per transcodeAhead walker under way
	work  sync.WaitGroup
	ahead atomic.Uint64 // chunks transcoded or fetched ahead, for Stats
	// Stores read by ranges, when fetchOn (Options.FetchAhead): one walk
	// at a time looks ahead of the readers, and fetches holds one token
	// per request it started.
	fetchOn bool
	walking atomic.Bool
	fetches chan struct{}
	shards  sync.Map // store key of a dense shard being fetched ahead
}

func newReadAhead(ctx context.Context, depth int, fetch bool) *readAhead {
	return &readAhead{
		ctx:     ctx,
		depth:   depth,
		fetchOn: fetch,
		slots:   make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1)),
		fetches: make(chan struct{}, remoteFetchesAhead),
	}
}

// sequence remembers the last chunk of an array a reader asked for, and
// how far fetchAhead got.
type sequence struct {
	mu   sync.Mutex
	last []int
	// fetched is the key-order position of the first chunk that no walk
	// of fetchAhead has found cached or fetching.
	fetched int
	// transcoding is set while transcodeAhead works for this array.
	transcoding atomic.Bool
}

// follows reports whether coords come right after the last chunk read,
// in key order. The caller holds s.mu.
func (s *sequence) follows(av *arrayView, coords []int) bool {
	return s.last != nil && slices.Equal(av.nextChunk(s.last), coords)
}

// after is told that the chunk at coords of av was read. When it follows
// the chunk read before it, the next depth chunks are transcoded in the
// background (transcodeAhead), by one walker per array and as many walkers
// as free slots allow (a busy machine reads no further ahead: the reader
// then transcodes what it needs itself); from a store read by ranges, the
// next chunks are fetched (fetchAhead). The reader is followed whatever
// the depth: the chunk it reads next is Upcoming.
func (r *readAhead) after(av *arrayView, coords []int) {
	av.seq.mu.Lock()
	sequential := av.seq.follows(av, coords)
	if !slices.Equal(av.seq.last, coords) {
		av.seq.last = slices.Clone(coords)
	}
	av.seq.mu.Unlock()
	if !sequential {
		return
	}
	if av.target == nil { // pass-through from a store read by ranges
		if r.fetchOn && r.walking.CompareAndSwap(false, true) {
			r.work.Go(func() {
				defer r.walking.Store(false)
				r.fetchAhead(av, coords)
			})
		}
		return
	}
	if r.depth == 0 || !av.seq.transcoding.CompareAndSwap(false, true) {
		return // none ahead, or this array's walker is under way and sees the reader move
	}
	select {
	case r.slots <- struct{}{}:
	default:
		av.seq.transcoding.Store(false)
		return
	}
	r.work.Go(func() {
		defer func() { <-r.slots }()
		defer av.seq.transcoding.Store(false)
		r.transcodeAhead(av)
	})
}

// transcodeAhead keeps the depth chunks after a sequential reader's last
// one transcoded: it transcodes the first of them not yet cached, as many
// at once as there are CPUs, looks again where the reader is, and stops
// when all are done (or one fails, which the reader will see and log).
// Working without pause while the reader waits for its own round trips is
// what keeps it ahead: a transcode started only when the reader reaches
// the chunk before would be waited for whole at the next lookup.
func (r *readAhead) transcodeAhead(av *arrayView) {
	ctx := r.ctx
	type job struct {
		coords []int
		loc    location
	}
	parallel := runtime.GOMAXPROCS(0)
	for {
		av.seq.mu.Lock()
		next := slices.Clone(av.seq.last)
		av.seq.mu.Unlock()
		var jobs []job
		for range r.depth {
			if next = av.nextChunk(next); next == nil || len(jobs) == parallel {
				break
			}
			l, ok, err := av.locate(ctx, next, false)
			if err != nil {
				return
			}
			if ok && !av.fs.cache.Contains(av.transcodeKey(next, l.gen)) {
				jobs = append(jobs, job{slices.Clone(next), l})
			}
		}
		if len(jobs) == 0 {
			return
		}
		var failed atomic.Bool
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Go(func() {
				if _, err := av.transcoded(ctx, j.coords, j.loc); err != nil {
					failed.Store(true)
					return
				}
				r.ahead.Add(1)
			})
		}
		wg.Wait()
		if failed.Load() {
			return
		}
	}
}

const (
	// remoteAhead is how far in key order fetchAhead looks: at a few
	// hundred microseconds per cached chunk, a reader takes longer to get
	// there than a round trip to a remote store.
	remoteAhead = 256
	// remoteFetchesAhead bounds the requests fetchAhead has under way. A
	// legacy reader walks chunk keys in C order, across several shards
	// per row of chunks, so the next shards' indexes and runs are needed
	// at once: one request at a time would make it wait for a round trip
	// per shard.
	remoteFetchesAhead = 8
)

// fetchAhead prepares, for a reader of a store read by ranges, the chunks
// that follow coords in key order: it loads (or, past the revalidation
// interval, checks) the index of each shard they lie in and fetches each
// run of them not cached yet, each in the background, as far as
// remoteFetchesAhead allows. A walk starts where the last one left chunks
// undone (a shard whose index was under way, no request free), so each
// chunk is looked at about once.
func (r *readAhead) fetchAhead(av *arrayView, coords []int) {
	ctx := r.ctx
	start := nd.Linear(coords, av.grid) + 1
	end := min(start+remoteAhead, nd.Size(av.grid))
	av.seq.mu.Lock()
	from := start
	if av.seq.fetched > start && av.seq.fetched < end {
		from = av.seq.fetched
	}
	av.seq.mu.Unlock()
	started := map[string]bool{} // shards checked and runs fetched by this walk
	undone := -1
	next := make([]int, len(av.grid))
	i := from
	for ; i < end; i++ {
		nd.Unravel(i, av.grid, next)
		done, more := r.fetchChunk(ctx, av, next, started)
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
	av.seq.mu.Lock()
	av.seq.fetched = undone
	av.seq.mu.Unlock()
}

// fetchChunk starts what the chunk at coords needs: its shard's index, or
// the run of its stored bytes. done reports that nothing is left to start
// for it; more that requests were free for the next chunk.
func (r *readAhead) fetchChunk(ctx context.Context, av *arrayView, coords []int, started map[string]bool) (done, more bool) {
	objCoords, _ := av.a.InnerChunk(coords)
	if av.unlisted(objCoords) {
		return true, true
	}
	key := av.a.ChunkKey(objCoords)
	if _, ok := av.cachedObject(key); !ok {
		if started[key] {
			return false, true
		}
		started[key] = true
		return false, r.fetch(func() { av.object(ctx, key, false) })
	}
	loc, ok, err := av.locate(ctx, coords, false)
	if err != nil || !ok || loc.data != nil || av.fs.cache.Contains(chunkRangeKey(loc)) {
		return true, true
	}
	if _, held := av.fs.fetching.Load(chunkRangeKey(loc)); held {
		return true, true
	}
	select {
	case r.fetches <- struct{}{}:
	default:
		return false, false
	}
	r.fetchSpan(av, loc)
	return true, true
}

// fetch runs load in the background when fewer than remoteFetchesAhead
// fetches are under way, and reports whether it did.
func (r *readAhead) fetch(load func()) bool {
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

// fetchSpan fetches in the background the span from loc, as far as
// coalesceMax reaches, holding a token of r.fetches the caller took.
func (r *readAhead) fetchSpan(av *arrayView, loc location) {
	var sp *span
	if av.source.CheckEncodedSize(loc.n) == nil { // the reader says what is wrong
		sp = av.claim(loc, allChunks)
	}
	if sp == nil {
		<-r.fetches
		return
	}
	r.work.Go(func() {
		defer func() { <-r.fetches }()
		if _, err := av.fetchSpan(r.ctx, loc, sp); err == nil {
			r.ahead.Add(uint64(len(sp.chunks)))
		}
	})
}

// fetchShard fetches, ahead of its readers, the chunks of a dense shard
// (see touched) neither cached nor being fetched: spans of up to
// coalesceMax, as many at once as remoteFetchesAhead allows, by one walk
// per shard at a time.
func (r *readAhead) fetchShard(av *arrayView, loc location) {
	if !r.fetchOn {
		return
	}
	if _, busy := r.shards.LoadOrStore(loc.key, struct{}{}); busy {
		return
	}
	r.work.Go(func() {
		defer r.shards.Delete(loc.key)
		s := av.shardState(loc)
		if s == nil {
			return
		}
		// From the chunk read on, round to those before it, as far as a
		// quarter of the cache holds: what is fetched must stay cached
		// until read.
		stored := s.sorted()
		p, _ := s.position(loc.off)
		budget := av.fs.opts.CacheBytes / 4
		for _, c := range slices.Concat(stored[p:], stored[:p]) {
			if budget -= c.n; budget < 0 {
				return
			}
			l := location{key: loc.key, gen: loc.gen, off: c.off, n: c.n, size: loc.size}
			k := chunkRangeKey(l)
			if _, held := av.fs.fetching.Load(k); held || av.fs.cache.Contains(k) {
				continue
			}
			select {
			case r.fetches <- struct{}{}:
			case <-r.ctx.Done():
				return
			}
			r.fetchSpan(av, l)
		}
	})
}

// nextChunk returns the coordinates after coords in C order of the view's
// grid, the order of chunk keys; nil after the last chunk.
func (av *arrayView) nextChunk(coords []int) []int {
	next := slices.Clone(coords)
	if !nd.Next(next, av.grid) {
		return nil
	}
	return next
}

// overlap reports whether a and b share memory.
func overlap(a, b []byte) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(cap(b)) && b0 < a0+uintptr(cap(a))
}
