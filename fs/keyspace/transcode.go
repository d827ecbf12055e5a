package keyspace

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// transcoded returns the chunk at coords, stored at loc, re-encoded with
// the view's codecs. Results are cached by chunk and shard generation, so a
// rewritten shard is transcoded afresh.
func (av *arrayView) transcoded(ctx context.Context, coords []int, loc location) ([]byte, error) {
	f := av.fs
	ctx = context.WithoutCancel(ctx) // shared by the readers waiting for it
	v, err := f.cache.GetOrLoad(av.transcodeKey(coords, loc.gen), func() (any, int64, error) {
		if f.cluster != nil && loc.data == nil {
			// The chunk's owner in the cluster transcodes it once for all.
			if b, err := f.cluster.Get(ctx, transcodedKey(f.store, av, coords, loc.gen)); err == nil {
				return b, int64(cap(b)), nil
			}
		}
		b, err := av.transcode(ctx, coords, loc)
		return b, int64(cap(b)), err
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// transcode re-encodes the chunk at coords, stored at loc, here.
func (av *arrayView) transcode(ctx context.Context, coords []int, loc location) ([]byte, error) {
	f := av.fs
	stored, err := av.readStored(ctx, loc)
	if err != nil {
		return nil, err
	}
	chunk, err := av.source.Decode(stored)
	if err != nil {
		f.logOnce(ctx, loc.key, "inner chunk does not decode: its files give EIO", "array", av.path, "chunk", coords, "error", err)
		return nil, fmt.Errorf("%w: %s: inner chunk %v: %v", ErrCorrupt, loc.key, coords, err)
	}
	// Sub-byte integers decode to one byte each, which is what the view's
	// one-byte type stores.
	chunk.Type = av.target.Spec().Type
	b, err := av.target.Encode(chunk)
	if err != nil {
		return nil, fmt.Errorf("transcode %s chunk %v: %w", av.path, coords, err)
	}
	f.counts.transcodes.Add(1)
	// Encoders allocate for the worst case, often twice what the bytes
	// need: keep (and count against the cache's bound) only the bytes.
	return bytes.Clone(b), nil
}

func (av *arrayView) transcodeKey(coords []int, gen store.Generation) string {
	return fmt.Sprintf("tc\x00%s\x00%s\x00%v\x00%s", av.view, av.path, coords, gen)
}

// readAhead transcodes, in the background, the chunks that follow the one
// a reader is reading, when it reads an array's chunks in key order (as
// cat of a directory, cp -r, and zarr-python reading a region do). A
// transcode costs a decode and an encode, which then run on a CPU the
// reader leaves idle instead of between its requests. Pass-through chunks
// of local files need none: they are byte ranges of the shard, which the
// kernel reads ahead itself; those of stores read by ranges are fetched
// ahead (fetchAhead).
type readAhead struct {
	depth int           // chunks prepared ahead of the reader; 0: none
	slots chan struct{} // one per background transcode under way
	work  sync.WaitGroup
	ahead atomic.Uint64 // chunks transcoded ahead, for Stats
}

func newReadAhead(depth int) *readAhead {
	return &readAhead{depth: depth, slots: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))}
}

// sequence remembers the last chunk of an array a reader asked for.
type sequence struct {
	mu   sync.Mutex
	last []int
}

// after is told that the chunk at coords of av was read. When it follows
// the chunk read before it, the next depth chunks are transcoded in the
// background, as far as free slots allow (a busy machine reads no further
// ahead: the reader then transcodes what it needs itself).
func (r *readAhead) after(av *arrayView, coords []int) {
	if r.depth == 0 {
		return
	}
	av.seq.mu.Lock()
	sequential := av.seq.last != nil && slices.Equal(av.nextChunk(av.seq.last), coords)
	if !slices.Equal(av.seq.last, coords) {
		av.seq.last = slices.Clone(coords)
	}
	av.seq.mu.Unlock()
	if !sequential {
		return
	}
	if av.target == nil { // pass-through from a store read by ranges
		select {
		case r.slots <- struct{}{}:
			r.work.Go(func() {
				defer func() { <-r.slots }()
				r.fetchAhead(av, coords)
			})
		default:
		}
		return
	}
	next := coords
	for range r.depth {
		if next = av.nextChunk(next); next == nil {
			return
		}
		select {
		case r.slots <- struct{}{}:
		default:
			return
		}
		coords := next
		r.work.Go(func() {
			defer func() { <-r.slots }()
			r.prepare(av, coords)
		})
	}
}

// remoteAhead is how far in key order fetchAhead looks for a chunk that
// is not cached yet: at a few hundred microseconds per cached chunk a
// reader takes longer to get there than a round trip to a remote store.
const remoteAhead = 256

// fetchAhead fetches, for a reader of a store read by ranges, the run of
// the first chunk after coords that is not cached yet (loading its shard's
// index if need be), so that a sequential reader finds the next shard
// fetched when it gets there instead of waiting for two round trips.
func (r *readAhead) fetchAhead(av *arrayView, coords []int) {
	ctx := context.Background()
	next := coords
	for range remoteAhead {
		if next = av.nextChunk(next); next == nil {
			return
		}
		if objCoords, _ := av.a.InnerChunk(next); av.unlisted(objCoords) {
			continue
		}
		loc, ok, err := av.locate(ctx, next, false)
		if err != nil || !ok || loc.data != nil || av.fs.cache.Contains(chunkRangeKey(loc)) {
			continue
		}
		if _, err := av.readRange(ctx, loc); err == nil {
			r.ahead.Add(1)
		}
		return
	}
}

// prepare transcodes the chunk at coords unless it is cached or empty.
func (r *readAhead) prepare(av *arrayView, coords []int) {
	ctx := context.Background()
	loc, ok, err := av.locate(ctx, coords, false)
	if err != nil || !ok || av.fs.cache.Contains(av.transcodeKey(coords, loc.gen)) {
		return
	}
	// An error is the reader's to see (and log) when it gets there.
	if _, err := av.transcoded(ctx, coords, loc); err == nil {
		r.ahead.Add(1)
	}
}

// nextChunk returns the coordinates after coords in C order of the view's
// grid, the order of chunk keys; nil after the last chunk.
func (av *arrayView) nextChunk(coords []int) []int {
	next := slices.Clone(coords)
	if !nd.Next(next, av.grid) {
		return nil
	}
	return next
}
