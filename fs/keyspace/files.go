package keyspace

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// fileCache keeps recently used shard files open, so opening a chunk file
// costs no open(2) of its shard. Files stay open while handles use them;
// idle ones are closed beyond a bound, least recently used first.
type fileCache struct {
	store    store.Store
	maxIdle  int
	mu       sync.Mutex
	open     map[string]*sharedFile // by key and version
	idle     *list.List             // of *sharedFile with refs == 0
	isClosed bool
	opens    atomic.Uint64 // files opened, for Stats
}

type sharedFile struct {
	store.File
	id   string
	refs int
	elem *list.Element // in idle while refs == 0
}

func newFileCache(s store.Store, maxIdle int) *fileCache {
	return &fileCache{store: s, maxIdle: maxIdle, open: map[string]*sharedFile{}, idle: list.New()}
}

// acquire returns the open file of key at version (opening it if needed)
// and a function that releases it. The file opened is checked to be that
// version; otherwise the caller's index is stale and it gets errStale.
func (c *fileCache) acquire(ctx context.Context, key, version string) (store.File, func(), error) {
	id := key + "\x00" + version
	c.mu.Lock()
	if f, ok := c.open[id]; ok {
		if f.refs == 0 {
			c.idle.Remove(f.elem)
		}
		f.refs++
		c.mu.Unlock()
		return f, func() { c.release(f) }, nil
	}
	c.mu.Unlock()
	file, err := store.Open(ctx, c.store, key)
	if err != nil {
		return nil, nil, err
	}
	c.opens.Add(1)
	if file.Info().Version != version {
		file.Close()
		return nil, nil, errStale
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.open[id]; ok { // another opener won
		file.Close()
		if f.refs == 0 {
			c.idle.Remove(f.elem)
		}
		f.refs++
		return f, func() { c.release(f) }, nil
	}
	f := &sharedFile{File: file, id: id, refs: 1}
	if !c.isClosed {
		c.open[id] = f
	}
	return f, func() { c.release(f) }, nil
}

func (c *fileCache) release(f *sharedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f.refs--
	if f.refs > 0 {
		return
	}
	if c.open[f.id] != f { // dropped by forget or close
		f.File.Close()
		return
	}
	f.elem = c.idle.PushFront(f)
	for c.idle.Len() > c.maxIdle {
		old := c.idle.Remove(c.idle.Back()).(*sharedFile)
		delete(c.open, old.id)
		old.File.Close()
	}
}

// close closes idle files; files in use close when released.
func (c *fileCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.isClosed = true
	for e := c.idle.Front(); e != nil; e = e.Next() {
		e.Value.(*sharedFile).File.Close()
	}
	c.idle.Init()
	clear(c.open)
}
