package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// The array of the request tests: manyShards shards of innerPerShard
// inner chunks of innerBytes bytes, each ending with a crc32c.
const (
	manyShards    = 16
	innerPerShard = 256
	innerBytes    = 16
)

// writeManyChunks writes the array at dir (the array is the store's root)
// and returns the path of its shard 5.
func writeManyChunks(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	m := &meta.ArrayV3{
		Shape: []int{manyShards * innerPerShard * innerBytes}, DataType: dtype.TypeUint8, ChunkShape: []int{innerPerShard * innerBytes},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, FillValue: []byte{0},
		Codecs: zarr.ShardedCodecs([]int{innerBytes}, []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}),
	}
	a, err := zarr.CreateArrayV3(ctx, s, "", m)
	if err != nil {
		t.Fatal(err)
	}
	data := codec.NewChunk(codec.Spec{Shape: m.Shape, Type: m.DataType, Fill: m.FillValue})
	for i := range data.Data {
		data.Data[i] = byte(i/innerBytes) | 1
	}
	if err := a.Write(ctx, data); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "c", "5")
}

// corruptInner flips a data byte of inner chunk 100 of the shard at path,
// whose inner chunks are stored in order, so its crc32c no longer matches.
func corruptInner(t *testing.T, path string) {
	t.Helper()
	b := readFile(t, path)
	b[100*(innerBytes+4)+3] ^= 0xff
	writeFile(t, path, b)
}

// TestCheckAndInfoRequestsOfRemoteStores: `zarrfs check` and `zarrfs info`
// of a remote array of many small inner chunks read each shard's index
// and chunks through the engine with one request per shard (a suffix read
// that holds all of a small shard): no request per inner chunk, and on a
// store that cannot list (a web server) no probe besides. A corrupt inner
// chunk read so is named.
func TestCheckAndInfoRequestsOfRemoteStores(t *testing.T) {
	dir := t.TempDir()
	shard5 := writeManyChunks(t, dir)
	// The store's metadata (zarr.json and, on a store that cannot list,
	// the documents looked for beside it) and a listing.
	const besides = 6

	var requests atomic.Int64
	var mu sync.Mutex
	kinds := map[string]int{}
	record := func(r *http.Request) {
		requests.Add(1)
		kind := r.Method
		switch {
		case r.URL.Query().Has("list-type"):
			kind = "LIST"
		case r.Header.Get("Range") != "":
			kind += " " + r.Header.Get("Range")
		}
		mu.Lock()
		kinds[kind]++
		mu.Unlock()
	}
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		http.FileServer(http.Dir(dir)).ServeHTTP(w, r)
	}))
	t.Cleanup(web.Close)
	count := func(args ...string) (int, string) {
		t.Helper()
		requests.Store(0)
		mu.Lock()
		clear(kinds)
		mu.Unlock()
		code, out, errs := runCLI(t, args...)
		n := int(requests.Load())
		mu.Lock()
		t.Logf("zarrfs %s: exit %d, %d requests %v\n%s%s", strings.Join(args, " "), code, n, kinds, out, errs)
		mu.Unlock()
		if code != 0 {
			t.Fatalf("zarrfs %s exited %d", args[0], code)
		}
		if n > manyShards+besides {
			t.Errorf("zarrfs %s made %d requests of the store; want at most %d, one per shard and %d besides", args[0], n, manyShards+besides, besides)
		}
		return n, out
	}
	if _, out := count("check", web.URL+"/"); !strings.Contains(out, "16 stored chunks/shards: 0 broken") {
		t.Errorf("check of the web store:\n%s", out)
	}
	if _, out := count("info", web.URL+"/"); !strings.Contains(out, "stored: 16/16 shards, 4096 inner chunks (0 empty)") {
		t.Errorf("info of the web store:\n%s", out)
	}

	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	srv.Upload(t, dir, "zarr", "many")
	srv.SetEnv(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	proxy.SetRule(func(r *http.Request) faultproxy.Fault { record(r); return faultproxy.Fault{} })
	s3 := []string{"--s3-endpoint", proxy.URL, "--s3-path-style", "s3://zarr/many"}
	count(append([]string{"check"}, s3...)...)
	count(append([]string{"info"}, s3...)...)

	corruptInner(t, shard5)
	code, out, _ := runCLI(t, "check", web.URL+"/")
	if code != 1 || !strings.Contains(out, "BROKEN c/5: inner chunk 100: ") || strings.Count(out, "BROKEN") != 1 {
		t.Errorf("check of the web store with a corrupt inner chunk: exit %d, want 1 naming c/5 and inner chunk 100 alone:\n%s", code, out)
	}
	if err := os.Remove(filepath.Join(dir, "c", "7")); err != nil {
		t.Fatal(err)
	}
	if _, out := count("info", web.URL+"/"); !strings.Contains(out, "stored: 15/16 shards, 3840 inner chunks") {
		t.Errorf("info of the web store with a missing shard:\n%s", out)
	}
}
