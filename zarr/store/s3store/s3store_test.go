package s3store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
)

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "conformance")
	storetest.Run(t, srv.Open(t, "conformance", "some/prefix", false))
}

func TestReadOnlyAndMissingBucket(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	srv.Bucket(t, "bkt")
	ro := srv.Open(t, "bkt", "", true)
	if err := store.Write(ctx, ro, "k", []byte("v")); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Put on a read-only store: %v", err)
	}
	missing := srv.Open(t, "no-such-bucket", "", false)
	_, err := store.ReadAll(ctx, missing, "zarr.json")
	if err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get from a missing bucket: %v, want an error that is not ErrNotFound", err)
	}
	t.Log(err)
}
