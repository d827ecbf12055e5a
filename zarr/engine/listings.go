package engine

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"
)

// listings keeps, for stores read by ranges (object stores), the chunk
// (shard) coordinates an array's listing found, for the revalidation
// interval: every readdir of a chunk directory otherwise costs a LIST of
// the whole array. Local directories are listed afresh every time.
type listings struct {
	mu     sync.Mutex
	arrays map[string]listing // by array path
	// forgotten counts the calls of forget: a listing begun before one
	// may lack the shard it was for, and is not kept.
	forgotten uint64
}

type listing struct {
	coords [][]int
	at     time.Time
}

// candidates yields the chunk (shard) coordinates that may be stored: the
// array's listing, cached on stores read by ranges.
func (a *Array) candidates(ctx context.Context) iter.Seq2[[]int, error] {
	e := a.e
	if e.files != nil {
		return a.z.ChunkCandidates(ctx)
	}
	return func(yield func([]int, error) bool) {
		e.lists.mu.Lock()
		l, ok := e.lists.arrays[a.z.Path]
		forgotten := e.lists.forgotten
		e.lists.mu.Unlock()
		if !ok || time.Since(l.at) > e.opts.Revalidate {
			l = listing{at: time.Now()}
			for c, err := range a.z.ChunkCandidates(ctx) {
				if err != nil {
					yield(nil, err)
					return
				}
				l.coords = append(l.coords, c)
			}
			e.lists.mu.Lock()
			if e.lists.arrays == nil {
				e.lists.arrays = map[string]listing{}
			}
			if e.lists.forgotten == forgotten {
				e.lists.arrays[a.z.Path] = l
			}
			e.lists.mu.Unlock()
		}
		for _, c := range l.coords {
			if !yield(c, nil) {
				return
			}
		}
	}
}

// unlisted reports whether the cached listing of the array, if there is
// one, lacks the chunk (shard) at objCoords: a probe for it would only
// find it missing.
func (a *Array) unlisted(objCoords []int) bool {
	a.e.lists.mu.Lock()
	defer a.e.lists.mu.Unlock()
	l, ok := a.e.lists.arrays[a.z.Path]
	return ok && !slices.ContainsFunc(l.coords, func(c []int) bool { return slices.Equal(c, objCoords) })
}

// forget drops the cached listings of the arrays a store key lies in, so a
// shard this process created is listed at once.
func (l *listings) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgotten++
	for path := range l.arrays {
		if path == "" || strings.HasPrefix(key, path+"/") {
			delete(l.arrays, path)
		}
	}
}
