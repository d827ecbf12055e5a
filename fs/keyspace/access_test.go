package keyspace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
)

// The access-pattern array: 16 shards of 64 uncompressed inner chunks of
// 64 KiB (1024 chunk files, c/0 … c/1023), in a real S3 server.
const (
	accessShards   = 16
	accessPerShard = 64
	accessChunk    = 64 << 10
	accessChunks   = accessShards * accessPerShard
)

// writeAccessStore writes the access-pattern array into dir.
func writeAccessStore(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	s, err := store.OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	m := &meta.ArrayV3{
		Shape: []int{accessChunks * accessChunk}, DataType: dtype.TypeUint8, ChunkShape: []int{accessPerShard * accessChunk},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, FillValue: []byte{0},
		Codecs: zarr.ShardedCodecs([]int{accessChunk}, []meta.Codec{{Name: "bytes", Configuration: json.RawMessage(`{}`)}}),
	}
	a, err := zarr.CreateArrayV3(ctx, s, "a", m)
	if err != nil {
		t.Fatal(err)
	}
	data := codec.NewChunk(codec.Spec{Shape: m.Shape, Type: m.DataType, Fill: m.FillValue})
	for i := range data.Data {
		data.Data[i] = byte(i/7+i/accessChunk) | 1 // never the fill value
	}
	if err := a.Write(ctx, data); err != nil {
		t.Fatal(err)
	}
}

// accessFS serves the access-pattern array from a real S3 server, read by
// ranges, as a read-only mount does; srv is the server, dir the store
// uploaded.
func accessFS(t *testing.T, opts keyspace.Options) (*keyspace.FS, *s3test.Server, string) {
	t.Helper()
	dir := t.TempDir()
	writeAccessStore(t, dir)
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	srv.Upload(t, dir, "zarr", "store")
	return openFSOver(t, srv.Open(t, "zarr", "store", true), opts), srv, dir
}

// readAccessChunk reads chunk file c/i of the v3 view as the read-only
// mount's READ does (ReadAt: located with the cached index).
func readAccessChunk(t *testing.T, c *keyspace.Dir, i int) []byte {
	t.Helper()
	ctx := context.Background()
	e, err := c.Lookup(ctx, strconv.Itoa(i))
	if err != nil || e.File == nil {
		t.Errorf("lookup c/%d: %v", i, err)
		return nil
	}
	b := make([]byte, e.Attr.Size)
	if n, err := e.File.ReadAt(ctx, b, 0); n != len(b) || err != nil {
		t.Errorf("read c/%d: %d bytes of %d, %v", i, n, len(b), err)
	}
	return b
}

func requestDelta(before, after keyspace.Stats) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range after.Requests {
		if v != before.Requests[k] {
			d[k] = v - before.Requests[k]
		}
	}
	return d
}

// TestRandomChunksFetchWhatTheyNeed: 200 random chunks of the 1024 read
// one at a time fetch at most twice the bytes they need: a shard read
// once in a while fetches its chunk alone, not the run around it.
func TestRandomChunksFetchWhatTheyNeed(t *testing.T) {
	// No checks past the interval: what is counted is the reads' own.
	f, _, _ := accessFS(t, keyspace.Options{FetchAhead: true, Revalidate: time.Hour})
	c := lookupDir(t, lookupDir(t, f.Root(keyspace.V3), "a"), "c")
	before := f.Stats()
	rng := rand.New(rand.NewPCG(30, 1))
	needed := map[int]bool{}
	for range 200 {
		i := rng.IntN(accessChunks)
		needed[i] = true
		readAccessChunk(t, c, i)
	}
	st := f.Stats()
	got := requestDelta(before, st)
	need := uint64(len(needed) * accessChunk)
	t.Logf("200 random reads (%d chunks, %d KiB): %v; %d KiB of chunks fetched, %d KiB served",
		len(needed), need>>10, got, st.FetchedBytes>>10, st.Served.PassThroughBytes>>10)
	if got["bytes fetched"] > 2*need {
		t.Errorf("fetched %d KiB for %d KiB needed: more than twice", got["bytes fetched"]>>10, need>>10)
	}
	if got["suffix GET"] > accessShards {
		t.Errorf("%d index GETs for %d shards", got["suffix GET"], accessShards)
	}
}

// TestDenseConcurrentReadsReadAhead: four readers read the whole array
// at once, out of key order (every fourth chunk, then the ones after
// them, as a reader pool handed them out of order would; no chunk is read
// right after the one before it in key order). Each shard, read densely,
// is fetched ahead of them: fewer data GETs than chunks, chunks fetched
// ahead, no byte fetched twice, one index GET per shard, and the chunks
// of the shard read last are worth pushing to the kernel.
func TestDenseConcurrentReadsReadAhead(t *testing.T) {
	f, _, _ := accessFS(t, keyspace.Options{FetchAhead: true, Revalidate: time.Hour})
	c := lookupDir(t, lookupDir(t, f.Root(keyspace.V3), "a"), "c")
	before := f.Stats()
	order := make(chan int, accessChunks)
	for pass := range 4 {
		for i := pass; i < accessChunks; i += 4 {
			order <- i
		}
	}
	close(order)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range order {
				readAccessChunk(t, c, i)
			}
		})
	}
	wg.Wait()
	st := f.Stats()
	got := requestDelta(before, st)
	stored := uint64(accessChunks * accessChunk)
	t.Logf("whole array by 4 readers out of order: %v; %d chunks fetched ahead, %d KiB of chunks fetched, %d KiB served",
		got, st.ReadAhead, st.FetchedBytes>>10, st.Served.PassThroughBytes>>10)
	if got["suffix GET"] != accessShards {
		t.Errorf("%d index GETs for %d shards, want one each", got["suffix GET"], accessShards)
	}
	if got["ranged GET"] >= accessChunks {
		t.Errorf("%d data GETs for %d chunks", got["ranged GET"], accessChunks)
	}
	if st.ReadAhead == 0 {
		t.Errorf("no chunk was fetched ahead of the readers")
	}
	if idx := uint64(accessShards * (accessPerShard*16 + 4)); got["bytes fetched"] > stored+idx {
		t.Errorf("fetched %d bytes for %d stored (and %d of indexes): some twice", got["bytes fetched"], stored, idx)
	}
	if st.FetchedBytes != stored || st.Served.PassThroughBytes != stored {
		t.Errorf("stats: %d chunk bytes fetched, %d served; want %d each", st.FetchedBytes, st.Served.PassThroughBytes, stored)
	}
	e, err := c.Lookup(context.Background(), strconv.Itoa(accessChunks-accessPerShard))
	if err != nil {
		t.Fatal(err)
	}
	if !e.File.(*keyspace.Chunk).Upcoming() {
		t.Errorf("the first chunk of the shard read last, cached, is not worth pushing to the kernel")
	}
}

// TestRevalidationRidesOnReads: the ranged reads of a shard's chunks are
// tied to its generation, so each one that answers confirms the shard's
// index for another revalidation interval: readers of a shard whose
// chunks are being fetched send no checks of its index. A shard replaced
// meanwhile is still seen, by the next fetch and by the check of a chunk
// cached before.
func TestRevalidationRidesOnReads(t *testing.T) {
	// Sleeps of 60% of the interval leave 40% (1.2 s) for the reads
	// between two of them on a loaded machine.
	const revalidate = 3 * time.Second
	f, srv, dir := accessFS(t, keyspace.Options{FetchAhead: true, Revalidate: revalidate})
	c := lookupDir(t, lookupDir(t, f.Root(keyspace.V3), "a"), "c")
	first := readAccessChunk(t, c, 0)
	time.Sleep(revalidate * 6 / 10)
	readAccessChunk(t, c, 40) // fetched: the index is confirmed
	time.Sleep(revalidate * 6 / 10)
	before := f.Stats()
	readAccessChunk(t, c, 0) // cached, its shard's index confirmed by the fetch of c/40
	got := requestDelta(before, f.Stats())
	t.Logf("reading c/0 again, an interval after its shard's index was read and less after c/40 was fetched: %v", got)
	if len(got) != 0 {
		t.Errorf("it sent %v; want nothing", got)
	}

	// Shard c/0 replaced by one of other bytes, at the same offsets (the
	// chunks' bytes flipped, the index kept).
	replacement, err := os.ReadFile(filepath.Join(dir, "a", "c", "0"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range accessPerShard * accessChunk {
		replacement[i] ^= 0x80
	}
	if _, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("zarr"), Key: aws.String("store/a/c/0"), Body: bytes.NewReader(replacement)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(revalidate + revalidate/10)
	newChunk := func(i int) []byte {
		return replacement[i*accessChunk : (i+1)*accessChunk]
	}
	if got := readAccessChunk(t, c, 50); !bytes.Equal(got, newChunk(50)) {
		t.Errorf("c/50, fetched after the shard was replaced: not the new shard's bytes")
	}
	if got := readAccessChunk(t, c, 0); !bytes.Equal(got, newChunk(0)) || bytes.Equal(got, first) {
		t.Errorf("c/0, cached before the shard was replaced: not the new shard's bytes")
	}
}

// waitFor polls the FS's stats until done says so, for up to 20 s (what is
// awaited runs in the background), and returns the last stats.
func waitFor(f *keyspace.FS, done func(keyspace.Stats) bool) keyspace.Stats {
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := f.Stats()
		if done(st) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLookupsLoadIndexesAhead: a reader that looks up chunk files of two
// shards of an array of a few shards (a random reader, or node's readFile
// of many files at once opening them all first) has the indexes of all
// the others loaded in the background, instead of one round trip after
// another on its path: looking up their chunks then sends nothing. When
// the indexes do not fit in a sixteenth of the cache, a reader that looked
// up chunks of two consecutive shards has the next 8 shards' loaded.
func TestLookupsLoadIndexesAhead(t *testing.T) {
	for _, c := range []struct {
		name       string
		cacheBytes int64 // 0: the default
		shards     []int // looked up
		ahead      int   // the indexes then loaded in the background
	}{
		{"all shards", 0, []int{0, 5}, accessShards - 2},
		{"the next shards", 256 << 10, []int{0, 1}, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, _, _ := accessFS(t, keyspace.Options{FetchAhead: true, Revalidate: time.Hour, CacheBytes: c.cacheBytes})
			dir := lookupDir(t, lookupDir(t, f.Root(keyspace.V3), "a"), "c")
			ctx := context.Background()
			before := f.Stats()
			for _, s := range c.shards {
				for _, i := range []int{s * accessPerShard, s*accessPerShard + 1} {
					if _, err := dir.Lookup(ctx, strconv.Itoa(i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := uint64(len(c.shards) + c.ahead)
			st := waitFor(f, func(st keyspace.Stats) bool { return requestDelta(before, st)["suffix GET"] >= want })
			if got := requestDelta(before, st)["suffix GET"]; got != want {
				t.Fatalf("%d index GETs after looking up chunks of shards %v; want %d (those and %d more)", got, c.shards, want, c.ahead)
			}
			before = st
			last := c.shards[len(c.shards)-1]
			for s := range accessShards {
				if s == c.shards[0] || s > last+c.ahead {
					continue
				}
				for _, i := range []int{s * accessPerShard, (s+1)*accessPerShard - 1} {
					if _, err := dir.Lookup(ctx, strconv.Itoa(i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := requestDelta(before, f.Stats()); len(got) != 0 {
				t.Errorf("looking up chunks of the shards loaded sent %v; want nothing", got)
			}
		})
	}
}

// TestDenseArrayFetchesFollowingShards: readers reading the chunks of two
// consecutive shards densely, out of order, read the array densely in key
// order: the shards after them are fetched ahead (as many as fit in a
// quarter of the cache) before any reader gets there; reading them then
// sends nothing.
func TestDenseArrayFetchesFollowingShards(t *testing.T) {
	const shardBytes = accessPerShard * accessChunk
	const ahead = 4 // a quarter of the cache holds 4 shards (and their indexes)
	const cache = 4 * ahead * (shardBytes + accessPerShard*16 + 4)
	f, _, _ := accessFS(t, keyspace.Options{FetchAhead: true, Revalidate: time.Hour, CacheBytes: cache})
	c := lookupDir(t, lookupDir(t, f.Root(keyspace.V3), "a"), "c")
	order := make(chan int, 2*accessPerShard)
	for pass := range 4 {
		for i := pass; i < 2*accessPerShard; i += 4 {
			order <- i
		}
	}
	close(order)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range order {
				readAccessChunk(t, c, i)
			}
		})
	}
	wg.Wait()
	want := uint64((2 + ahead) * shardBytes)
	// Until their bytes have arrived (FetchedBytes counts them when asked
	// for), and the indexes of the array's other shards, which the engine
	// loads in the background once two shards were read.
	st := waitFor(f, func(st keyspace.Stats) bool {
		return st.Requests["bytes fetched"] >= want && st.Requests["suffix GET"] >= accessShards
	})
	t.Logf("shards 0 and 1 read densely: %v; %d KiB of chunks fetched", st.Requests, st.FetchedBytes>>10)
	if st.FetchedBytes != want {
		t.Fatalf("%d KiB of chunks fetched after shards 0 and 1 were read; want %d KiB (and the next %d shards)", st.FetchedBytes>>10, want>>10, ahead)
	}
	// A chunk of each (a read of each alone, which fetches nothing ahead).
	before := f.Stats()
	for s := 2; s < 2+ahead; s++ {
		readAccessChunk(t, c, s*accessPerShard+17)
	}
	if got := requestDelta(before, f.Stats()); len(got) != 0 {
		t.Errorf("reading a chunk of each of shards 2 to %d sent %v; want nothing", 1+ahead, got)
	}
}

// TestConcurrentReadersMakeAShardDense: four readers reading chunks of one
// shard at once, far apart (no run, and too few of the array's recent
// reads to prove anything in order), read it densely, as a reader pool
// does: the rest of the shard is fetched ahead of them, and reading
// another of its chunks then sends nothing. The S3 server is reached
// through a proxy that forwards each request after 200 ms, so the four
// reads wait on the store together.
func TestConcurrentReadersMakeAShardDense(t *testing.T) {
	dir := t.TempDir()
	writeAccessStore(t, dir)
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	srv.Upload(t, dir, "zarr", "store")
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	srv.SetEnv(t)
	opts := srv.Options()
	opts.Endpoint, opts.ReadOnly = slow.URL, true
	s, err := s3store.Open(context.Background(), "zarr", "store", opts)
	if err != nil {
		t.Fatal(err)
	}
	f := openFSOver(t, s, keyspace.Options{FetchAhead: true, Revalidate: time.Hour})
	c := lookupDir(t, lookupDir(t, f.Root(keyspace.V3), "a"), "c")
	readAccessChunk(t, c, 0) // the shard's index loaded
	first := f.Stats()
	var wg sync.WaitGroup
	for _, i := range []int{16, 32, 48, 63} {
		wg.Go(func() { readAccessChunk(t, c, i) })
	}
	wg.Wait()
	const shardBytes = accessPerShard * accessChunk
	// Until the bytes of the rest of the shard have arrived.
	st := waitFor(f, func(st keyspace.Stats) bool {
		return requestDelta(first, st)["bytes fetched"] >= shardBytes-accessChunk
	})
	t.Logf("4 concurrent reads of chunks of shard 0: %v; %d KiB of chunks fetched", st.Requests, st.FetchedBytes>>10)
	if st.FetchedBytes != shardBytes {
		t.Fatalf("%d KiB of chunks fetched; want the whole shard, %d KiB", st.FetchedBytes>>10, shardBytes>>10)
	}
	before := st
	readAccessChunk(t, c, 7)
	if got := requestDelta(before, f.Stats()); len(got) != 0 {
		t.Errorf("reading c/7 sent %v; want nothing", got)
	}
}
