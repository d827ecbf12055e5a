package keyspace

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/engine"
)

// transcoded returns the chunk at coords, stored at loc, re-encoded with
// the view's codecs. Results are cached by chunk and shard generation, so a
// rewritten shard is transcoded afresh.
func (av *arrayView) transcoded(ctx context.Context, coords []int, loc engine.Location) ([]byte, error) {
	f := av.fs
	// Shared by the readers waiting for it (see GetOrLoad).
	key := av.transcodedKey(coords, loc)
	v, err := f.cache.GetOrLoad(f.engine.LoadContext(ctx), key, func(ctx context.Context) (any, int64, error) {
		if f.engine.Cluster() != nil && loc.Data == nil {
			// The chunk's owner in the cluster transcodes it once for all.
			if b, err := f.engine.Cluster().Get(ctx, key, av.transcodedCheck(ctx, coords, loc)); err == nil {
				return b, int64(cap(b)), nil
			}
		}
		b, err := av.transcode(ctx, coords, loc, av.target)
		return b, int64(cap(b)), err
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// transcode re-encodes the chunk at coords, stored at loc, here with
// target (the view's codecs, or those a peer asks for).
func (av *arrayView) transcode(ctx context.Context, coords []int, loc engine.Location, target *codec.Pipeline) ([]byte, error) {
	f := av.fs
	stored, done, err := av.eng.ReadScratch(ctx, loc)
	if err != nil {
		return nil, err
	}
	chunk, err := av.source.Decode(stored)
	if err != nil {
		done()
		f.logOnce(ctx, loc.Key, "inner chunk does not decode: its files give EIO", "array", av.path, "chunk", coords, "error", err)
		return nil, fmt.Errorf("%w: %s: inner chunk %v: %v", ErrCorrupt, loc.Key, coords, err)
	}
	// Sub-byte integers decode to one byte each, which is what the view's
	// one-byte type stores.
	chunk.Type = target.Spec().Type
	b, err := target.Encode(chunk)
	if err != nil {
		done()
		return nil, fmt.Errorf("transcode %s chunk %v: %w", av.path, coords, err)
	}
	f.counts.transcodes.Add(1)
	if cap(b)-len(b) > len(b)/8 {
		// Encoders allocate for the worst case, often twice what the
		// bytes need: keep (and count against the cache's bound) only
		// the bytes. Copying an exact one would cost as much as the
		// transpose, in fresh memory.
		b = bytes.Clone(b)
	}
	// Decoders may hand back the bytes they were given (an identity
	// transpose does) and encoders the chunk's: what is kept may be the
	// stored bytes themselves, whose buffer then is not reused.
	if !overlap(b, stored) {
		done()
	}
	return b, nil
}

// readAhead transcodes, in the background, the chunks that follow the one
// a reader is reading, when it reads an array's chunks in key order (as
// cat of a directory, cp -r, and zarr-python reading a region do). A
// transcode costs a decode and an encode, which then run on a CPU the
// reader leaves idle instead of between its requests. Pass-through chunks
// of local files need none: they are byte ranges of the shard, which the
// kernel reads ahead itself; those of stores read by ranges are fetched
// ahead by the engine (engine.Array.ReadAheadFrom).
type readAhead struct {
	ctx   context.Context // of the FS's background work, cancelled by Close
	depth int             // chunks prepared ahead of the reader; 0: none
	slots chan struct{}   // one per transcodeAhead walker under way
	work  sync.WaitGroup
	ahead atomic.Uint64 // chunks transcoded ahead, for Stats
}

func newReadAhead(ctx context.Context, depth int) *readAhead {
	return &readAhead{
		ctx:   ctx,
		depth: depth,
		slots: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1)),
	}
}

// from is told that a reader continued to read av's chunks in key order
// at the chunk at coords (see engine.Array.NoteRead): the next depth
// chunks are transcoded in the background (transcodeAhead), by one walker
// per array and as many walkers as free slots allow (a busy machine reads
// no further ahead: the reader then transcodes what it needs itself);
// from a store read by ranges, the engine fetches the next chunks.
func (r *readAhead) from(av *arrayView, coords []int) {
	if av.target == nil { // pass-through from a store read by ranges
		av.eng.ReadAheadFrom(coords)
		return
	}
	if r.depth == 0 || !av.transcoding.CompareAndSwap(false, true) {
		return // none ahead, or this array's walker is under way and sees the reader move
	}
	select {
	case r.slots <- struct{}{}:
	default:
		av.transcoding.Store(false)
		return
	}
	r.work.Go(func() {
		defer func() { <-r.slots }()
		defer av.transcoding.Store(false)
		r.transcodeAhead(av)
	})
}

// transcodeAhead keeps the depth chunks after a sequential reader's last
// one transcoded: it transcodes the first of them not yet cached, as many
// at once as there are CPUs, looks again where the reader is, and stops
// when all are done (or one fails, which the reader will see and log).
// Working without pause while the reader waits for its own round trips is
// what keeps it ahead: a transcode started only when the reader reaches
// the chunk before would be waited for whole at the next lookup.
func (r *readAhead) transcodeAhead(av *arrayView) {
	ctx := r.ctx
	type job struct {
		coords []int
		loc    engine.Location
	}
	parallel := runtime.GOMAXPROCS(0)
	for {
		var jobs []job
		for _, next := range av.eng.Ahead(r.depth) {
			if len(jobs) == parallel {
				break
			}
			l, ok, err := av.locate(ctx, next, false)
			if err != nil {
				return
			}
			if ok && !av.fs.cache.Contains(av.transcodedKey(next, l)) {
				jobs = append(jobs, job{next, l})
			}
		}
		if len(jobs) == 0 {
			return
		}
		var failed atomic.Bool
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Go(func() {
				if _, err := av.transcoded(ctx, j.coords, j.loc); err != nil {
					failed.Store(true)
					return
				}
				r.ahead.Add(1)
			})
		}
		wg.Wait()
		if failed.Load() {
			return
		}
	}
}

// overlap reports whether a and b share memory.
func overlap(a, b []byte) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(cap(b)) && b0 < a0+uintptr(cap(a))
}
