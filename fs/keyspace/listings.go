package keyspace

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
}

type listing struct {
	coords [][]int
	at     time.Time
}

// candidates yields the chunk (shard) coordinates that may be stored: the
// array's listing, cached on stores read by ranges.
func (av *arrayView) candidates(ctx context.Context) iter.Seq2[[]int, error] {
	f := av.fs
	if f.files != nil {
		return av.a.ChunkCandidates(ctx)
	}
	return func(yield func([]int, error) bool) {
		f.lists.mu.Lock()
		l, ok := f.lists.arrays[av.a.Path]
		f.lists.mu.Unlock()
		if !ok || time.Since(l.at) > f.opts.Revalidate {
			l = listing{at: time.Now()}
			for c, err := range av.a.ChunkCandidates(ctx) {
				if err != nil {
					yield(nil, err)
					return
				}
				l.coords = append(l.coords, c)
			}
			f.lists.mu.Lock()
			if f.lists.arrays == nil {
				f.lists.arrays = map[string]listing{}
			}
			f.lists.arrays[av.a.Path] = l
			f.lists.mu.Unlock()
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
func (av *arrayView) unlisted(objCoords []int) bool {
	av.fs.lists.mu.Lock()
	defer av.fs.lists.mu.Unlock()
	l, ok := av.fs.lists.arrays[av.a.Path]
	return ok && !slices.ContainsFunc(l.coords, func(c []int) bool { return slices.Equal(c, objCoords) })
}

// forget drops the cached listings of the arrays a store key lies in, so a
// shard this process created is listed at once.
func (l *listings) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for path := range l.arrays {
		if path == "" || strings.HasPrefix(key, path+"/") {
			delete(l.arrays, path)
		}
	}
}
