package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
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

// TestFaults reads and writes through a proxy in front of the real S3
// server that stalls, resets, cuts, lies and swaps objects.
func TestFaults(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	srv.Bucket(t, "faults")
	srv.SetEnv(t)
	p := faultproxy.Start(t, srv.Endpoint)
	s, err := s3store.Open(ctx, "faults", "p", s3store.Options{Endpoint: p.URL, PathStyle: true, Limits: storetest.FaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	storetest.RunFaults(t, storetest.FaultTarget{
		Store: s, Proxy: p, Limits: storetest.FaultLimits.WithDefaults(),
		Replace: func(t *testing.T, key string, b []byte) faultproxy.Object {
			out, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("faults"), Key: aws.String("p/" + key), Body: bytes.NewReader(b)})
			if err != nil {
				t.Fatal(err)
			}
			return faultproxy.Object{Body: b, ETag: aws.ToString(out.ETag)}
		},
	})
}
