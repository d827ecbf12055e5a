package engine

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
	store    store.Opener
	maxIdle  int
	mu       sync.Mutex
	open     map[string]*sharedFile // by key and generation
	idle     *list.List             // of *sharedFile with refs == 0
	isClosed bool
	opens    atomic.Uint64 // files opened, for Stats
}

type sharedFile struct {
	store.Object
	id   string
	refs int
	elem *list.Element // in idle while refs == 0
}

func newFileCache(s store.Opener, maxIdle int) *fileCache {
	return &fileCache{store: s, maxIdle: maxIdle, open: map[string]*sharedFile{}, idle: list.New()}
}

// acquire returns the open file of key at generation gen (opening it if
// needed) and a function that releases it. The file opened is checked to
// be that generation; otherwise the caller's index is stale and it gets
// ErrStale.
func (c *fileCache) acquire(ctx context.Context, key string, gen store.Generation) (store.Object, func(), error) {
	id := key + "\x00" + string(gen)
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
	file, err := c.store.Open(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	c.opens.Add(1)
	if file.Info().Generation != gen {
		file.Close()
		return nil, nil, ErrStale
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
	f := &sharedFile{Object: file, id: id, refs: 1}
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
		f.Object.Close()
		return
	}
	f.elem = c.idle.PushFront(f)
	for c.idle.Len() > c.maxIdle {
		old := c.idle.Remove(c.idle.Back()).(*sharedFile)
		delete(c.open, old.id)
		old.Object.Close()
	}
}

// close closes idle files; files in use close when released.
func (c *fileCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.isClosed = true
	for e := c.idle.Front(); e != nil; e = e.Next() {
		e.Value.(*sharedFile).Object.Close()
	}
	c.idle.Init()
	clear(c.open)
}
