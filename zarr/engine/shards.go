package engine

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

// objectState is what the cache knows about a stored object: a shard (with
// its decoded index) or an unsharded chunk file, or its absence.
type objectState struct {
	key      string
	exists   bool
	info     store.Info
	index    *sharding.Index // shards only
	err      error           // why a shard's index is unusable
	checked  atomic.Int64    // unix nanoseconds of the last stat
	rewrites uint64          // the key's rewrite count when loading began
	// byOffset are the index's stored chunks in offset order (sorted).
	byOffset []storedRange
	sortOnce sync.Once
	// touched marks the chunks of byOffset that readers read (touch).
	mu      sync.Mutex
	touched []bool
}

// size estimates the memory an objectState holds, for the cache's bound.
func (s *objectState) size() int64 {
	n := int64(len(s.key) + len(s.info.Generation))
	if s.index != nil {
		return n + stateSize(s.index.Len())
	}
	return n + stateSize(0)
}

// stateSize estimates the memory of an objectState of a shard of chunks
// inner chunks, besides its key and generation.
func stateSize(chunks int) int64 {
	return int64(128 + 33*chunks) // the index, byOffset and touched
}

// object returns the cached state of a stored object, checking the store
// for changes when fresh is set or the state is older than the
// revalidation interval (or, from a store read by ranges outside a
// cluster, in the background shortly before). A state loaded by this
// call is not checked again.
func (a *Array) object(ctx context.Context, key string, fresh bool) (*objectState, error) {
	e := a.e
	cacheKey := a.objectKey(key)
	loaded := false
	// Loads and checks are shared by the readers asking at once; each
	// stops waiting when its request is interrupted, and the request to
	// the store stops when all have (see package flight). A load cut
	// short is not cached.
	load := func(ctx context.Context) (any, int64, error) {
		loaded = true
		s := a.loadObject(ctx, key, nil)
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		return s, s.size(), nil
	}
	v, err := e.objects.GetOrLoad(e.LoadContext(ctx), cacheKey, load)
	for err == nil && v.(*objectState).rewrites != e.rewrites(key) {
		// Loaded before this process rewrote the object: load again.
		e.objects.Remove(cacheKey)
		v, err = e.objects.GetOrLoad(e.LoadContext(ctx), cacheKey, load)
	}
	if err != nil {
		return nil, err
	}
	s := v.(*objectState)
	if loaded {
		a.loadFollowing(ctx, key)
	}
	if loaded {
		return s, nil
	}
	if !fresh && s.current(e) {
		if e.files == nil && e.cluster == nil && s.dueSoon(e) {
			// Checked in the background before it comes due, so that an
			// active reader of a store read by ranges never waits for a
			// check (a round trip) to read what is cached. Not in a
			// cluster, whose indexes are shared per interval: a check
			// before the interval ends would get the same one.
			a.startCheck(key, s)
		}
		return s, nil
	}
	if fresh { // the check must begin after the caller's open
		return a.recheck(ctx, key, s)
	}
	// Readers of a shard and the read-ahead wait for one check, which
	// runs in the background: a reader waits for it up to staleWait, and
	// is then served the cached state while the check goes on.
	c := a.startCheck(key, s)
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
func (a *Array) recheck(ctx context.Context, key string, s *objectState) (*objectState, error) {
	next := a.loadObject(ctx, key, s)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if next != s {
		a.e.objects.Add(a.objectKey(key), next, next.size())
		if s.exists {
			a.objectChanged(key)
		}
	}
	return next, nil
}

// startCheck starts a check of the stored object whose cached state is s
// in the background, unless one is under way, and returns it. The cached
// shards of an array are checked by one listing (checkListed).
func (a *Array) startCheck(key string, s *objectState) *check {
	return a.startCheckBy(key, s, true)
}

// startCheckAlone is startCheck with a request for the object alone.
func (a *Array) startCheckAlone(key string, s *objectState) *check {
	return a.startCheckBy(key, s, false)
}

func (a *Array) startCheckBy(key string, s *objectState, listing bool) *check {
	e := a.e
	c := &check{done: make(chan struct{}), state: s}
	if running, ok := e.checking.LoadOrStore(key, c); ok {
		return running.(*check)
	}
	e.checks.Go(func() {
		defer e.checking.Delete(key)
		defer close(c.done)
		if listing && a.checkListed(e.bg, key, s) {
			return
		}
		if next, err := a.recheck(e.bg, key, s); err == nil {
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

// staleWait bounds how long a reader waits for a check of a cached state
// past the revalidation interval: a store that stalls must not stall the
// reads of what is cached. A check that answers in time (any local store,
// a remote one within a round trip) serves the reader its answer.
const staleWait = 100 * time.Millisecond

// objectChanged tells Options.Changed about every inner chunk of a stored
// object (a shard, or an unsharded chunk) that a check found changed,
// once its new state is cached: what the views' readers keep of those
// chunks was read from the old one (they then ask again, so none sees
// one chunk of a shard new and a later one old).
func (a *Array) objectChanged(key string) {
	objCoords, ok := a.z.ParseChunkKey(strings.TrimPrefix(key, a.z.Path+"/"))
	if !ok {
		return
	}
	n := 1
	if a.shard != nil {
		n = a.shard.NumChunks()
	}
	grid := a.z.InnerGrid()
	for i := range n {
		if c := a.z.InnerCoords(objCoords, i); nd.Inside(c, grid) {
			a.e.opts.Changed(a.z, c)
		}
	}
}

// current reports whether a cached state is younger than the revalidation
// interval.
func (s *objectState) current(e *Engine) bool {
	return time.Now().UnixNano()-s.checked.Load() < int64(e.opts.Revalidate)
}

// dueSoon reports whether a cached state is older than 7/8 of the
// revalidation interval: a check begun then (a round trip) ends before
// the state comes due, and an array read without a pause is checked
// about once per interval, not twice.
func (s *objectState) dueSoon(e *Engine) bool {
	return time.Now().UnixNano()-s.checked.Load() >= int64(e.opts.Revalidate/8*7)
}

// cachedObject returns the cached state of a stored object when it is
// current, without loading or checking anything.
func (a *Array) cachedObject(key string) (*objectState, bool) {
	v, ok := a.e.objects.Peek(a.objectKey(key))
	if !ok {
		return nil, false
	}
	s := v.(*objectState)
	return s, s.rewrites == a.e.rewrites(key) && s.current(a.e)
}

// loadObject reads what the cache keeps of a stored object: its Info, and
// for a shard its index, with one request. With prev, the state cached
// until now, the request is conditional: a shard whose generation did not
// change sends no index (If-None-Match), and prev is returned, checked.
func (a *Array) loadObject(ctx context.Context, key string, prev *objectState) *objectState {
	now := time.Now().UnixNano()
	s := &objectState{key: key, rewrites: a.e.rewrites(key)}
	s.checked.Store(now)
	unchanged := func() *objectState {
		prev.checked.Store(now)
		return prev
	}
	if a.shard == nil {
		info, err := a.e.store.Stat(ctx, key)
		s.exists, s.info, s.err = err == nil, info, ignoreNotFound(err)
		if prev != nil && prev.err == nil && s.err == nil && prev.exists == s.exists && prev.info.Generation == info.Generation {
			return unchanged()
		}
		return s
	}
	if prev == nil {
		// An index kept on disk by an earlier mount, revalidated below.
		prev = a.cachedIndex(key)
	}
	var ix *sharding.Index
	var info store.Info
	var err error
	fromPeers := a.indexFromPeers() && a.e.files == nil && a.e.rewrites(key) == 0
	if fromPeers {
		// One load per revalidation interval for the whole cluster; a
		// shard this process rewrote is read from the store itself.
		ix, info, err = a.clusterShardIndex(ctx, key)
		if err == nil && prev != nil && prev.exists && prev.err == nil && info.Generation == prev.info.Generation {
			return unchanged()
		}
		// A peer saying a shard is missing proves nothing: one that
		// verifies only what a crc32c protects asks the store.
		fromPeers = !errors.Is(err, store.ErrNotFound) || a.e.peerVerify == PeersForAll
	}
	if !fromPeers {
		var cond store.Cond
		if prev != nil && prev.exists {
			cond.IfNoneMatch = prev.info.Generation
		}
		ix, info, err = a.z.ReadShardIndex(ctx, key, cond)
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
			a.e.LogOnce(ctx, key, "shard index unreadable: its inner chunks give EIO until it reads", "error", s.err)
		}
		return s
	}
	a.e.counts.indexLoads.Add(1)
	s.exists, s.info, s.index, s.err = true, info, ix, err
	if s.err != nil {
		a.e.LogOnce(ctx, key, "unreadable shard index: its inner chunks give EIO", "error", s.err)
	}
	a.keepIndex(s)
	return s
}

// rewrites counts this process's rewrites of a stored object: a state
// loaded at an earlier count is stale, whatever the store's generation
// says (a store may answer for a while with the object it replaced).
// Only rewritten objects have a counter, so reading a store of millions
// of shards keeps none.
func (e *Engine) rewrites(key string) uint64 {
	if g, ok := e.rewriteCounts.Load(key); ok {
		return g.(*atomic.Uint64).Load()
	}
	return 0
}

// Rewritten drops what is cached about a stored object this process just
// rewrote (under each index layout of the engine's arrays), before its
// pending updates leave memory (Writer.OnPublished).
func (e *Engine) Rewritten(key string) {
	g, _ := e.rewriteCounts.LoadOrStore(key, new(atomic.Uint64))
	g.(*atomic.Uint64).Add(1)
	e.layouts.Range(func(_, layout any) bool {
		e.objects.Remove(e.objectKey(key, layout.([]string)))
		return true
	})
	e.lists.forget(key)
}

func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// Location is where the stored bytes of one chunk of an array's (inner)
// grid are: a byte range of a stored object at a generation, or, for an
// update not yet published into its shard, memory (Data).
type Location struct {
	Key     string
	Gen     store.Generation
	Size    int64 // of the stored object
	ModTime time.Time
	Off, N  int64
	Data    []byte
}

// Locate finds the stored bytes of the chunk at (inner grid) coordinates; ok is
// false when the chunk is empty (an empty index entry or a missing shard).
func (a *Array) Locate(ctx context.Context, coords []int, fresh bool) (loc Location, ok bool, err error) {
	if !nd.Inside(coords, a.grid) {
		return loc, false, nil
	}
	if w := a.e.opts.Pending; w != nil {
		if p, pending := w.Lookup(a.z, coords); pending {
			if p.Deleted {
				return loc, false, nil
			}
			loc = Location{Gen: store.Generation("pending:" + strconv.FormatUint(p.Seq, 10)), ModTime: p.Time, N: int64(len(p.Data)), Data: p.Data}
			return loc, true, nil
		}
	}
	objCoords, local := a.z.InnerChunk(coords)
	key := a.z.ChunkKey(objCoords)
	s, err := a.object(ctx, key, fresh)
	if err != nil {
		return loc, false, err
	}
	if s.err != nil {
		return loc, false, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, s.err)
	}
	if !s.exists {
		return loc, false, nil
	}
	loc = Location{Key: key, Gen: s.info.Generation, Size: s.info.Size, ModTime: s.info.ModTime, N: s.info.Size}
	if s.index != nil {
		if loc.Off, loc.N, ok = s.index.Chunk(local); !ok {
			return loc, false, nil
		}
	}
	return loc, true, nil
}

// LocateUnchecked locates a chunk from its shard's cached index, however
// old, when its bytes will be fetched by a ranged read tied to the shard's
// generation, straight from the store: that read checks the shard (it
// fails with ErrStale if the shard changed, and confirms the index
// otherwise), so a separate check would only cost a round trip more. ok is
// false when the chunk must be located with Locate: its bytes are cached
// or come from elsewhere (a disk cache, the cluster, a transcode), or
// nothing of its shard is cached.
func (a *Array) LocateUnchecked(ctx context.Context, coords []int) (loc Location, ok bool, err error) {
	e := a.e
	if e.files != nil || e.cluster != nil || e.opts.DiskCache != nil || a.shard == nil || !nd.Inside(coords, a.grid) {
		return loc, false, nil
	}
	if w := e.opts.Pending; w != nil {
		if _, pending := w.Lookup(a.z, coords); pending {
			return loc, false, nil
		}
	}
	objCoords, local := a.z.InnerChunk(coords)
	key := a.z.ChunkKey(objCoords)
	v, cached := e.objects.Peek(a.objectKey(key))
	if !cached {
		return loc, false, nil
	}
	s := v.(*objectState)
	if s.rewrites != e.rewrites(key) || s.err != nil || !s.exists || s.index == nil {
		return loc, false, nil
	}
	loc = Location{Key: key, Gen: s.info.Generation, Size: s.info.Size, ModTime: s.info.ModTime}
	if loc.Off, loc.N, ok = s.index.Chunk(local); !ok || e.cache.Contains(e.chunkRangeKey(loc)) {
		return loc, false, nil
	}
	if !s.current(e) {
		// Not waited for: what the chunk's read fetches is checked. This
		// check is for those who only look (stat, ls), and the other
		// chunks of the shard.
		a.startCheck(key, s)
	}
	return loc, true, nil
}

// Stored yields the (inner grid) coordinates of every stored chunk whose leading
// coordinates equal prefix, shard by shard; pending updates count as stored
// (puts) or not (deletions).
func (a *Array) Stored(ctx context.Context, prefix []int) iter.Seq2[[]int, error] {
	return func(yield func([]int, error) bool) {
		per := make([]int, len(a.grid))
		for d := range per {
			per[d] = 1
		}
		if a.shard != nil {
			per = a.shard.Grid()
		}
		var pending map[string]writeback.PendingShard
		if w := a.e.opts.Pending; w != nil && a.shard != nil {
			pending = w.PendingShards(a.z)
		}
		// emit yields the inner chunks of one object: those stored (unless
		// deleted) and then those only pending.
		emit := func(objCoords []int, p writeback.PendingShard, stored func(i int) bool) bool {
			n := 1
			if a.shard != nil {
				n = a.shard.NumChunks()
			}
			for _, onlyPending := range []bool{false, true} {
				for i := 0; i < n; i++ {
					u := p.Updates[i]
					if onlyPending && (u != writeback.Written || stored(i)) || !onlyPending && (!stored(i) || u == writeback.Deleted) {
						continue
					}
					c := a.z.InnerCoords(objCoords, i)
					if nd.Inside(c, a.grid) && hasPrefix(c, prefix) && !yield(c, nil) {
						return false
					}
				}
			}
			return true
		}
		for objCoords, err := range a.candidates(ctx) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !matchesPrefix(objCoords, per, prefix) {
				continue
			}
			key := a.z.ChunkKey(objCoords)
			p, hasPending := pending[key]
			delete(pending, key)
			s, err := a.object(ctx, key, false)
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
