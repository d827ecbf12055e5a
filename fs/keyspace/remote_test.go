package keyspace_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr/store/s3store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// chunkFile reads an inner chunk file of the v3 view and where it lies in
// its shard (user.zarr.offset).
func chunkFile(t *testing.T, f *keyspace.FS, path string) (content []byte, offset string) {
	t.Helper()
	ctx := context.Background()
	parts := strings.Split(path, "/")
	d := f.Root(keyspace.V3)
	for _, p := range parts[:len(parts)-1] {
		d = lookupDir(t, d, p)
	}
	e, err := d.Lookup(ctx, parts[len(parts)-1])
	if err != nil || e.File == nil {
		t.Fatalf("lookup %s: %v", path, err)
	}
	xattrs, err := e.File.(*keyspace.Chunk).Xattrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range xattrs {
		if x.Name == "user.zarr.offset" {
			offset = x.Value
		}
	}
	h, err := e.File.Open(ctx)
	if err != nil {
		return nil, offset
	}
	defer h.Close()
	b, err := io.ReadAll(io.NewSectionReader(h, 0, h.Size()))
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b, offset
}

// TestShardReplacedBehindIfMatch: a shard is replaced between the read of
// its index and the read of a chunk, and the server (or a cache in front
// of it) answers the chunk's conditional range request with the new
// shard's bytes. The reader gets the chunk of the new shard, located
// again in its new index, never bytes of the old layout's offsets.
func TestShardReplacedBehindIfMatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	srv.Upload(t, dir, "zarr", "store")
	srv.SetEnv(t)
	p := faultproxy.Start(t, srv.Endpoint)
	s, err := s3store.Open(ctx, "zarr", "store", s3store.Options{Endpoint: p.URL, PathStyle: true, Limits: storetest.FaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	// An hour: the index read first is trusted, as within any
	// revalidation interval.
	remote := openFSOver(t, s, keyspace.Options{Revalidate: time.Hour})
	local := openFS(t, dir, keyspace.Options{})

	// Shard c/0/0 of uint16_zstd_end (4x2 inner chunks of 4x8, each
	// compressed to its own size) is replaced by the bytes of shard c/0/1:
	// inner chunk c/I/J becomes what c/I/J+2 was.
	const array = "uint16_zstd_end"
	replacement, err := os.ReadFile(filepath.Join(dir, array, "c", "0", "1"))
	if err != nil {
		t.Fatal(err)
	}
	var path string
	var old, replaced []byte
	for _, c := range []string{"1/1", "0/1", "1/0", "2/0", "2/1", "3/0", "3/1"} {
		i, j, _ := strings.Cut(c, "/")
		o, oldOff := chunkFile(t, local, array+"/c/"+c)
		n, newOff := chunkFile(t, local, array+"/c/"+i+"/"+map[string]string{"0": "2", "1": "3"}[j])
		if o != nil && n != nil && oldOff != newOff && !bytes.Equal(o, n) {
			path, old, replaced = array+"/c/"+c, o, n
			break
		}
	}
	if path == "" {
		t.Fatal("no inner chunk of shard c/0/0 lies elsewhere in shard c/0/1")
	}
	// The shard is replaced when the first range of it is asked for,
	// after its index was read (and checked again on open).
	var replace sync.Once
	var obj faultproxy.Object
	var served atomic.Int32
	p.SetRule(func(r *http.Request) faultproxy.Fault {
		if !strings.HasSuffix(r.URL.Path, "/"+array+"/c/0/0") || !strings.HasPrefix(r.Header.Get("Range"), "bytes=") || strings.HasPrefix(r.Header.Get("Range"), "bytes=-") {
			return faultproxy.Fault{}
		}
		replace.Do(func() {
			out, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("zarr"), Key: aws.String("store/" + array + "/c/0/0"), Body: bytes.NewReader(replacement)})
			if err != nil {
				t.Error(err)
			}
			obj = faultproxy.Object{Body: replacement, ETag: aws.ToString(out.ETag)}
		})
		served.Add(1)
		return faultproxy.Fault{Serve: &obj} // If-Match ignored
	})
	got, _ := chunkFile(t, remote, path)
	p.SetRule(nil)
	switch {
	case served.Load() == 0:
		t.Fatalf("no ranged read of the shard reached the proxy")
	case bytes.Equal(got, replaced):
		t.Logf("%s: the new shard's chunk, after %d range reads answered with the new shard", path, served.Load())
	case bytes.Equal(got, old):
		t.Logf("%s: the old shard's chunk", path)
	default:
		t.Fatalf("%s: %d bytes that are neither the old chunk (%d bytes) nor the new (%d bytes)", path, len(got), len(old), len(replaced))
	}
}
