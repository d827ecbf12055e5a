package writeback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// countingStore is a real directory store that counts locked updates.
type countingStore struct {
	*store.Dir
	updates atomic.Int32
}

func (c *countingStore) Update(ctx context.Context, key string, fn func(store.Object) (store.Change, error)) error {
	c.updates.Add(1)
	return c.Dir.Update(ctx, key, fn)
}

// newArray creates a 2-D uint16 array of 16x16 in 8x8 shards of 2x2 inner
// chunks (16 inner chunks per shard) with the given inner codecs.
func newArray(t testing.TB, dir string, inner []meta.Codec) (*zarr.Hierarchy, *zarr.Array) {
	t.Helper()
	ctx := context.Background()
	s, err := store.OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Stat(ctx, "a/zarr.json"); errors.Is(err, store.ErrNotFound) {
		m := &meta.ArrayV3{Shape: []int{16, 16}, DataType: dtype.TypeUint16, ChunkShape: []int{8, 8},
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, FillValue: []byte{0, 0},
			Codecs: zarr.ShardedCodecs([]int{2, 2}, inner)}
		if _, err := zarr.CreateArrayV3(ctx, s, "a", m); err != nil {
			t.Fatal(err)
		}
	}
	h, err := zarr.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := h.Node("a")
	return h, n.Array
}

// innerChunk encodes a 2x2 chunk whose four elements are v.
func innerChunk(t testing.TB, a *zarr.Array, v uint16) []byte {
	t.Helper()
	c := codec.NewChunk(a.Sharding().Inner().Spec())
	for i := 0; i < len(c.Data); i += 2 {
		c.Data[i], c.Data[i+1] = byte(v), byte(v>>8)
	}
	b, err := a.Sharding().Inner().Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readValue returns the value of the inner chunk at inner coordinates, read
// from the store by the array reader (0 when empty).
func readValue(t testing.TB, a *zarr.Array, coords []int) uint16 {
	t.Helper()
	c, err := a.ReadRegion(context.Background(), []int{coords[0] * 2, coords[1] * 2}, []int{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	return uint16(c.Data[0]) | uint16(c.Data[1])<<8
}

var zstdInner = []meta.Codec{zarrtest.BytesLE, zarrtest.Zstd}

func TestOneRewritePerShard(t *testing.T) {
	dir := t.TempDir()
	_, a := newArray(t, dir, zstdInner)
	cs := &countingStore{Dir: openStore(t, dir)}
	// No publish can fall between the puts: the shard is published when
	// its last inner chunk completes it.
	w, err := New(cs, testJournalRoot(t, dir), Options{IdleDelay: time.Hour, MaxDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Every inner chunk of shard (0,0), one by one.
	for i := 0; i < 4; i++ {
		for j := 0; j < 4; j++ {
			if err := w.Put(ctx, a, []int{i, j}, innerChunk(t, a, uint16(10*i+j+1))); err != nil {
				t.Fatal(err)
			}
			if p, ok := w.Lookup(a, []int{i, j}); !ok || len(p.Data) == 0 {
				t.Fatal("a pending update is not visible")
			}
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := cs.updates.Load(); n != 1 {
		t.Fatalf("%d shard rewrites for 16 inner chunks of one shard, want 1", n)
	}
	for i := 0; i < 4; i++ {
		for j := 0; j < 4; j++ {
			if v := readValue(t, a, []int{i, j}); v != uint16(10*i+j+1) {
				t.Fatalf("inner chunk (%d,%d) = %d", i, j, v)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".zarrfs", "journal")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(dir, ".zarrfs", "journal"))
		if len(entries) != 0 {
			t.Fatalf("a closed writer left its journal: %v", entries)
		}
	}
}

func openStore(t testing.TB, dir string) *store.Dir {
	t.Helper()
	s, err := store.OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestInPlaceAndDelete(t *testing.T) {
	dir := t.TempDir()
	_, a := newArray(t, dir, []meta.Codec{zarrtest.BytesLE})
	ctx := context.Background()
	s := openStore(t, dir)
	w, err := New(s, testJournalRoot(t, dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	w.Put(ctx, a, []int{0, 0}, innerChunk(t, a, 1))
	w.Put(ctx, a, []int{0, 1}, innerChunk(t, a, 2))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	shard := filepath.Join(dir, "a", "c", "0", "0")
	before, err := os.Stat(shard)
	if err != nil {
		t.Fatal(err)
	}
	w.Put(ctx, a, []int{0, 1}, innerChunk(t, a, 7))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(shard)
	if !os.SameFile(before, after) || after.Size() != before.Size() {
		t.Fatal("replacing a fixed-size uncompressed inner chunk rewrote the shard instead of patching it")
	}
	if v := readValue(t, a, []int{0, 1}); v != 7 {
		t.Fatalf("after the in-place update: %d", v)
	}
	w.Delete(ctx, a, []int{0, 0})
	w.Delete(ctx, a, []int{0, 1})
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(shard); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a shard left without inner chunks still exists: %v", err)
	}
}

func TestRefusesToRewriteCorruptShard(t *testing.T) {
	dir := t.TempDir()
	_, a := newArray(t, dir, zstdInner)
	ctx := context.Background()
	s := openStore(t, dir)
	w, err := New(s, testJournalRoot(t, dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Put(ctx, a, []int{0, 0}, innerChunk(t, a, 1))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	shard := filepath.Join(dir, "a", "c", "0", "0")
	b, _ := os.ReadFile(shard)
	b[len(b)-6] ^= 1
	os.WriteFile(shard, b, 0o644)
	w.Put(ctx, a, []int{0, 1}, innerChunk(t, a, 2))
	if err := w.Flush(ctx); err == nil {
		t.Fatal("publishing into a shard with a corrupt index succeeded")
	}
	if got, _ := os.ReadFile(shard); !bytes.Equal(got, b) {
		t.Fatal("the corrupt shard was changed")
	}
	if err := w.Close(ctx); err == nil {
		t.Fatal("Close reported no unpublished updates")
	}
}

// TestWriterHelperProcess runs the writer in another process for the crash
// and concurrency tests: ZARRFS_WB_MODE=crash puts chunks and dies without
// publishing; ZARRFS_WB_MODE=published publishes one chunk, leaves another
// pending and dies; ZARRFS_WB_MODE=column writes one column of every shard.
func TestWriterHelperProcess(t *testing.T) {
	mode := os.Getenv("ZARRFS_WB_MODE")
	if mode == "" {
		return
	}
	dir := os.Getenv("ZARRFS_WB_DIR")
	_, a := newArray(t, dir, zstdInner)
	ctx := context.Background()
	s, _ := store.OpenDir(dir, false)
	opts := Options{IdleDelay: 20 * time.Millisecond, MaxDelay: 50 * time.Millisecond}
	if mode != "column" { // nothing may be published but what it flushes
		opts = Options{IdleDelay: time.Hour, MaxDelay: time.Hour}
	}
	w, err := New(s, testJournalRoot(t, dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "crash":
		for i := 0; i < 8; i++ {
			if err := w.Put(ctx, a, []int{i, i}, innerChunk(t, a, uint16(100+i))); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Println("acknowledged")
		os.Exit(0) // dies without publishing or closing
	case "published":
		// Inner chunk (4,4) of shard (1,1) stays pending, so the journal
		// keeps the published record of (0,0) of shard (0,0) too.
		if err := w.Put(ctx, a, []int{4, 4}, innerChunk(t, a, 101)); err != nil {
			t.Fatal(err)
		}
		if err := w.Put(ctx, a, []int{0, 0}, innerChunk(t, a, 100)); err != nil {
			t.Fatal(err)
		}
		if err := w.publish(ctx, a.ChunkKey([]int{0, 0})); err != nil {
			t.Fatal(err)
		}
		fmt.Println("acknowledged")
		os.Exit(0)
	case "column":
		col, _ := strconv.Atoi(os.Getenv("ZARRFS_WB_COLUMN"))
		for round := 0; round < 5; round++ {
			for i := 0; i < 8; i++ {
				if err := w.Put(ctx, a, []int{i, col}, innerChunk(t, a, uint16(1000*round+10*i+col))); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func helper(t *testing.T, dir string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriterHelperProcess$")
	cmd.Env = append(append(os.Environ(), "ZARRFS_WB_DIR="+dir), env...)
	return cmd
}

func TestRecoverAfterCrash(t *testing.T) {
	dir := t.TempDir()
	h, a := newArray(t, dir, zstdInner)
	out, err := helper(t, dir, "ZARRFS_WB_MODE=crash").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("acknowledged")) {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	// Nothing is published yet; a torn record at the end is ignored.
	journals, _ := filepath.Glob(filepath.Join(dir, ".zarrfs", "journal", "*", "*.wal"))
	if len(journals) != 1 {
		t.Fatalf("journal segments: %v", journals)
	}
	f, _ := os.OpenFile(journals[0], os.O_APPEND|os.O_WRONLY, 0)
	f.Write(encodeRecord(Record{Array: "a", Shard: "a/c/0/0", Chunk: 5, Data: []byte("torn")})[:20])
	f.Close()
	n, err := Recover(context.Background(), h, testJournalRoot(t, dir), slog.New(slog.DiscardHandler))
	if err != nil || n != 8 {
		t.Fatalf("Recover = %d, %v; want 8 records", n, err)
	}
	for i := 0; i < 8; i++ {
		if v := readValue(t, a, []int{i, i}); v != uint16(100+i) {
			t.Fatalf("inner chunk (%d,%d) = %d after recovery, want %d", i, i, v, 100+i)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, ".zarrfs", "journal")); len(entries) != 0 {
		t.Fatalf("replayed journals left behind: %v", entries)
	}
	if n, err := Recover(context.Background(), h, testJournalRoot(t, dir), slog.New(slog.DiscardHandler)); n != 0 || err != nil {
		t.Fatalf("second Recover = %d, %v", n, err)
	}
}

// TestRecoverSkipsPublished: a journal's published records are not
// replayed, so a writer that died cannot undo what another writer put in
// their chunks after they were published.
func TestRecoverSkipsPublished(t *testing.T) {
	dir := t.TempDir()
	h, a := newArray(t, dir, zstdInner)
	out, err := helper(t, dir, "ZARRFS_WB_MODE=published").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("acknowledged")) {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	ctx := context.Background()
	w, err := New(openStore(t, dir), testJournalRoot(t, dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put(ctx, a, []int{0, 0}, innerChunk(t, a, 200)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := Recover(ctx, h, testJournalRoot(t, dir), slog.New(slog.DiscardHandler))
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want the 1 unpublished record", n, err)
	}
	if v := readValue(t, a, []int{0, 0}); v != 200 {
		t.Errorf("inner chunk (0,0) = %d after recovery: the dead writer's published record undid the later write of 200", v)
	}
	if v := readValue(t, a, []int{4, 4}); v != 101 {
		t.Errorf("inner chunk (4,4) = %d after recovery, want the unpublished 101", v)
	}
}

// TestTwoProcessesLoseNothing has two processes and this one write disjoint
// columns of inner chunks that share every shard, each publishing often.
func TestTwoProcessesLoseNothing(t *testing.T) {
	dir := t.TempDir()
	_, a := newArray(t, dir, zstdInner)
	var procs []*exec.Cmd
	for col := 0; col < 2; col++ {
		cmd := helper(t, dir, "ZARRFS_WB_MODE=column", "ZARRFS_WB_COLUMN="+strconv.Itoa(col))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	ctx := context.Background()
	w, err := New(openStore(t, dir), testJournalRoot(t, dir), Options{IdleDelay: 20 * time.Millisecond, MaxDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 5; round++ {
		for i := 0; i < 8; i++ {
			for _, col := range []int{4, 5} { // shards (i/4, 1) hold columns 4 and 5; (i/4, 0) the helpers'
				w.Put(ctx, a, []int{i, col}, innerChunk(t, a, uint16(1000*round+10*i+col)))
			}
			w.Put(ctx, a, []int{i, 2}, innerChunk(t, a, uint16(1000*round+10*i+2)))
			time.Sleep(time.Millisecond)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	for i := 0; i < 8; i++ {
		for _, col := range []int{0, 1, 2, 4, 5} {
			if v, want := readValue(t, a, []int{i, col}), uint16(4000+10*i+col); v != want {
				t.Errorf("inner chunk (%d,%d) = %d, want %d: an update was lost", i, col, v, want)
			}
		}
	}
}

// FuzzDecodeRecord: any bytes must decode (to an entry that encodes to the
// same bytes) or be rejected, never panic.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(Record{Array: "a/b", Shard: "a/b/c/0", Chunk: 3, Data: []byte("payload")}))
	f.Add(encodeRecord(Record{Array: "", Shard: "x", Delete: true}))
	f.Add(encodeMarker([]Pos{{1, 0}, {2, 4096}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, err := decodeEntry(b)
		if err == nil {
			if n > len(b) {
				t.Fatalf("consumed %d of %d bytes", n, len(b))
			}
			again := e.encode()
			if !bytes.Equal(again, b[:n]) {
				t.Fatalf("re-encoding differs")
			}
		}
	})
}

// encodeRecord and encodeMarker frame entries as the journal writes them,
// in one piece.
func encodeRecord(r Record) []byte { return bytes.Join(recordParts(r), nil) }
func encodeMarker(ps []Pos) []byte { return bytes.Join(markerParts(ps), nil) }

// encode frames the entry again.
func (e entry) encode() []byte {
	if e.marker() {
		return encodeMarker(e.published)
	}
	return encodeRecord(e.Record)
}

// testJournalRoot opens the journal directory of the store at dir, as a
// read-write mount does.
func testJournalRoot(t *testing.T, dir string) *JournalRoot {
	t.Helper()
	r, err := LocalJournalRoot(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestQuietArray: a shard is published once its array, not only the
// shard, has gone quiet, so a writer that goes through the shards in turn
// (cp -r listing chunk files in no particular order) rewrites each shard
// once, not once per visit.
func TestQuietArray(t *testing.T) {
	dir := t.TempDir()
	_, a := newArray(t, dir, zstdInner)
	idle := time.Hour // the publisher never finds a shard quiet by itself
	w, err := New(openStore(t, dir), testJournalRoot(t, dir), Options{IdleDelay: idle, MaxDelay: 10 * idle})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	ctx := context.Background()
	if err := w.Put(ctx, a, []int{0, 0}, innerChunk(t, a, 1)); err != nil { // shard (0,0)
		t.Fatal(err)
	}
	if err := w.Put(ctx, a, []int{0, 4}, innerChunk(t, a, 2)); err != nil { // shard (0,1), later
		t.Fatal(err)
	}
	w.mu.Lock()
	last := w.shards[a.ChunkKey([]int{0, 1})].last
	w.mu.Unlock()
	if due := w.due(last.Add(idle - time.Nanosecond)); len(due) != 0 {
		t.Fatalf("due while their array is still being written: %v", due)
	}
	want := []string{a.ChunkKey([]int{0, 0}), a.ChunkKey([]int{0, 1})}
	if due := w.due(last.Add(idle)); !slices.Equal(due, want) {
		t.Fatalf("due once the array went quiet: %v, want %v", due, want)
	}
}

// TestReliefInBackground: past 3/4 of MaxPendingBytes the shard holding
// the most is published in the background, before the budget makes a
// writer wait for a publish; the others stay pending.
func TestReliefInBackground(t *testing.T) {
	dir := t.TempDir()
	_, a := newArray(t, dir, []meta.Codec{zarrtest.BytesLE})
	size := int64(len(innerChunk(t, a, 0)))
	// 7 chunks: past the relief mark (6), within the budget (8).
	w, err := New(openStore(t, dir), testJournalRoot(t, dir), Options{IdleDelay: time.Hour, MaxDelay: time.Hour, MaxPendingBytes: 8 * size})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	ctx := context.Background()
	for j := range 4 { // shard (0,0)
		if err := w.Put(ctx, a, []int{0, j}, innerChunk(t, a, uint16(j+1))); err != nil {
			t.Fatal(err)
		}
	}
	for j := 4; j < 7; j++ { // shard (0,1)
		if err := w.Put(ctx, a, []int{0, j}, innerChunk(t, a, uint16(j+1))); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); w.Unpublished() != 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d updates unpublished 30 s after %d of %d pending bytes, want the 3 of the smaller shard", w.Unpublished(), 7*size, 8*size)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(a.ChunkKey([]int{0, 0})))); err != nil {
		t.Fatalf("the larger shard was not published: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(a.ChunkKey([]int{0, 1})))); err == nil {
		t.Fatal("the smaller shard was published too")
	}
}
