package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/cache/diskcache"
	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// The test array "a": shards shards of perShard uncompressed inner
// chunks of chunkBytes uint8 each, every byte of inner chunk i equal to
// fill(i, version).
const (
	shards     = 4
	perShard   = 16
	chunkBytes = 64 << 10
	chunks     = shards * perShard
)

func fill(i, version int) byte { return byte(i*3+version*101) | 1 }

// raw and gzip are codecs of inner chunks.
var (
	raw  = []meta.Codec{{Name: "bytes", Configuration: json.RawMessage(`{}`)}}
	gzip = append(raw, meta.Codec{Name: "gzip", Configuration: json.RawMessage(`{"level":1}`)})
)

// writeArray writes array "a" at version into the directory store dir,
// its inner chunks uncompressed; skip leaves inner chunks out (fill
// values).
func writeArray(t *testing.T, dir string, version int, skip func(i int) bool) {
	t.Helper()
	writeArrayWith(t, dir, raw, version, skip)
}

// writeArrayWith writes array "a" with the inner codecs inner, creating
// it at version 0.
func writeArrayWith(t *testing.T, dir string, inner []meta.Codec, version int, skip func(i int) bool) {
	t.Helper()
	writeArrayOf(t, dir, inner, shards, perShard, version, skip)
}

// writeArrayOf writes array "a" of shards shards of per inner chunks each.
func writeArrayOf(t *testing.T, dir string, inner []meta.Codec, shards, per, version int, skip func(i int) bool) {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	m := &meta.ArrayV3{
		Shape: []int{shards * per * chunkBytes}, DataType: dtype.TypeUint8, ChunkShape: []int{per * chunkBytes},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, FillValue: []byte{0},
		Codecs: zarr.ShardedCodecs([]int{chunkBytes}, inner),
	}
	if version == 0 {
		if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := zarr.CreateArrayV3(ctx, s, "a", m); err != nil {
			t.Fatal(err)
		}
	}
	h, err := zarr.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := h.Node("a")
	data := codec.NewChunk(codec.Spec{Shape: m.Shape, Type: m.DataType, Fill: m.FillValue})
	for i := range data.Data {
		if c := i / chunkBytes; skip == nil || !skip(c) {
			data.Data[i] = fill(c, version)
		}
	}
	if err := n.Array.Write(ctx, data); err != nil {
		t.Fatal(err)
	}
}

// rangeOnly hides that a directory store opens files, so the engine reads
// chunks by ranges tied to generations, as from an object store.
type rangeOnly struct{ storetest.Store }

// open returns an engine over s and its reader of array "a".
func open(t *testing.T, s store.Store, opts engine.Options) (*engine.Engine, *engine.Array) {
	t.Helper()
	h, err := zarr.Open(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := h.Node("a")
	if !ok || n.Array == nil {
		t.Fatalf("no array a: %v", n)
	}
	e := engine.New(s, opts)
	t.Cleanup(e.Close)
	return e, e.Array(n.Array)
}

func openDir(t *testing.T, dir string) storetest.Store {
	t.Helper()
	s, err := store.OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// read locates and reads inner chunk i as a reader does.
func read(t *testing.T, a *engine.Array, i int, fresh bool) (engine.Location, []byte, error) {
	t.Helper()
	ctx := context.Background()
	loc, ok, err := a.Locate(ctx, []int{i}, fresh)
	if err != nil || !ok {
		return loc, nil, errors.Join(err, errors.New("not stored"))
	}
	a.Touched(loc)
	b, err := a.ReadStored(ctx, loc)
	return loc, b, err
}

func isChunk(b []byte, i, version int) bool {
	return len(b) == chunkBytes && bytes.Count(b, []byte{fill(i, version)}) == chunkBytes
}

// TestLocateNamesTheGeneration: every location names the generation of
// the shard its index was read from; the bytes read for a location of a
// shard replaced since are that generation's or ErrStale, never the new
// shard's bytes at the old layout's offsets; a fresh locate finds the new
// generation and its bytes. By ranges and from open shard files alike.
func TestLocateNamesTheGeneration(t *testing.T) {
	for _, byRange := range []bool{true, false} {
		dir := t.TempDir()
		writeArray(t, dir, 0, nil)
		d := openDir(t, dir)
		var s store.Store = d
		if byRange {
			s = rangeOnly{d}
		}
		_, a := open(t, s, engine.Options{Revalidate: time.Hour})
		ctx := context.Background()
		loc, b, err := read(t, a, 5, false)
		if err != nil || !isChunk(b, 5, 0) {
			t.Fatalf("by range %v: chunk 5: %v", byRange, err)
		}
		info, err := s.Stat(ctx, loc.Key)
		if err != nil || loc.Gen != info.Generation || loc.Key != "a/c/0" || loc.Size != info.Size {
			t.Fatalf("by range %v: location %+v, store %+v %v", byRange, loc, info, err)
		}

		// Replaced outside the engine, with chunk 4 left out: the
		// chunks after it move to other offsets.
		writeArray(t, dir, 1, func(i int) bool { return i == 4 })
		moved, _, _ := a.Locate(ctx, []int{6}, false) // cached index, old generation
		if b, err := a.ReadStored(ctx, moved); !errors.Is(err, engine.ErrStale) && (err != nil || !isChunk(b, 6, 0)) {
			t.Errorf("by range %v: chunk 6 read at its old location after the shard changed: %v, bytes of its old generation %v; want those or ErrStale", byRange, err, isChunk(b, 6, 0))
		}
		loc, b, err = read(t, a, 6, true)
		if err != nil || loc.Gen == moved.Gen || !isChunk(b, 6, 1) {
			t.Errorf("by range %v: chunk 6 located fresh: generation %q (old %q), new bytes %v, %v", byRange, loc.Gen, moved.Gen, isChunk(b, 6, 1), err)
		}
		if _, ok, err := a.Locate(ctx, []int{4}, false); ok || err != nil {
			t.Errorf("by range %v: chunk 4, left out of the new shard: stored %v, %v", byRange, ok, err)
		}
	}
}

// TestRewrittenDropsTheIndex: a shard this process rewrote is located in
// its new index at once, within the revalidation interval; only objects
// rewritten have a rewrite counter, however many are read.
func TestRewrittenDropsTheIndex(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	e, a := open(t, rangeOnly{openDir(t, dir)}, engine.Options{Revalidate: time.Hour})
	for i := range chunks {
		if _, b, err := read(t, a, i, false); err != nil || !isChunk(b, i, 0) {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	if n := engine.RewriteCounters(e); n != 0 {
		t.Errorf("reading every chunk left %d rewrite counters; only rewritten objects have one", n)
	}
	writeArray(t, dir, 1, nil)
	if _, b, err := read(t, a, 20, false); err != nil || !isChunk(b, 20, 0) {
		t.Fatalf("chunk 20 within the interval: %v, want the cached old bytes", err)
	}
	e.Rewritten("a/c/1")
	if _, b, err := read(t, a, 20, false); err != nil || !isChunk(b, 20, 1) {
		t.Errorf("chunk 20 of a shard this process rewrote: %v, new bytes %v", err, isChunk(b, 20, 1))
	}
	if n := engine.RewriteCounters(e); n != 1 {
		t.Errorf("%d rewrite counters for one rewritten shard", n)
	}
}

// TestCoalescedReads: a reader reading a store by ranges chunk after
// chunk fetches runs of chunks with one request (each byte once), and one
// reading at random fetches little more than it reads.
func TestCoalescedReads(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	e, a := open(t, rangeOnly{openDir(t, dir)}, engine.Options{Revalidate: time.Hour})
	for i := range chunks {
		if _, b, err := read(t, a, i, false); err != nil || !isChunk(b, i, 0) {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	st := e.Stats()
	t.Logf("in order: %+v", st)
	if st.RangeReads >= chunks/2 || st.Coalesced == 0 || st.FetchedBytes != chunks*chunkBytes || st.IndexLoads != shards {
		t.Errorf("%d chunks read in order: %d range reads, %d coalesced, %d bytes fetched, %d indexes loaded", chunks, st.RangeReads, st.Coalesced, st.FetchedBytes, st.IndexLoads)
	}

	e, a = open(t, rangeOnly{openDir(t, dir)}, engine.Options{Revalidate: time.Hour})
	rng := rand.New(rand.NewPCG(28, 1))
	needed := map[int]bool{}
	for range chunks / 4 {
		i := rng.IntN(chunks)
		needed[i] = true
		if _, b, err := read(t, a, i, false); err != nil || !isChunk(b, i, 0) {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	st = e.Stats()
	t.Logf("at random: %+v", st)
	if need := uint64(len(needed) * chunkBytes); st.FetchedBytes > 2*need {
		t.Errorf("fetched %d bytes for %d needed at random: more than twice", st.FetchedBytes, need)
	}
}

// TestStoredLists: the stored chunks are listed from the shard indexes:
// those left out of a shard and shards missing are not.
func TestStoredLists(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	empty := func(i int) bool { return i%5 == 0 || i/perShard == 2 } // shard 2 all fill: not stored
	writeArray(t, dir, 1, empty)
	for _, s := range []store.Store{openDir(t, dir), rangeOnly{openDir(t, dir)}} {
		_, a := open(t, s, engine.Options{})
		var got []int
		for c, err := range a.Stored(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, c[0])
		}
		slices.Sort(got)
		var want []int
		for i := range chunks {
			if !empty(i) {
				want = append(want, i)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("stored chunks %v, want %v", got, want)
		}
	}
}

// TestHugeIndexEntry: an index entry (its checksum right) that claims a
// chunk larger than any chunk of the array encodes to (a compressed
// chunk, here the shard's last, claiming 2 MiB of it) is corrupt data
// named by the shard's key: nothing that large is read whole, on either
// kind of store.
func TestHugeIndexEntry(t *testing.T) {
	dir := t.TempDir()
	writeArrayWith(t, dir, gzip, 0, nil)
	path := filepath.Join(dir, "a", "c", "0")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The index ends the shard: (offset, nbytes) per chunk, then crc32c.
	index := b[len(b)-16*perShard-4:]
	const claim = 2 << 20 // over 2x the chunk's size + 1 MiB (codec.Pipeline.MaxEncodedSize)
	b = append(b[:len(b)-16*perShard-4], append(make([]byte, claim), index...)...)
	index = b[len(b)-16*perShard-4:]
	binary.LittleEndian.PutUint64(index[16*(perShard-1)+8:], claim)
	binary.LittleEndian.PutUint32(index[16*perShard:], crc32.Checksum(index[:16*perShard], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range []store.Store{openDir(t, dir), rangeOnly{openDir(t, dir)}} {
		_, a := open(t, s, engine.Options{})
		_, _, err := read(t, a, perShard-1, false)
		if !errors.Is(err, engine.ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("a/c/0")) {
			t.Errorf("the last chunk of the shard, claiming %d bytes: %v, want ErrCorrupt naming a/c/0", claim, err)
		}
		if _, b, err := read(t, a, 2, false); err != nil || len(b) == 0 || len(b) > chunkBytes {
			t.Errorf("chunk 2 of the same shard: %d bytes, %v", len(b), err)
		}
	}
}

// TestDiskIndexOfOtherMetadata: a shard index kept on disk by a mount of
// other metadata (the index at the end of the shard, where it is) is not
// used by one whose array has it at the start, though the shard is at the
// same generation: that mount reads what it would read without a disk
// cache.
func TestDiskIndexOfOtherMetadata(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	dc, err := diskcache.Open(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	_, a := open(t, rangeOnly{openDir(t, dir)}, engine.Options{Revalidate: time.Hour, DiskCache: dc})
	if _, b, err := read(t, a, 0, false); err != nil || !isChunk(b, 0, 0) {
		t.Fatalf("chunk 0: %v", err)
	}
	moveIndexToStart(t, dir)
	_, without := open(t, rangeOnly{openDir(t, dir)}, engine.Options{Revalidate: time.Hour})
	_, want, wantErr := read(t, without, 0, false)
	_, with := open(t, rangeOnly{openDir(t, dir)}, engine.Options{Revalidate: time.Hour, DiskCache: dc})
	_, got, err := read(t, with, 0, false)
	if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
		t.Errorf("chunk 0 with the index at the start: %d bytes, %v through the disk cache; %d bytes, %v without", len(got), err, len(want), wantErr)
	}
}

// moveIndexToStart rewrites the metadata of the array writeArray wrote in
// dir so that its shards' indexes are read at their start: the same key
// and shards, other metadata.
func moveIndexToStart(t *testing.T, dir string) {
	t.Helper()
	doc := filepath.Join(dir, "a", "zarr.json")
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	moved := regexp.MustCompile(`("index_location":\s*)"end"`).ReplaceAll(b, []byte(`$1"start"`))
	if bytes.Equal(moved, b) {
		t.Fatalf("no index_location in %s", b)
	}
	if err := os.WriteFile(doc, moved, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStateOfOtherMetadata: what an engine keeps in memory of a shard,
// read by an array whose index is at the end of its shards, is not used
// by a reader of the same engine whose array (the same key, of metadata
// changed since) has it at the start, though the shard is at the same
// generation: that reader reads what a fresh engine would.
func TestStateOfOtherMetadata(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	s := rangeOnly{openDir(t, dir)}
	e, a := open(t, s, engine.Options{Revalidate: time.Hour})
	if _, b, err := read(t, a, 0, false); err != nil || !isChunk(b, 0, 0) {
		t.Fatalf("chunk 0: %v", err)
	}
	moveIndexToStart(t, dir)
	_, fresh := open(t, rangeOnly{openDir(t, dir)}, engine.Options{Revalidate: time.Hour})
	_, want, wantErr := read(t, fresh, 0, false)
	h, err := zarr.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := h.Node("a")
	_, got, err := read(t, e.Array(n.Array), 0, false)
	if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
		t.Errorf("chunk 0 with the index at the start: %d bytes, %v from the engine that read it at the end; %d bytes, %v from a fresh one", len(got), err, len(want), wantErr)
	}
}
