package engine_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
)

// TestListingRevalidates: a whole-array read from an object store lasting
// several revalidation intervals makes one index request per shard: the
// shards due at once are checked by one listing of the array, not by a
// conditional GET each. A shard replaced in the store during such a read
// is still seen once the interval has passed, and once seen, its old
// generation never again.
func TestListingRevalidates(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	const revalidate = 200 * time.Millisecond
	srv, e, a := s3Array(t, dir, engine.Options{Revalidate: revalidate}, nil)

	// A reader lists the array, then reads it whole twice, in key order,
	// taking over five intervals.
	for _, err := range a.Stored(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for pass := range 2 {
		for i := range chunks {
			if _, b, err := read(t, a, i, false); err != nil || !isChunk(b, i, 0) {
				t.Fatalf("pass %d, chunk %d: %v", pass, i, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	took := time.Since(start)
	req := e.Stats().Requests
	t.Logf("read twice in %v: requests %v", took, req)
	if took < 3*revalidate {
		t.Fatalf("the reads took %v, not several intervals of %v: the test proves nothing", took, revalidate)
	}
	// The listing of Stored, and one listing per interval shared by the
	// shards due in it (not one per shard).
	if most := uint64(took/revalidate) + 4; req["suffix GET"] != shards || req["LIST"] < 2 || req["LIST"] > most {
		t.Errorf("%d shards read for %v (revalidated every %v): %d suffix GETs (index reads and checks), %d LISTs; want one index read per shard, checked by listings (at most %d)",
			shards, took, revalidate, req["suffix GET"], req["LIST"], most)
	}

	// Shard c/1 is replaced while its chunks are read again.
	writeArray(t, dir, 1, nil)
	shard, err := os.ReadFile(filepath.Join(dir, "a", "c", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("zarr"), Key: aws.String("a/c/1"), Body: bytes.NewReader(shard)}); err != nil {
		t.Fatal(err)
	}
	replaced := time.Now()
	seen := false
	for n := 0; ; n++ {
		i := perShard + n%perShard
		began := time.Now()
		_, b, err := read(t, a, i, false)
		switch {
		case errors.Is(err, engine.ErrStale):
			continue // replaced between locating and reading: locate again
		case err != nil:
			t.Fatalf("chunk %d after the replacement: %v", i, err)
		case isChunk(b, i, 1):
			seen = true
		case !isChunk(b, i, 0):
			t.Fatalf("chunk %d after the replacement: neither generation's bytes", i)
		case seen:
			t.Fatalf("chunk %d: the replaced shard's old bytes after its new ones", i)
		case began.Sub(replaced) > revalidate+5*time.Second:
			t.Fatalf("chunk %d: the replaced shard's old bytes %v after the replacement (revalidated every %v)", i, began.Sub(replaced), revalidate)
		}
		if seen && n >= 2*perShard {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("requests %v", e.Stats().Requests)
}

// TestSlowListingChecksShards: a listing of the array that takes longer
// than the revalidation interval (a slow store, a loaded machine) still
// checks the shards it finds unchanged, as of its start: the shard whose
// check began it is not checked again alone (a conditional GET more).
func TestSlowListingChecksShards(t *testing.T) {
	ctx := context.Background()
	const revalidate = 200 * time.Millisecond
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	slowLists := func(r *http.Request) faultproxy.Fault {
		if requests.Kind(r) == "LIST" {
			time.Sleep(revalidate + 100*time.Millisecond)
		}
		return faultproxy.Fault{}
	}
	// Requests wait long enough for the slow listings not to time out.
	_, e, a := s3ArrayWithin(t, dir, engine.Options{Revalidate: revalidate}, slowLists, requests.Limits{MaxAttempts: 2, Timeout: time.Minute})
	for _, err := range a.Stored(ctx, nil) { // loads every shard's index
		if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(revalidate)
	if _, b, err := read(t, a, 0, false); err != nil || !isChunk(b, 0, 0) {
		t.Fatalf("chunk 0: %v", err)
	}
	engine.WaitChecks(e)
	req := e.Stats().Requests
	t.Logf("requests %v", req)
	if req["LIST"] < 2 || req["suffix GET"] != shards {
		t.Errorf("%d shards, listed again once due: %d suffix GETs (index reads and checks), %d LISTs (%v); want one index read per shard, checked by the second listing",
			shards, req["suffix GET"], req["LIST"], req)
	}
}
