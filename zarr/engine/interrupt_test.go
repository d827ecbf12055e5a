package engine_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// stallingStore is a store read by ranges whose range reads, once stalled
// is set, wait until gate is closed or their context is done.
type stallingStore struct {
	rangeOnly
	stalled   atomic.Bool
	gate      chan struct{}
	reading   chan struct{} // a stalled read began
	cancelled chan struct{} // a stalled read's context was done
}

func (s *stallingStore) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	if s.stalled.Load() {
		s.reading <- struct{}{}
		select {
		case <-s.gate:
		case <-ctx.Done():
			close(s.cancelled)
			return ctx.Err()
		}
	}
	return s.rangeOnly.ReadAt(ctx, key, gen, p, off)
}

// TestInterruptedReaderLeavesSharedFetch: two readers wait for one fetch
// from a store that stalls; the one whose request is interrupted returns
// at once, the fetch goes on and the other gets the bytes. A reader alone
// that is interrupted stops the fetch itself.
func TestInterruptedReaderLeavesSharedFetch(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	ss := &stallingStore{rangeOnly: rangeOnly{openDir(t, dir)}, gate: make(chan struct{}), reading: make(chan struct{}, 16), cancelled: make(chan struct{})}
	_, a := open(t, ss, engine.Options{})
	locate := func(i int) engine.Location {
		loc, ok, err := a.Locate(context.Background(), []int{i}, false)
		if err != nil || !ok {
			t.Fatalf("chunk %d: stored %v, %v", i, ok, err)
		}
		return loc
	}
	loc := locate(0)

	ss.stalled.Store(true)
	leaver, leave := context.WithCancel(context.Background())
	type result struct {
		b   []byte
		err error
	}
	read := func(ctx context.Context, loc engine.Location) <-chan result {
		r := make(chan result, 1)
		go func() {
			b, err := a.ReadStored(ctx, loc)
			r <- result{b, err}
		}()
		return r
	}
	left := read(leaver, loc)
	<-ss.reading
	stayed := read(context.Background(), loc)
	waitInFlight(t, 2) // the second reader joined the fetch
	leave()
	select {
	case r := <-left:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("the interrupted reader got %d bytes, %v; want context.Canceled", len(r.b), r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupted reader did not return within 10 s")
	}
	select {
	case <-ss.cancelled:
		t.Fatal("the fetch was cancelled while another reader waited for it")
	case <-time.After(50 * time.Millisecond):
	}
	close(ss.gate)
	if r := <-stayed; r.err != nil || !isChunk(r.b, 0, 0) {
		t.Fatalf("the reader that stayed got %d bytes, %v; want chunk 0", len(r.b), r.err)
	}

	// Alone, an interrupted reader cancels the fetch (of a chunk not
	// cached: one of another shard).
	ss.gate = make(chan struct{})
	other := locate(perShard)
	ctx, cancel := context.WithCancel(context.Background())
	r := read(ctx, other)
	<-ss.reading
	cancel()
	if r := <-r; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("an interrupted reader alone: %d bytes, %v", len(r.b), r.err)
	}
	select {
	case <-ss.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch of a reader alone went on after it was interrupted")
	}
}

// waitInFlight waits until n goroutines wait for a shared load
// (flight.Group.Do): a fixed sleep would not do on a loaded machine.
func waitInFlight(t *testing.T, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for i := 0; ; i++ {
		waiting := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, " [select") && strings.Contains(g, "/cache/flight.(*Group).Do(") {
				waiting++
			}
		}
		if waiting >= n {
			return
		}
		if i == 1000 {
			t.Fatalf("%d readers wait for a shared load after 10 s, want %d", waiting, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
