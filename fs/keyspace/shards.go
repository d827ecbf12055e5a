package keyspace

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// errStale: a shard changed between reading its index and opening it.
var errStale = errors.New("shard changed")

// objectState is what the cache knows about a stored object: a shard (with
// its decoded index) or an unsharded chunk file, or its absence.
type objectState struct {
	key     string
	exists  bool
	info    store.Info
	index   *sharding.Index // shards only
	err     error           // why a shard's index is unusable
	checked atomic.Int64    // unix nanoseconds of the last stat
	gen     uint64          // the key's generation when loading began
	// byOffset are the index's stored chunks in offset order (sorted).
	byOffset []storedRange
	sortOnce sync.Once
	// touched marks the chunks of byOffset that readers read (touch).
	mu      sync.Mutex
	touched []bool
}

// size estimates the memory an objectState holds, for the cache's bound.
func (s *objectState) size() int64 {
	n := int64(128 + len(s.key) + len(s.info.Generation))
	if s.index != nil {
		n += int64(33 * s.index.Len()) // and byOffset, touched
	}
	return n
}

// object returns the cached state of a stored object, checking the store
// for changes when fresh is set or the state is older than the
// revalidation interval. A state loaded by this call is not checked again.
func (av *arrayView) object(ctx context.Context, key string, fresh bool) (*objectState, error) {
	f := av.fs
	cacheKey := objectKey(key)
	loaded := false
	// Loads and checks are shared by the readers asking at once; each
	// stops waiting when its request is interrupted, and the request to
	// the store stops when all have (see package flight). A load cut
	// short is not cached.
	load := func(ctx context.Context) (any, int64, error) {
		loaded = true
		s := av.loadObject(ctx, key, nil)
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		return s, s.size(), nil
	}
	v, err := f.cache.GetOrLoad(f.loadContext(ctx), cacheKey, load)
	for err == nil && v.(*objectState).gen != f.generation(key) {
		// Loaded before this process rewrote the object: load again.
		f.cache.Remove(cacheKey)
		v, err = f.cache.GetOrLoad(f.loadContext(ctx), cacheKey, load)
	}
	if err != nil {
		return nil, err
	}
	s := v.(*objectState)
	if loaded || !fresh && s.current(f) {
		return s, nil
	}
	if fresh { // the check must begin after the caller's open
		return av.recheck(ctx, key, s)
	}
	// Readers of a shard and the read-ahead wait for one check, which
	// runs in the background: a reader waits for it up to staleWait, and
	// is then served the cached state while the check goes on.
	c := av.startCheck(key, s)
	timer := time.NewTimer(staleWait)
	defer timer.Stop()
	select {
	case <-c.done:
		return c.state, nil
	case <-timer.C:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// recheck checks the stored object whose cached state is s, and caches
// (and announces) what changed.
func (av *arrayView) recheck(ctx context.Context, key string, s *objectState) (*objectState, error) {
	next := av.loadObject(ctx, key, s)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if next != s {
		av.fs.cache.Add(objectKey(key), next, next.size())
		if s.exists {
			av.objectChanged(key)
		}
	}
	return next, nil
}

// startCheck starts a check of the stored object whose cached state is s
// in the background, unless one is under way, and returns it.
func (av *arrayView) startCheck(key string, s *objectState) *check {
	f := av.fs
	c := &check{done: make(chan struct{}), state: s}
	if running, ok := f.checking.LoadOrStore(key, c); ok {
		return running.(*check)
	}
	f.checks.Go(func() {
		defer f.checking.Delete(key)
		defer close(c.done)
		if next, err := av.recheck(f.bg, key, s); err == nil {
			c.state = next
		}
	})
	return c
}

// check is a check of a stored object under way in the background; state
// is its answer once done is closed.
type check struct {
	done  chan struct{}
	state *objectState
}

// loadContext is the context a reader waits for a shared load with. A
// load from a local store (a file read, a transcode) is brief: the reader
// runs it in its own goroutine, without a handoff to another (see
// flight.Group.Do), and is not interrupted during it. One from a remote
// store can stall, and the reader must be able to leave it.
func (f *FS) loadContext(ctx context.Context) context.Context {
	if f.files != nil {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// staleWait bounds how long a reader waits for a check of a cached state
// past the revalidation interval: a store that stalls must not stall the
// reads of what is cached. A check that answers in time (any local store,
// a remote one within a round trip) serves the reader its answer.
const staleWait = 100 * time.Millisecond

// objectChanged tells the notifier about every chunk file of a stored
// object (a shard, or an unsharded chunk) that a check found changed,
// once its new state is cached: what the kernel keeps of those files was
// read from the old one. The kernel then asks again before serving any
// of them, so no reader sees one file of a shard new and a later one old.
func (av *arrayView) objectChanged(key string) {
	objCoords, ok := av.a.ParseChunkKey(strings.TrimPrefix(key, av.a.Path+"/"))
	if !ok {
		return
	}
	n := 1
	if av.shard != nil {
		n = av.shard.NumChunks()
	}
	grid := av.a.InnerGrid()
	for i := range n {
		if c := av.a.InnerCoords(objCoords, i); nd.Inside(c, grid) {
			av.fs.chunkChanged(av.a, c, true)
		}
	}
}

// current reports whether a cached state is younger than the revalidation
// interval.
func (s *objectState) current(f *FS) bool {
	return time.Now().UnixNano()-s.checked.Load() < int64(f.opts.Revalidate)
}

// cachedObject returns the cached state of a stored object when it is
// current, without loading or checking anything.
func (av *arrayView) cachedObject(key string) (*objectState, bool) {
	v, ok := av.fs.cache.Peek(objectKey(key))
	if !ok {
		return nil, false
	}
	s := v.(*objectState)
	return s, s.gen == av.fs.generation(key) && s.current(av.fs)
}

// loadObject reads what the cache keeps of a stored object: its Info, and
// for a shard its index, with one request. With prev, the state cached
// until now, the request is conditional: a shard whose generation did not
// change sends no index (If-None-Match), and prev is returned, checked.
func (av *arrayView) loadObject(ctx context.Context, key string, prev *objectState) *objectState {
	now := time.Now().UnixNano()
	s := &objectState{key: key, gen: av.fs.generation(key)}
	s.checked.Store(now)
	unchanged := func() *objectState {
		prev.checked.Store(now)
		return prev
	}
	if av.shard == nil {
		info, err := av.fs.store.Stat(ctx, key)
		s.exists, s.info, s.err = err == nil, info, ignoreNotFound(err)
		if prev != nil && prev.err == nil && s.err == nil && prev.exists == s.exists && prev.info.Generation == info.Generation {
			return unchanged()
		}
		return s
	}
	if prev == nil {
		// An index kept on disk by an earlier mount, revalidated below.
		prev = av.cachedIndex(key)
	}
	var ix *sharding.Index
	var info store.Info
	var err error
	if av.fs.cluster != nil && av.fs.files == nil && av.fs.generation(key) == 0 {
		// One load per revalidation interval for the whole cluster; a
		// shard this process rewrote is read from the store itself.
		ix, info, err = av.clusterShardIndex(ctx, key)
		if err == nil && prev != nil && prev.exists && prev.err == nil && info.Generation == prev.info.Generation {
			return unchanged()
		}
	} else {
		var cond store.Cond
		if prev != nil && prev.exists {
			cond.IfNoneMatch = prev.info.Generation
		}
		ix, info, err = av.a.ReadShardIndex(ctx, key, cond)
	}
	switch {
	case errors.Is(err, store.ErrNotModified):
		return unchanged()
	case errors.Is(err, store.ErrNotFound) && prev != nil && !prev.exists && prev.err == nil:
		return unchanged()
	case ctx.Err() != nil: // interrupted: nothing to log, and not kept
		s.err = ctx.Err()
		return s
	case err != nil && !errors.Is(err, sharding.ErrInvalidIndex):
		if s.err = ignoreNotFound(err); s.err != nil {
			av.fs.logOnce(ctx, key, "shard index unreadable: its inner chunks give EIO until it reads", "error", s.err)
		}
		return s
	}
	av.fs.counts.indexLoads.Add(1)
	s.exists, s.info, s.index, s.err = true, info, ix, err
	if s.err != nil {
		av.fs.logOnce(ctx, key, "unreadable shard index: its inner chunks give EIO", "error", s.err)
	}
	av.keepIndex(s)
	return s
}

// generation counts this process's rewrites of a stored object: a state
// loaded at an earlier count is stale. Only rewritten objects have a
// counter, so reading a store of millions of shards keeps none.
func (f *FS) generation(key string) uint64 {
	if g, ok := f.gens.Load(key); ok {
		return g.(*atomic.Uint64).Load()
	}
	return 0
}

// ShardPublished drops what is cached about a shard this process just
// rewrote, before its pending updates leave memory (Writer.OnPublished).
func (f *FS) ShardPublished(key string) {
	g, _ := f.gens.LoadOrStore(key, new(atomic.Uint64))
	g.(*atomic.Uint64).Add(1)
	f.cache.Remove(objectKey(key))
	f.lists.forget(key)
}

func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// location is where the stored bytes of one chunk of a view's grid are:
// a byte range of a stored object, or, for an update not yet published
// into its shard, memory (data).
type location struct {
	key    string
	gen    store.Generation
	size   int64 // of the stored object
	mtime  time.Time
	off, n int64
	data   []byte
}

// locate finds the stored bytes of the chunk at view coordinates; ok is
// false when the chunk is empty (an empty index entry or a missing shard).
func (av *arrayView) locate(ctx context.Context, coords []int, fresh bool) (loc location, ok bool, err error) {
	if !nd.Inside(coords, av.grid) {
		return loc, false, nil
	}
	if w := av.fs.pending; w != nil {
		if p, pending := w.Lookup(av.a, coords); pending {
			if p.Deleted {
				return loc, false, nil
			}
			loc = location{gen: store.Generation("pending:" + strconv.FormatUint(p.Seq, 10)), mtime: p.Time, n: int64(len(p.Data)), data: p.Data}
			return loc, true, av.checkTrailer(ctx, loc)
		}
	}
	objCoords, local := av.a.InnerChunk(coords)
	key := av.a.ChunkKey(objCoords)
	s, err := av.object(ctx, key, fresh)
	if err != nil {
		return loc, false, err
	}
	if s.err != nil {
		return loc, false, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, s.err)
	}
	if !s.exists {
		return loc, false, nil
	}
	loc = location{key: key, gen: s.info.Generation, size: s.info.Size, mtime: s.info.ModTime, n: s.info.Size}
	if s.index != nil {
		if loc.off, loc.n, ok = s.index.Chunk(local); !ok {
			return loc, false, nil
		}
	}
	return loc, true, av.checkTrailer(ctx, loc)
}

// locateUnchecked locates a chunk from its shard's cached index, however
// old, when its bytes will be fetched by a ranged read tied to the shard's
// generation, straight from the store: that read checks the shard (it
// fails with errStale if the shard changed, and confirms the index
// otherwise), so a separate check would only cost a round trip more. ok is
// false when the chunk must be located with locate: its bytes are cached
// or come from elsewhere (a disk cache, the cluster, a transcode), or
// nothing of its shard is cached.
func (av *arrayView) locateUnchecked(ctx context.Context, coords []int) (loc location, ok bool, err error) {
	f := av.fs
	if f.files != nil || f.cluster != nil || f.opts.DiskCache != nil || av.target != nil || av.shard == nil || !nd.Inside(coords, av.grid) {
		return loc, false, nil
	}
	if w := f.pending; w != nil {
		if _, pending := w.Lookup(av.a, coords); pending {
			return loc, false, nil
		}
	}
	objCoords, local := av.a.InnerChunk(coords)
	key := av.a.ChunkKey(objCoords)
	v, cached := f.cache.Peek(objectKey(key))
	if !cached {
		return loc, false, nil
	}
	s := v.(*objectState)
	if s.gen != f.generation(key) || s.err != nil || !s.exists || s.index == nil {
		return loc, false, nil
	}
	loc = location{key: key, gen: s.info.Generation, size: s.info.Size, mtime: s.info.ModTime}
	if loc.off, loc.n, ok = s.index.Chunk(local); !ok || f.cache.Contains(chunkRangeKey(loc)) {
		return loc, false, nil
	}
	if !s.current(f) {
		// Not waited for: what the chunk's read fetches is checked. This
		// check is for those who only look (stat, ls), and the other
		// chunks of the shard.
		av.startCheck(key, s)
	}
	return loc, true, av.checkTrailer(ctx, loc)
}

// checkTrailer refuses chunks too short for the checksum the view drops.
func (av *arrayView) checkTrailer(ctx context.Context, loc location) error {
	if loc.n < int64(av.drop) {
		err := fmt.Errorf("%w: %s: a chunk of %d bytes cannot end with a %d-byte checksum", ErrCorrupt, loc.key, loc.n, av.drop)
		av.fs.logOnce(ctx, loc.key, "inner chunk shorter than its checksum: its files give EIO", "error", err)
		return err
	}
	return nil
}

// stored yields the view coordinates of every stored chunk whose leading
// coordinates equal prefix, shard by shard; pending updates count as stored
// (puts) or not (deletions).
func (av *arrayView) stored(ctx context.Context, prefix []int) iter.Seq2[[]int, error] {
	return func(yield func([]int, error) bool) {
		per := make([]int, len(av.grid))
		for d := range per {
			per[d] = 1
		}
		if av.shard != nil {
			per = av.shard.Grid()
		}
		var pending map[string]writeback.PendingShard
		if w := av.fs.pending; w != nil && av.shard != nil {
			pending = w.PendingShards(av.a)
		}
		// emit yields the inner chunks of one object: those stored (unless
		// deleted) and then those only pending.
		emit := func(objCoords []int, p writeback.PendingShard, stored func(i int) bool) bool {
			n := 1
			if av.shard != nil {
				n = av.shard.NumChunks()
			}
			for _, onlyPending := range []bool{false, true} {
				for i := 0; i < n; i++ {
					u := p.Updates[i]
					if onlyPending && (u != writeback.Written || stored(i)) || !onlyPending && (!stored(i) || u == writeback.Deleted) {
						continue
					}
					c := av.a.InnerCoords(objCoords, i)
					if nd.Inside(c, av.grid) && hasPrefix(c, prefix) && !yield(c, nil) {
						return false
					}
				}
			}
			return true
		}
		for objCoords, err := range av.candidates(ctx) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !matchesPrefix(objCoords, per, prefix) {
				continue
			}
			key := av.a.ChunkKey(objCoords)
			p, hasPending := pending[key]
			delete(pending, key)
			s, err := av.object(ctx, key, false)
			if err != nil {
				if !yield(nil, err) {
					return
				}
				continue
			}
			if s.err != nil {
				continue // logged when loaded; its chunks give EIO on lookup
			}
			if !s.exists {
				if hasPending {
					pending[key] = p // listed with the shards only pending
				}
				continue
			}
			isStored := func(int) bool { return true }
			if s.index != nil {
				isStored = func(i int) bool { _, _, ok := s.index.Chunk(i); return ok }
			}
			if !emit(objCoords, p, isStored) {
				return
			}
		}
		for _, key := range slices.Sorted(maps.Keys(pending)) {
			p := pending[key]
			if matchesPrefix(p.Coords, per, prefix) && !emit(p.Coords, p, func(int) bool { return false }) {
				return
			}
		}
	}
}

// matchesPrefix reports whether the object at objCoords (holding per
// chunks along each axis) can hold chunks whose leading coordinates are prefix.
func matchesPrefix(objCoords, per, prefix []int) bool {
	for d, p := range prefix {
		if p/per[d] != objCoords[d] {
			return false
		}
	}
	return true
}

func hasPrefix(c, prefix []int) bool {
	for d, p := range prefix {
		if c[d] != p {
			return false
		}
	}
	return true
}
