package engine_test

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// rangeLog is a store read by ranges that records each range read.
type rangeLog struct {
	rangeOnly
	mu    sync.Mutex
	reads []storedRead
}

type storedRead struct {
	key   string
	off   int64
	bytes int
}

func (s *rangeLog) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	s.mu.Lock()
	s.reads = append(s.reads, storedRead{key, off, len(p)})
	s.mu.Unlock()
	return s.rangeOnly.ReadAt(ctx, key, gen, p, off)
}

// since returns the range reads after the first n.
func (s *rangeLog) since(n int) []storedRead {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]storedRead(nil), s.reads[n:]...)
}

func (s *rangeLog) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reads)
}

// readAll reads chunk i as a reader does, then waits for what the engine
// fetches ahead of it, and returns the range reads made meanwhile.
func (s *rangeLog) readAll(t *testing.T, e *engine.Engine, a *engine.Array, i int) (engine.Location, []storedRead) {
	t.Helper()
	n := s.count()
	loc, b, err := read(t, a, i, false)
	if err != nil || !isChunk(b, i, 0) {
		t.Fatalf("chunk %d: %v", i, err)
	}
	engine.WaitAhead(e)
	return loc, s.since(n)
}

// TestRandomReaderFetchesNeighbours: a read at random of a remote store
// waits for a request of its chunk alone, while the chunk stored after it
// is fetched with another request; a later read of that one finds it
// fetched. Reading a quarter of the chunks at random so, a reader waits
// for fewer requests than it reads chunks, and fetches at most twice the
// bytes it reads; one reading them in order fetches each byte once, in
// few requests.
func TestRandomReaderFetchesNeighbours(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	s := &rangeLog{rangeOnly: rangeOnly{openDir(t, dir)}}
	e, a := open(t, s, engine.Options{Revalidate: time.Hour, ReadAhead: true})

	loc, reads := s.readAll(t, e, a, 5)
	slices.SortFunc(reads, func(x, y storedRead) int { return cmp.Compare(x.off, y.off) })
	if len(reads) != 2 || reads[0] != (storedRead{loc.Key, loc.Off, chunkBytes}) || reads[1] != (storedRead{loc.Key, loc.Off + chunkBytes, chunkBytes}) {
		t.Errorf("the first read of chunk 5 made the range reads %v, want its chunk alone at %d and the next one, each %d bytes", reads, loc.Off, chunkBytes)
	}
	if _, reads = s.readAll(t, e, a, 6); len(reads) != 0 {
		t.Errorf("chunk 6, fetched along with chunk 5, was read again: %v", reads)
	}

	e, a = open(t, s, engine.Options{Revalidate: time.Hour, ReadAhead: true})
	st0 := e.Stats()
	picks := rand.New(rand.NewPCG(30, 1)).Perm(chunks)[:chunks/4]
	waited := 0
	for _, i := range picks {
		loc, reads := s.readAll(t, e, a, i)
		for _, r := range reads {
			if r.key == loc.Key && r.off == loc.Off {
				waited++
			}
		}
	}
	st := e.Stats()
	fetched, needed := st.FetchedBytes-st0.FetchedBytes, uint64(len(picks)*chunkBytes)
	t.Logf("%d chunks read at random: waited for %d requests, %d requests in all, fetched %d bytes for %d", len(picks), waited, st.RangeReads, fetched, needed)
	// Of the chunks stored after those read before, an eighth are read
	// later with these picks (as with any: a quarter are read, half of them
	// later); reading only what is asked waits for each.
	if waited > len(picks)*7/8 || fetched > 2*needed {
		t.Errorf("%d chunks read at random waited for %d requests and fetched %d bytes for %d needed; want at most %d requests and twice the bytes", len(picks), waited, fetched, needed, len(picks)*7/8)
	}

	e, a = open(t, s, engine.Options{Revalidate: time.Hour, ReadAhead: true})
	for i := range chunks {
		s.readAll(t, e, a, i)
	}
	if st := e.Stats(); st.RangeReads >= chunks/2 || st.FetchedBytes != chunks*chunkBytes {
		t.Errorf("%d chunks read in order: %d range reads, %d bytes fetched; want fewer than %d and each byte once", chunks, st.RangeReads, st.FetchedBytes, chunks/2)
	}
}

// TestReadAheadWantsARun: a random reader that happens to read two chunks
// in a row in key order gets nothing fetched ahead of it in key order; a
// reader that read three chunks so does.
func TestReadAheadWantsARun(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	s := &rangeLog{rangeOnly: rangeOnly{openDir(t, dir)}}
	e, a := open(t, s, engine.Options{Revalidate: time.Hour, ReadAhead: true})
	// The keyspace tells the engine of each read (NoteRead), and of one
	// that follows the one before it in key order (ReadAheadFrom), after
	// the read.
	follow := func(i int) []storedRead {
		_, reads := s.readAll(t, e, a, i)
		n := s.count()
		if a.NoteRead([]int{i}) {
			a.ReadAheadFrom([]int{i})
		}
		engine.WaitAhead(e)
		return append(reads, s.since(n)...)
	}
	follow(20)
	reads := follow(21)
	var bytes int
	for _, r := range reads {
		bytes += r.bytes
	}
	if bytes > 2*chunkBytes {
		t.Errorf("reading chunks 20 and 21 fetched %v then: %d bytes, want at most twice chunk 21's", reads, bytes)
	}
	if reads = follow(22); len(reads) == 0 || e.Stats().ReadAhead == 0 {
		t.Errorf("reading chunks 20, 21 and 22 fetched %v then, %d chunks ahead; want the chunks after them", reads, e.Stats().ReadAhead)
	}
}

// heldRange is a store read by ranges whose range reads at one offset wait
// until let go, once one of them arrived.
type heldRange struct {
	rangeOnly
	at             atomic.Int64 // the offset held; -1: none
	arrived, letGo chan struct{}
	once           sync.Once
}

func (s *heldRange) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	if off == s.at.Load() {
		s.once.Do(func() { close(s.arrived) })
		select {
		case <-s.letGo:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.rangeOnly.ReadAt(ctx, key, gen, p, off)
}

// TestSpeculationAcrossRewrite: the chunk fetched along with a random
// read, by a request still under way when its shard is replaced, is never
// served from the old shard: that fetch, tied to the old generation,
// caches nothing, and the next reads of both chunks are the new shard's.
func TestSpeculationAcrossRewrite(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	s := &heldRange{rangeOnly: rangeOnly{openDir(t, dir)}, arrived: make(chan struct{}), letGo: make(chan struct{})}
	s.at.Store(-1)
	e, a := open(t, s, engine.Options{Revalidate: time.Hour, ReadAhead: true})
	next, ok, err := a.Locate(context.Background(), []int{6}, false)
	if err != nil || !ok {
		t.Fatalf("chunk 6: %v", err)
	}
	s.at.Store(next.Off)
	if _, b, err := read(t, a, 5, false); err != nil || !isChunk(b, 5, 0) {
		t.Fatalf("chunk 5: %v", err)
	}
	select {
	case <-s.arrived:
	case <-time.After(10 * time.Second):
		close(s.letGo)
		t.Fatal("reading chunk 5 at random fetched nothing of chunk 6 along with it")
	}
	writeArray(t, dir, 1, nil) // the shard replaced
	close(s.letGo)
	engine.WaitAhead(e)
	for _, i := range []int{6, 5} {
		_, b, err := read(t, a, i, true) // an open checks the shard
		if err != nil || !isChunk(b, i, 1) {
			t.Errorf("chunk %d after its shard was replaced: %v; want the new shard's bytes (old ones: %v)", i, err, isChunk(b, i, 0))
		}
	}
}

// slowRange is a rangeLog whose range reads take a round trip.
type slowRange struct {
	rangeLog
	trip time.Duration
}

func (s *slowRange) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	time.Sleep(s.trip)
	return s.rangeLog.ReadAt(ctx, key, gen, p, off)
}

// TestConcurrentReadersFetchSpans: 16 readers reading every chunk of an
// array at once, in an order that visits every shard in turn and each
// shard's chunks out of stored order (node's thread pool reading a 3-d
// array), make each shard dense within a few reads. The reads that miss
// then wait for room among the fetches under way and fetch spans, rather
// than their chunk alone: the array takes a few requests per shard, each
// byte fetched once.
func TestConcurrentReadersFetchSpans(t *testing.T) {
	const n, per = 4, 64
	dir := t.TempDir()
	writeArrayOf(t, dir, raw, n, per, 0, nil)
	s := &slowRange{rangeLog: rangeLog{rangeOnly: rangeOnly{openDir(t, dir)}}, trip: 5 * time.Millisecond}
	// 4 MiB of fetches at once, a shard's worth.
	e, a := open(t, s, engine.Options{Revalidate: time.Hour, ReadAhead: true, CacheBytes: 32 << 20})
	var order []int
	for _, k := range rand.New(rand.NewPCG(30, 2)).Perm(per) {
		for shard := range n {
			order = append(order, shard*per+k)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(order) {
					return
				}
				if _, b, err := read(t, a, order[i], false); err != nil || !isChunk(b, order[i], 0) {
					t.Errorf("chunk %d: %v", order[i], err)
				}
			}
		})
	}
	wg.Wait()
	engine.WaitAhead(e)
	st := e.Stats()
	t.Logf("16 readers read %d chunks of %d shards: %d range reads, %d bytes fetched", len(order), n, st.RangeReads, st.FetchedBytes)
	if st.RangeReads > 20*n || st.FetchedBytes != uint64(len(order)*chunkBytes) {
		t.Errorf("%d chunks of %d shards read at once by 16 readers: %d range reads, %d bytes fetched; want at most %d and each byte once", len(order), n, st.RangeReads, st.FetchedBytes, 20*n)
	}

	// Read densely once, read at random now: a miss fetches its chunk
	// and the few after it that the array's last reads ask for (a
	// quarter of them were of its shard), not the rest of the shard.
	writeArrayOf(t, dir, raw, n, per, 1, nil)
	before := s.count()
	if _, b, err := read(t, a, 5, true); err != nil || !isChunk(b, 5, 1) {
		t.Fatalf("chunk 5 of the shard replaced: %v", err)
	}
	engine.WaitAhead(e)
	var bytes int
	for _, r := range s.since(before) {
		bytes += r.bytes
	}
	if bytes > per/4*chunkBytes {
		t.Errorf("one read of a chunk of a shard read densely before fetched %d bytes (%v), want at most %d chunks", bytes, s.since(before), per/4)
	}
}
