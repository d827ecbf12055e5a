package keyspace_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
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

// firstChunk returns the first chunk file of an array of the v3 view.
func firstChunk(t *testing.T, f *keyspace.FS, array string) keyspace.File {
	t.Helper()
	ctx := context.Background()
	d := lookupDir(t, lookupDir(t, f.Root(keyspace.V3), array), "c")
	for {
		var first keyspace.DirEntry
		for e, err := range d.List(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			first = e
			break
		}
		e, err := d.Lookup(ctx, first.Name)
		if err != nil {
			t.Fatal(err)
		}
		if e.File != nil {
			return e.File
		}
		d = e.Dir
	}
}

// TestInterruptedReaderLeavesSharedFetch: two readers wait for one fetch
// from a store that stalls; the one whose request is interrupted returns
// at once, the fetch goes on and the other gets the bytes. A reader alone
// that is interrupted stops the fetch itself.
func TestInterruptedReaderLeavesSharedFetch(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	s, err := store.OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ss := &stallingStore{rangeOnly: rangeOnly{s}, gate: make(chan struct{}), reading: make(chan struct{}, 16), cancelled: make(chan struct{})}
	f := openFSOver(t, ss, keyspace.Options{})
	file := firstChunk(t, f, "uint16_zstd_end")
	want := make([]byte, 1<<20)
	n, err := firstChunk(t, openFS(t, dir, keyspace.Options{}), "uint16_zstd_end").ReadAt(context.Background(), want, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	want = want[:n]

	ss.stalled.Store(true)
	leaver, leave := context.WithCancel(context.Background())
	type result struct {
		b   []byte
		err error
	}
	read := func(ctx context.Context) <-chan result {
		r := make(chan result, 1)
		go func() {
			b := make([]byte, 1<<20)
			n, err := file.ReadAt(ctx, b, 0)
			r <- result{b[:n], err}
		}()
		return r
	}
	left := read(leaver)
	<-ss.reading
	stayed := read(context.Background())
	time.Sleep(50 * time.Millisecond) // the second reader joins the fetch
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
	if r := <-stayed; r.err != nil && !errors.Is(r.err, io.EOF) || !bytes.Equal(r.b, want) {
		t.Fatalf("the reader that stayed got %d bytes, %v; want the chunk's %d", len(r.b), r.err, len(want))
	}

	// Alone, an interrupted reader cancels the fetch (of a chunk not cached).
	ss.gate = make(chan struct{})
	other := firstChunk(t, f, "int32_gzip_start_nocrc")
	ctx, cancel := context.WithCancel(context.Background())
	r := make(chan error, 1)
	go func() {
		_, err := other.ReadAt(ctx, make([]byte, 1<<20), 0)
		r <- err
	}()
	<-ss.reading
	cancel()
	if err := <-r; !errors.Is(err, context.Canceled) {
		t.Fatalf("an interrupted reader alone: %v", err)
	}
	select {
	case <-ss.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch of a reader alone went on after it was interrupted")
	}
}
