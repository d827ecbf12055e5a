package keyspace_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestStats reads every file of both views twice and checks what the
// counters say: indexes loaded and shards opened once (the caches hold
// them), every byte counted once per read by where it came from.
func TestStats(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	f := openFS(t, dir, keyspace.Options{})
	if s := f.Stats(); s.IndexLoads != 0 || s.Served != (keyspace.Served{}) {
		t.Fatalf("stats before any read: %+v", s)
	}
	for _, v := range []keyspace.View{keyspace.V3, keyspace.V2} {
		materialize(t, f.Root(v), t.TempDir())
	}
	first := f.Stats()
	if first.IndexLoads == 0 || first.ShardOpens == 0 || first.Transcodes == 0 {
		t.Errorf("after reading everything: %+v", first)
	}
	if first.Served.PassThroughBytes == 0 || first.Served.TranscodedBytes == 0 || first.Served.MetadataBytes == 0 {
		t.Errorf("served after reading everything: %+v", first.Served)
	}
	if first.Cache.Misses == 0 || first.Cache.Bytes == 0 || first.Cache.MaxBytes != 256<<20 {
		t.Errorf("cache after reading everything: %+v", first.Cache)
	}
	for _, v := range []keyspace.View{keyspace.V3, keyspace.V2} {
		materialize(t, f.Root(v), t.TempDir())
	}
	second := f.Stats()
	if second.IndexLoads != first.IndexLoads || second.Transcodes != first.Transcodes {
		t.Errorf("reading again loaded indexes or transcoded again: %+v, then %+v", first, second)
	}
	if second.Served.PassThroughBytes != 2*first.Served.PassThroughBytes || second.Served.TranscodedBytes != 2*first.Served.TranscodedBytes {
		t.Errorf("reading again served %+v, then %+v in all", first.Served, second.Served)
	}
	if second.Cache.Hits <= first.Cache.Hits {
		t.Errorf("reading again hit no cache: %+v, then %+v", first.Cache, second.Cache)
	}
}

// TestReadAtWithoutHandle reads every chunk file of both views without
// opening it, as read-only mounts do, and compares with an open handle.
func TestReadAtWithoutHandle(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	f := openFS(t, dir, keyspace.Options{})
	ctx := context.Background()
	var walk func(d *keyspace.Dir)
	files := 0
	walk = func(d *keyspace.Dir) {
		for e, err := range d.List(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.Lookup(ctx, e.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got.Dir != nil {
				walk(got.Dir)
				continue
			}
			h, err := got.File.Open(ctx)
			if err != nil {
				t.Fatalf("open %s: %v", got.File, err)
			}
			want, err := io.ReadAll(io.NewSectionReader(h, 0, h.Size()))
			h.Close()
			if err != nil {
				t.Fatal(err)
			}
			// In two reads, the second past the end, as the kernel does.
			half := len(want) / 2
			b := make([]byte, len(want)+7)
			n1, err := got.File.ReadAt(ctx, b[:half], 0)
			if err != nil || n1 != half {
				t.Fatalf("%s: ReadAt first half: %d, %v", got.File, n1, err)
			}
			n2, err := got.File.ReadAt(ctx, b[half:], int64(half))
			if err != nil && err != io.EOF {
				t.Fatalf("%s: ReadAt second half: %v", got.File, err)
			}
			if !bytes.Equal(b[:n1+n2], want) {
				t.Fatalf("%s: ReadAt without a handle read other bytes than an open handle", got.File)
			}
			if n, err := got.File.ReadAt(ctx, b, int64(len(want))); n != 0 || err != io.EOF {
				t.Fatalf("%s: ReadAt at the end: %d, %v; want 0, EOF", got.File, n, err)
			}
			files++
		}
	}
	walk(f.Root(keyspace.V3))
	walk(f.Root(keyspace.V2))
	if files == 0 {
		t.Fatal("no files")
	}
}

// BenchmarkLookupChunk resolves a chunk file name whose shard index is
// cached, the work behind every cold stat and open of a chunk.
func BenchmarkLookupChunk(b *testing.B) {
	dir := b.TempDir()
	zarrtest.WriteV3Store(b, dir)
	f := openFS(b, dir, keyspace.Options{})
	ctx := context.Background()
	e, err := f.Root(keyspace.V2).Lookup(ctx, "uint16_zstd_end")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.Dir.Lookup(ctx, "1.2"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Dir.Lookup(ctx, "1.2"); err != nil {
			b.Fatal(err)
		}
	}
}

// boolNested returns the v2 directory of bool_nested, which the v2 view
// transcodes (nested sharding).
func boolNested(t *testing.T, f *keyspace.FS) *keyspace.Dir {
	t.Helper()
	e, err := f.Root(keyspace.V2).Lookup(context.Background(), "bool_nested")
	if err != nil {
		t.Fatal(err)
	}
	return e.Dir
}

// boolNestedRow returns the names of three stored chunks in a row of
// bool_nested in the store at dir, in key order (listed by a key space of
// its own, which counts nothing of the caller's).
func boolNestedRow(t *testing.T, dir string) []string {
	t.Helper()
	listed := map[string]bool{}
	for e, err := range boolNested(t, openFS(t, dir, keyspace.Options{})).List(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		listed[e.Name] = true
	}
	for i := range 4 {
		if names := []string{fmt.Sprintf("%d.0", i), fmt.Sprintf("%d.1", i), fmt.Sprintf("%d.2", i)}; listed[names[0]] && listed[names[1]] && listed[names[2]] {
			return names
		}
	}
	t.Fatalf("no three stored chunks in a row of bool_nested: %v", listed)
	return nil
}

// waitAhead waits until f has read ahead at least want chunks.
func waitAhead(t *testing.T, f *keyspace.FS, want uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); f.Stats().ReadAhead < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("read ahead %d chunks, want %d", f.Stats().ReadAhead, want)
		}
	}
}

// TestReadAhead reads three transcoded chunks in key order: once the
// second follows the first, the third is transcoded in the background,
// so reading it transcodes nothing. Out of order, or with ReadAhead 0,
// nothing is read ahead.
func TestReadAhead(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	ctx := context.Background()
	// Transcoded here to blosc lz4, whose size only a transcode tells:
	// each lookup transcodes.
	lz4 := keyspace.TranscodeBloscLZ4
	lookup := func(d *keyspace.Dir, name string) {
		t.Helper()
		if _, err := d.Lookup(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	row := boolNestedRow(t, dir)
	f := openFS(t, dir, keyspace.Options{ReadAhead: 2, V2Transcode: lz4})
	d := boolNested(t, f)
	lookup(d, row[0])
	lookup(d, row[1])
	waitAhead(t, f, 1)
	before := f.Stats()
	lookup(d, row[2])
	// Reading row[2] reads further ahead in turn: every transcode from now
	// on must be one of those, none the reader's own.
	f.Close() // waits for anything read ahead
	after := f.Stats()
	if own := (after.Transcodes - before.Transcodes) - (after.ReadAhead - before.ReadAhead); own != 0 {
		t.Errorf("reading %s after %s and %s transcoded it again (%d transcodes before, %d after, %d of them read ahead)", row[2], row[0], row[1], before.Transcodes, after.Transcodes, after.ReadAhead-before.ReadAhead)
	}

	for _, c := range []struct {
		what  string
		opts  keyspace.Options
		names []string
	}{
		{"out of order", keyspace.Options{ReadAhead: 2, V2Transcode: lz4}, []string{row[1], row[0], row[2]}},
		{"read-ahead off", keyspace.Options{V2Transcode: lz4}, row},
	} {
		f := openFS(t, dir, c.opts)
		d := boolNested(t, f)
		for _, name := range c.names {
			lookup(d, name)
		}
		f.Close() // waits for anything read ahead
		if s := f.Stats(); s.ReadAhead != 0 || s.Transcodes != 3 {
			t.Errorf("%s: read ahead %d chunks and transcoded %d, want 0 and 3", c.what, s.ReadAhead, s.Transcodes)
		}
	}
}

// TestReadAheadAfterReads: chunks transcoded to a fixed size (raw, the
// default) are looked up without a transcode. Looked up in key order and
// never read, as a reader the kernel serves from the pages it keeps looks
// them up again whenever their entries expire, they are not transcoded
// ahead: nothing would read those copies, which would fill the cache (a
// 64 MiB cache read through twice peaked at 120 MiB instead of 45).
// Looked up and read one after another, they are read ahead.
func TestReadAheadAfterReads(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	ctx := context.Background()
	row := boolNestedRow(t, dir)
	opts := keyspace.Options{ReadAhead: 2}

	f := openFS(t, dir, opts)
	d := boolNested(t, f)
	for _, name := range row {
		if _, err := d.Lookup(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	f.Close() // waits for anything read ahead
	if s := f.Stats(); s.ReadAhead != 0 || s.Transcodes != 0 {
		t.Errorf("lookups alone in key order: read ahead %d chunks and transcoded %d, want 0 and 0", s.ReadAhead, s.Transcodes)
	}

	f = openFS(t, dir, opts)
	d = boolNested(t, f)
	for _, name := range row[:2] {
		e, err := d.Lookup(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.File.ReadShared(ctx, make([]byte, e.Attr.Size), 0)
		if err != nil && err != io.EOF || int64(len(b)) != e.Attr.Size {
			t.Fatalf("read %s: %d bytes of %d, %v", name, len(b), e.Attr.Size, err)
		}
		e.File.Delivered(ctx, 0, len(b))
	}
	waitAhead(t, f, 1) // row[2], after row[1] was looked up following a read
}
