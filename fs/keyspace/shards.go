package keyspace

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
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
}

// size estimates the memory an objectState holds, for the cache's bound.
func (s *objectState) size() int64 {
	n := int64(128 + len(s.key) + len(s.info.Version))
	if s.index != nil {
		n += int64(16 * s.index.Len())
	}
	return n
}

// object returns the cached state of a stored object, checking the store
// for changes when fresh is set or the state is older than the
// revalidation interval.
func (av *arrayView) object(ctx context.Context, key string, fresh bool) (*objectState, error) {
	f := av.fs
	cacheKey := "obj\x00" + key
	v, err := f.cache.GetOrLoad(cacheKey, func() (any, int64, error) {
		s := av.loadObject(ctx, key)
		return s, s.size(), nil
	})
	if err != nil {
		return nil, err
	}
	s := v.(*objectState)
	now := time.Now()
	if !fresh && now.UnixNano()-s.checked.Load() < int64(f.opts.Revalidate) {
		return s, nil
	}
	info, err := f.store.Stat(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if !s.exists {
			s.checked.Store(now.UnixNano())
			return s, nil
		}
	case err != nil:
		return nil, err
	case s.exists && info.Version == s.info.Version:
		s.checked.Store(now.UnixNano())
		return s, nil
	}
	// Changed: reload once for all callers.
	f.cache.Remove(cacheKey)
	v, err = f.cache.GetOrLoad(cacheKey, func() (any, int64, error) {
		s := av.loadObject(ctx, key)
		return s, s.size(), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*objectState), nil
}

// loadObject stats a stored object and, for shards, reads its index.
func (av *arrayView) loadObject(ctx context.Context, key string) *objectState {
	s := &objectState{key: key}
	s.checked.Store(time.Now().UnixNano())
	if av.shard == nil {
		info, err := av.fs.store.Stat(ctx, key)
		s.exists, s.info, s.err = err == nil, info, ignoreNotFound(err)
		return s
	}
	file, err := store.Open(ctx, av.fs.store, key)
	if err != nil {
		s.err = ignoreNotFound(err)
		return s
	}
	defer file.Close()
	s.exists, s.info = true, file.Info()
	s.index, s.err = av.shard.ReadIndex(file, s.info.Size)
	if s.err != nil {
		av.fs.logOnce(ctx, key, "unreadable shard index: its inner chunks give EIO", "error", s.err)
	}
	return s
}

func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// location is where the stored bytes of one chunk of a view's grid are.
type location struct {
	key     string
	version string
	mtime   time.Time
	off, n  int64
}

// locate finds the stored bytes of the chunk at view coordinates; ok is
// false when the chunk is empty (an empty index entry or a missing shard).
func (av *arrayView) locate(ctx context.Context, coords []int, fresh bool) (loc location, ok bool, err error) {
	if !nd.Inside(coords, av.grid) {
		return loc, false, nil
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
	loc = location{key: key, version: s.info.Version, mtime: s.info.ModTime, n: s.info.Size}
	if s.index != nil {
		if loc.off, loc.n, ok = s.index.Chunk(local); !ok {
			return loc, false, nil
		}
	}
	if loc.n < int64(av.drop) {
		return loc, false, fmt.Errorf("%w: %s: a chunk of %d bytes cannot end with a %d-byte checksum", ErrCorrupt, key, loc.n, av.drop)
	}
	return loc, true, nil
}

// stored yields the view coordinates of every stored chunk whose leading
// coordinates equal prefix, shard by shard.
func (av *arrayView) stored(ctx context.Context, prefix []int) iter.Seq2[[]int, error] {
	return func(yield func([]int, error) bool) {
		per := make([]int, len(av.grid))
		for d := range per {
			per[d] = 1
		}
		if av.shard != nil {
			per = av.shard.Grid()
		}
		for objCoords, err := range av.a.StoredChunks(ctx) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !matchesPrefix(objCoords, per, prefix) {
				continue
			}
			key := av.a.ChunkKey(objCoords)
			s, err := av.object(ctx, key, false)
			if err != nil {
				if !yield(nil, err) {
					return
				}
				continue
			}
			if s.err != nil || !s.exists {
				continue // logged when loaded; its chunks give EIO on lookup
			}
			if s.index == nil {
				if !yield(objCoords, nil) {
					return
				}
				continue
			}
			for i := 0; i < s.index.Len(); i++ {
				if _, _, ok := s.index.Chunk(i); ok {
					c := av.a.InnerCoords(objCoords, i)
					if nd.Inside(c, av.grid) && hasPrefix(c, prefix) && !yield(c, nil) {
						return
					}
				}
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
