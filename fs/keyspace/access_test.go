package keyspace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
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
