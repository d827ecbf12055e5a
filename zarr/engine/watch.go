package engine

import (
	"sync"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// Watching. A reader of a local store that keeps what it read (the
// kernel's page cache under a read-only mount) would otherwise ask again
// every Revalidate to learn whether the stored object changed: a round
// trip per chunk file, for what a check of the object (a stat) answers
// for all its chunks. A watched object is checked by the engine itself
// every Revalidate, and its change is told to Options.Changed as a
// reader's check would, so its readers may keep what they read for
// WatchFor without asking.
const WatchFor = time.Hour // how long a reader may keep what it read of a watched object

// watchMax bounds the objects watched at once: checking one costs a stat
// every Revalidate. Past it, readers ask every Revalidate. A variable for
// the tests.
var watchMax = 4096

// watching is the engine's set of watched objects.
type watching struct {
	mu      sync.Mutex
	objects map[string]*watched // by store key
	running bool                // the loop checking them
}

// watched is an object watched: the array it belongs to, the generation
// its readers were last told of (empty: absent), and until when.
type watched struct {
	a      *Array
	gen    store.Generation
	exists bool
	until  time.Time
}

// Watch asks the engine to check the stored object of loc (as read by a
// reader just now) every Revalidate for WatchFor, and tell Options.Changed
// about its chunks when it no longer holds that generation. It reports
// whether the object is watched: only on local stores (whose checks are
// stats), and up to watchMax objects at once.
func (a *Array) Watch(loc Location) bool {
	e := a.e
	if e.files == nil || loc.Key == "" || e.bg.Err() != nil {
		return false
	}
	w := &e.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.objects[loc.Key]
	if o == nil {
		if len(w.objects) >= watchMax {
			return false
		}
		if w.objects == nil {
			w.objects = map[string]*watched{}
		}
		o = &watched{a: a, gen: loc.Gen, exists: true}
		w.objects[loc.Key] = o
	} else if o.gen != loc.Gen || !o.exists {
		// The reader was told of another generation than the last
		// check saw: the next check tells it apart from the store's.
		o.gen, o.exists = loc.Gen, true
	}
	o.until = time.Now().Add(WatchFor)
	if !w.running {
		w.running = true
		e.checks.Go(e.watchLoop)
	}
	return true
}

// watchLoop checks every watched object every Revalidate until Close.
func (e *Engine) watchLoop() {
	t := time.NewTicker(e.opts.Revalidate)
	defer t.Stop()
	for {
		select {
		case <-e.bg.Done():
			return
		case <-t.C:
		}
		e.checkWatched()
	}
}

// checkWatched checks each watched object once, drops those past their
// time, and tells Options.Changed about the chunks of each whose
// generation is not the one its readers were told of.
func (e *Engine) checkWatched() {
	w := &e.watch
	now := time.Now()
	type item struct {
		key string
		o   watched
	}
	w.mu.Lock()
	items := make([]item, 0, len(w.objects))
	for key, o := range w.objects {
		if now.After(o.until) {
			delete(w.objects, key)
			continue
		}
		items = append(items, item{key, *o})
	}
	w.mu.Unlock()
	for _, it := range items {
		if e.bg.Err() != nil {
			return
		}
		s, err := it.o.a.object(e.bg, it.key, true)
		if err != nil || s.err != nil {
			continue // unreadable: readers asking get the error
		}
		if s.exists == it.o.exists && s.info.Generation == it.o.gen {
			continue
		}
		w.mu.Lock()
		if o := w.objects[it.key]; o != nil && o.gen == it.o.gen && o.exists == it.o.exists {
			o.gen, o.exists = s.info.Generation, s.exists
		}
		w.mu.Unlock()
		it.o.a.objectChanged(it.key)
	}
}
