package engine_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
)

// TestListingKeepsNoShardOut: a listing of an array that the server
// answered before this process published a new shard of it (PUT, then
// Rewritten, as the writer does), and that came back after, serves its
// own reader but is not kept: the next reader, well within the
// revalidation interval, is shown the new shard. (A kept listing hid it
// from a resize through a mount for an interval, which then left the
// shard's chunks outside the new shape in the store.)
func TestListingKeepsNoShardOut(t *testing.T) {
	ctx := context.Background()
	last := shards - 1
	dir, whole := t.TempDir(), t.TempDir()
	writeArray(t, dir, 0, func(i int) bool { return i/perShard == last }) // the last shard not stored
	writeArray(t, whole, 0, nil)
	key := "a/c/" + strconv.Itoa(last)
	shard, err := os.ReadFile(filepath.Join(whole, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}

	var (
		armed, held atomic.Bool
		srv         *s3test.Server
		e           *engine.Engine
	)
	publish := func() {
		if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("zarr"), Key: aws.String(key), Body: bytes.NewReader(shard)}); err != nil {
			t.Error(err)
		}
		e.Rewritten(key)
	}
	rule := func(r *http.Request) faultproxy.Fault {
		if !armed.Load() || requests.Kind(r) != "LIST" || !held.CompareAndSwap(false, true) {
			return faultproxy.Fault{}
		}
		return faultproxy.Fault{Held: publish}
	}
	// Requests wait long enough for the publish not to time the listing out.
	srv, e, a := s3ArrayWithin(t, dir, engine.Options{Revalidate: time.Hour}, rule, requests.Limits{MaxAttempts: 2, Timeout: time.Minute})
	armed.Store(true)

	stored := func() []int {
		var got []int
		for c, err := range a.Stored(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, c[0])
		}
		slices.Sort(got)
		return got
	}
	all := make([]int, chunks)
	for i := range all {
		all[i] = i
	}
	if got := stored(); !held.Load() || !slices.Equal(got, all[:last*perShard]) {
		t.Fatalf("the listing answered before the publish (held %v): chunks %v, want %v", held.Load(), got, all[:last*perShard])
	}
	if got := stored(); !slices.Equal(got, all) {
		t.Errorf("after shard %s was published: chunks %v, want all %d", key, got, chunks)
	}
}
