package engine_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/s3store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
)

// s3Array uploads array "a" of dir (writeArray) to a real S3 server and
// opens an engine over it through a proxy that asks rule about each
// request (nil: each costs a round trip of 5 ms, as to a remote store).
func s3Array(t *testing.T, dir string, opts engine.Options, rule func(*http.Request) faultproxy.Fault) (*s3test.Server, *engine.Engine, *engine.Array) {
	t.Helper()
	return s3ArrayWithin(t, dir, opts, rule, storetest.FaultLimits)
}

// s3ArrayWithin is s3Array with the store's requests within limits.
func s3ArrayWithin(t *testing.T, dir string, opts engine.Options, rule func(*http.Request) faultproxy.Fault, limits requests.Limits) (*s3test.Server, *engine.Engine, *engine.Array) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	srv.Upload(t, dir, "zarr", "")
	srv.SetEnv(t)
	p := faultproxy.Start(t, srv.Endpoint)
	if rule == nil {
		rule = func(*http.Request) faultproxy.Fault {
			time.Sleep(5 * time.Millisecond)
			return faultproxy.Fault{}
		}
	}
	p.SetRule(rule)
	s, err := s3store.Open(context.Background(), "zarr", "", s3store.Options{Endpoint: p.URL, PathStyle: true, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	e, a := open(t, s, opts)
	return srv, e, a
}

// TestWholeReadOneIndexRequestPerShard: concurrent readers reading an
// array whole from an object store, for several revalidation intervals,
// with read-ahead and a cache the array's size (as a mount reading it
// does), make exactly one index request per shard: the shard whose index
// comes due first while the others are not is checked by a listing of
// the array with them, not by a conditional GET of its own, and so are
// all of them afterwards.
func TestWholeReadOneIndexRequestPerShard(t *testing.T) {
	const revalidate = 300 * time.Millisecond
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	_, e, a := s3Array(t, dir, engine.Options{Revalidate: revalidate, ReadAhead: true, CacheBytes: chunks * chunkBytes}, nil)
	start := time.Now()
	// Shard 0 is read first; its index comes due before the others'
	// (loaded on the first read of shard 1) are.
	if _, b, err := read(t, a, 0, false); err != nil || !isChunk(b, 0, 0) {
		t.Fatalf("chunk 0: %v", err)
	}
	time.Sleep(revalidate + 50*time.Millisecond)
	for _, i := range []int{perShard, 1} {
		if _, b, err := read(t, a, i, false); err != nil || !isChunk(b, i, 0) {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	// Four readers read every chunk, each in its own order, again and
	// again until several intervals have passed (a fast machine reads the
	// array once in less than that).
	var wg sync.WaitGroup
	for r := range 4 {
		order := rand.New(rand.NewPCG(uint64(r), 30)).Perm(chunks)
		wg.Go(func() {
			for pass := 0; pass == 0 || time.Since(start) < 4*revalidate && pass < 100; pass++ {
				for _, i := range order {
					if _, b, err := read(t, a, i, false); err != nil || !isChunk(b, i, 0) {
						t.Errorf("reader %d, chunk %d: %v", r, i, err)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	st := e.Stats()
	t.Logf("read in %v: requests %v, %d index loads", took, st.Requests, st.IndexLoads)
	if took < 3*revalidate {
		t.Fatalf("the reads took %v, not several intervals of %v: the test proves nothing", took, revalidate)
	}
	if st.Requests["suffix GET"] != shards || st.IndexLoads != shards {
		t.Errorf("%d shards read for %v (revalidated every %v): %d suffix GETs (index reads and checks), %d index loads; want one index request per shard",
			shards, took, revalidate, st.Requests["suffix GET"], st.IndexLoads)
	}
}

// TestIndexesLoadedAtOnce: once a reader read chunks of two shards of an
// array of a few shards, the indexes of the others are loaded in the
// background, several at once, so its first read of each other shard is
// one request (the chunk's), not two.
func TestIndexesLoadedAtOnce(t *testing.T) {
	// A request for the index of shard 1 or 3 waits until another one is
	// under way (up to a deadline): only loads made at once answer at once.
	var mu sync.Mutex
	inFlight, most := 0, 0
	wake := sync.NewCond(&mu)
	rule := func(r *http.Request) faultproxy.Fault {
		if path.Base(r.URL.Path) != "1" && path.Base(r.URL.Path) != "3" || !strings.HasPrefix(r.Header.Get("Range"), "bytes=-") {
			return faultproxy.Fault{}
		}
		mu.Lock()
		defer mu.Unlock()
		inFlight++
		most = max(most, inFlight)
		wake.Broadcast()
		deadline := time.AfterFunc(5*time.Second, func() { mu.Lock(); wake.Broadcast(); mu.Unlock() })
		defer deadline.Stop()
		for began := time.Now(); most < 2 && time.Since(began) < 5*time.Second; {
			wake.Wait()
		}
		inFlight--
		return faultproxy.Fault{}
	}
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	_, e, a := s3Array(t, dir, engine.Options{Revalidate: time.Hour, ReadAhead: true}, rule)

	// Shards 0 and 2: not neighbours, read as a random reader reads.
	for _, i := range []int{0, 2 * perShard} {
		if _, b, err := read(t, a, i, false); err != nil || !isChunk(b, i, 0) {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for e.Stats().IndexLoads < shards && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	before := e.Stats()
	if before.IndexLoads != shards {
		t.Fatalf("%d index loads 20 s after reading chunks of shards 0 and 2; want all %d loaded in the background", before.IndexLoads, shards)
	}
	mu.Lock()
	concurrent := most
	mu.Unlock()
	if concurrent < 2 {
		t.Errorf("at most %d index loads under way at once; want the other shards' loaded at once", concurrent)
	}
	for _, i := range []int{perShard + 3, 3*perShard + 3} {
		if _, b, err := read(t, a, i, false); err != nil || !isChunk(b, i, 0) {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	after := e.Stats().Requests
	if got, want := after["suffix GET"]-before.Requests["suffix GET"], uint64(0); got != want {
		t.Errorf("first reads of shards 1 and 3 sent %d index requests, want %d", got, want)
	}
	if got := after["ranged GET"] - before.Requests["ranged GET"]; got < 2 || got > 4 {
		t.Errorf("first reads of shards 1 and 3 sent %d ranged GETs, want one per chunk, and at most one more each (the chunks after it, speculate)", got)
	}
}

// TestCheckedBeforeDue: a reader of an object store reading a cached chunk
// after its shard's index came due never waits for a check (a round trip
// on its path): the index was checked in the background, by a listing of
// the array, when a read found it shortly before it came due, so a read
// past the interval finds it checked and sends no request.
func TestCheckedBeforeDue(t *testing.T) {
	const revalidate = 4 * time.Second
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	var sent atomic.Int64
	rule := func(*http.Request) faultproxy.Fault {
		sent.Add(1)
		time.Sleep(5 * time.Millisecond)
		return faultproxy.Fault{}
	}
	// readAt reads chunk 0 at when and returns when the read began and
	// ended (since t0) and the requests sent meanwhile.
	readAt := func(a *engine.Array, t0, when time.Time) (began, ended time.Duration, requests int64) {
		t.Helper()
		time.Sleep(time.Until(when))
		began, before := time.Since(t0), sent.Load()
		if _, b, err := read(t, a, 0, false); err != nil || !isChunk(b, 0, 0) {
			t.Fatalf("chunk 0: %v", err)
		}
		return began, time.Since(t0), sent.Load() - before
	}
	// The schedule: the first read at t0 (the index loaded, the chunk
	// cached); a read at 0.92 intervals (due soon: checked in the
	// background); a read at 1.3 intervals, past the interval since the
	// first but not 7/8 of it since the check. A machine so loaded that
	// the reads slip out of their windows tries again.
	for attempt := 1; ; attempt++ {
		_, e, a := s3Array(t, dir, engine.Options{Revalidate: revalidate, ReadAhead: true}, rule)
		t0 := time.Now()
		_, first, _ := readAt(a, t0, t0)
		checks := e.Stats().Requests
		soon, _, _ := readAt(a, t0, t0.Add(revalidate*92/100))
		time.Sleep(300 * time.Millisecond) // the check, 5 ms away
		last, _, got := readAt(a, t0, t0.Add(revalidate*130/100))
		t.Logf("attempt %d: first read ended at %v, due-soon read began at %v, last read began at %v and sent %d requests", attempt, first, soon, last, got)
		if last-first <= revalidate || soon >= revalidate || last >= revalidate*92/100+revalidate*7/8 {
			if attempt == 3 {
				t.Fatalf("the reads slipped out of their windows in %d attempts: the test proves nothing on a machine this loaded", attempt)
			}
			continue
		}
		if got != 0 {
			t.Errorf("a read of a cached chunk %v after its shard's index was loaded sent %d requests (a check on its path); want it checked before it came due", last, got)
		}
		if st := e.Stats(); st.Requests["LIST"] <= checks["LIST"] && st.Requests["suffix GET"] <= checks["suffix GET"] {
			t.Errorf("no check of the index since the read shortly before it came due (requests %v)", st.Requests)
		}
		return
	}
}
