package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
)

// scatterLog is an S3 store that records the buffers its ranged reads
// were read into.
type scatterLog struct {
	*s3store.Store
	mu   sync.Mutex
	into map[*byte]int // the first byte of each buffer, and its length
}

func (s *scatterLog) ReadScatter(ctx context.Context, key string, gen store.Generation, bufs [][]byte, off int64) error {
	s.mu.Lock()
	for _, b := range bufs {
		if len(b) > 0 {
			s.into[&b[0]] = len(b)
		}
	}
	s.mu.Unlock()
	return s.Store.ReadScatter(ctx, key, gen, bufs, off)
}

// readInto reports whether b is a whole buffer a ranged read went into.
func (s *scatterLog) readInto(b []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(b) > 0 && s.into[&b[0]] == len(b)
}

// TestSpanChunksOwnTheirBytes: chunks fetched from an object store by one
// ranged GET of their span (shard 0's stored with gaps between them) are
// each read straight from the answer into a buffer of their own, the one
// the cache keeps: no copy, and none keeps another's bytes, or the span's,
// in memory. Chunks sharing stored bytes (shard 1's chunk 5 points at
// chunk 4's) are cached in buffers of their own as well.
func TestSpanChunksOwnTheirBytes(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	restoreWithGaps(t, filepath.Join(dir, "a", "c", "0"), nil)
	restoreWithGaps(t, filepath.Join(dir, "a", "c", "1"), map[int]int{5: 4})
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	srv.Upload(t, dir, "zarr", "")
	s := &scatterLog{Store: srv.Open(t, "zarr", "", true), into: map[*byte]int{}}
	e, a := open(t, s, engine.Options{Revalidate: time.Hour})
	var cached [][]byte
	for i := range 2 * perShard {
		want := i
		if i == perShard+5 {
			want = perShard + 4
		}
		_, b, err := read(t, a, i, false)
		if err != nil || !isChunk(b, want, 0) {
			t.Fatalf("chunk %d: %d bytes, %v; want chunk %d's bytes", i, len(b), err, want)
		}
		cached = append(cached, b)
	}
	st := e.Stats()
	t.Logf("%+v", st)
	if st.Coalesced < perShard || st.RangeReads > perShard {
		t.Fatalf("%d chunks of 2 shards read in order: %d range reads, %d coalesced; want spans of several chunks", 2*perShard, st.RangeReads, st.Coalesced)
	}
	for i, b := range cached {
		// The cache's bytes, not a copy the read made.
		if _, again, err := read(t, a, i, false); err != nil || &again[0] != &b[0] {
			t.Fatalf("chunk %d read again: %v, not the bytes cached", i, err)
		}
		if cap(b) != len(b) {
			t.Errorf("chunk %d: %d bytes cached in a buffer of %d: it keeps the bytes after it in memory", i, len(b), cap(b))
		}
		if i < perShard && !s.readInto(b) {
			t.Errorf("chunk %d: not the buffer its ranged read went into: a copy", i)
		}
	}
}

// restoreWithGaps rewrites the shard at path (of writeArray) with i%3 KiB
// of other bytes before its chunk i, and each chunk i of same pointing
// at chunk same[i]'s bytes.
func restoreWithGaps(t *testing.T, path string, same map[int]int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const indexBytes = 16*perShard + 4 // (offset, nbytes) per chunk, then crc32c
	index := b[len(b)-indexBytes:]
	var out []byte
	entries := make([]byte, 16*perShard)
	for i := range perShard {
		off, n := binary.LittleEndian.Uint64(index[16*i:]), binary.LittleEndian.Uint64(index[16*i+8:])
		out = append(out, bytes.Repeat([]byte{0xee}, i%3<<10)...)
		binary.LittleEndian.PutUint64(entries[16*i:], uint64(len(out)))
		binary.LittleEndian.PutUint64(entries[16*i+8:], n)
		out = append(out, b[off:off+n]...)
	}
	for i, j := range same {
		copy(entries[16*i:16*i+16], entries[16*j:16*j+16])
	}
	out = append(out, entries...)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(entries, crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
