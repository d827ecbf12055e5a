package engine

import (
	"context"
	"time"

	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// An array read for longer than the revalidation interval has all its
// cached shard indexes come due: checked one by one, each costs a round
// trip (a conditional suffix GET) per interval. On a store whose listings
// give each value the generation its reads condition on (object stores'
// ETags), one listing of the array checks them all: the shards it finds
// unchanged are checked as of its start, and only those it finds changed
// are checked alone. The first shard to come due lists for all those
// cached, so their checks fall due together from then on, and a read
// makes one index request per shard however long it lasts. A store that
// cannot list so, an array too large for one listing page, or an array
// with a single shard cached are checked one by one.

// maxListedShards bounds the shard grid of arrays checked by a listing:
// their keys and metadata documents fit one page of an object store's
// listing (1000 keys), so the listing costs one request. listSlack is the
// room left for the metadata documents; a listing holding more keys than
// the grid and the slack is abandoned (shards are then checked alone).
const (
	listSlack       = 16
	maxListedShards = 1000 - listSlack - 1 // abandoned at the 1000th key
)

// checkListed checks the cached state s of the shard key, due for a
// check, with one listing of its array shared by every shard cached.
// It reports whether the listing found the shard unchanged (s is then
// checked); false asks for a check of the shard alone. Other shards the
// listing finds changed are checked alone at once, in the background.
func (a *Array) checkListed(ctx context.Context, key string, s *objectState) bool {
	e := a.e
	lister, ok := e.store.(store.InfoLister)
	if !ok || e.files != nil || e.cluster != nil || a.shard == nil {
		return false
	}
	shards, ok := nd.SizeFits(a.z.Grid())
	if !ok || shards > maxListedShards || a.cachedCount(2) < 2 {
		return false
	}
	before := s.checked.Load()
	c := &check{done: make(chan struct{})}
	listKey := "\x00" + a.z.Path // no store key holds a NUL
	if running, ok := e.checking.LoadOrStore(listKey, c); ok {
		c = running.(*check)
	} else {
		func() {
			defer e.checking.Delete(listKey)
			defer close(c.done)
			a.list(ctx, lister, shards+listSlack)
		}()
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return false
	}
	// Checked as of the listing's start, however long the listing took
	// (asking whether s is still current would check it again, alone,
	// after a listing slowed by a loaded machine).
	return s.checked.Load() != before
}

// cachedCount counts the array's cached shard states, up to most.
func (a *Array) cachedCount(most int) int {
	n := 0
	a.cachedShards(func(string, *objectState) bool {
		n++
		return n < most
	})
	return n
}

// cachedShards calls f with each cached, usable state of the array's
// shards, while f returns true.
func (a *Array) cachedShards(f func(key string, s *objectState) bool) {
	grid := a.z.Grid()
	coords := make([]int, len(grid))
	for ok := nd.Size(grid) > 0; ok; ok = nd.Next(coords, grid) {
		key := a.z.ChunkKey(coords)
		if v, cached := a.e.objects.Peek(a.objectKey(key)); cached {
			if s := v.(*objectState); s.err == nil && s.rewrites == a.e.rewrites(key) && !f(key, s) {
				return
			}
		}
	}
}

// list lists the array's keys (at most limit) and marks as checked, at
// the listing's start, each cached shard state at the generation listed
// (or missing, and not listed); the others are checked alone.
func (a *Array) list(ctx context.Context, lister store.InfoLister, limit int) {
	started := time.Now()
	prefix := a.z.Path
	if prefix != "" {
		prefix += "/"
	}
	listed := map[string]store.Generation{}
	for v, err := range lister.ListInfo(ctx, prefix) {
		if err != nil || len(listed) == limit {
			return // not one page of the array's shards: checked alone
		}
		listed[v.Key] = v.Info.Generation
	}
	t := started.UnixNano()
	a.cachedShards(func(key string, s *objectState) bool {
		switch gen, exists := listed[key]; {
		case s.checked.Load() >= t: // checked since the listing began
		case exists != s.exists || exists && gen != s.info.Generation:
			a.startCheckAlone(key, s)
		default:
			s.checked.Store(t)
		}
		return true
	})
}
