// Package cache is the byte-bounded LRU that keeps decoded shard indexes and
// chunk bytes that are not plain byte ranges of a local file (transcoded and
// decoded chunks). It is built on groupcache's lru and package flight:
// concurrent misses for one key load it once, and each caller's wait ends
// with its own context.
package cache

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/golang/groupcache/lru"

	"github.com/zarrfs/zarrfs/cache/flight"
)

// Stats are the cache's counters.
type Stats struct {
	Hits       uint64 `json:"hits"`
	Misses     uint64 `json:"misses"`
	Evictions  uint64 `json:"evictions"`
	LoadErrors uint64 `json:"load_errors"`
	Entries    int    `json:"entries"`
	Bytes      int64  `json:"bytes"`
	MaxBytes   int64  `json:"max_bytes"`
}

// Cache maps string keys to values of known size, evicting the least
// recently used entries when the sizes add up to more than its bound.
// It is safe for concurrent use.
type Cache struct {
	maxBytes int64
	flight   flight.Group

	mu    sync.Mutex
	lru   *lru.Cache
	bytes int64

	hits, misses, evictions, loadErrors atomic.Uint64
}

type entry struct {
	value any
	size  int64
}

// New returns a cache holding at most maxBytes of values.
func New(maxBytes int64) *Cache {
	c := &Cache{maxBytes: maxBytes, lru: lru.New(0)}
	c.lru.OnEvicted = func(_ lru.Key, v any) { c.bytes -= v.(entry).size }
	return c
}

// Get returns the value cached under key.
func (c *Cache) Get(key string) (any, bool) {
	c.mu.Lock()
	v, ok := c.lru.Get(key)
	c.mu.Unlock()
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return v.(entry).value, true
}

// Add caches value under key as size bytes. Values larger than the whole
// cache are not kept.
func (c *Cache) Add(key string, value any, size int64) {
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(key) // lru.Add replaces silently; this keeps the byte count right
	c.lru.Add(key, entry{value, size})
	c.bytes += size
	for c.bytes > c.maxBytes {
		c.lru.RemoveOldest()
		c.evictions.Add(1)
	}
}

// Peek returns the value cached under key without counting a hit or a
// miss. It makes the entry recently used, as Get does: it is asked about
// because it is wanted soon.
func (c *Cache) Peek(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lru.Get(key)
	if !ok {
		return nil, false
	}
	return e.(entry).value, true
}

// Contains reports whether key is cached, as Peek does.
func (c *Cache) Contains(key string) bool {
	_, ok := c.Peek(key)
	return ok
}

// Remove drops key from the cache.
func (c *Cache) Remove(key string) {
	c.mu.Lock()
	c.lru.Remove(key)
	c.mu.Unlock()
}

// GetOrLoad returns the value cached under key, or calls load once for
// all concurrent callers asking for the same missing key and caches its
// result. Errors are returned to every waiting caller and not cached. A
// caller stops waiting when ctx is done; load's context is cancelled once
// every caller has (see package flight).
func (c *Cache) GetOrLoad(ctx context.Context, key string, load func(ctx context.Context) (value any, size int64, err error)) (any, error) {
	if v, ok := c.Get(key); ok {
		return v, nil
	}
	return c.flight.Do(ctx, key, func(ctx context.Context) (any, error) {
		// Another flight may have filled the key while this one waited.
		c.mu.Lock()
		e, ok := c.lru.Get(key)
		c.mu.Unlock()
		if ok {
			return e.(entry).value, nil
		}
		v, size, err := load(ctx)
		if err != nil {
			c.loadErrors.Add(1)
			return nil, err
		}
		c.Add(key, v, size)
		return v, nil
	})
}

// Stats returns the current counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(), LoadErrors: c.loadErrors.Load(),
		Entries: c.lru.Len(), Bytes: c.bytes, MaxBytes: c.maxBytes,
	}
}
