package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
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

// TestIdentity: the spellings of one endpoint name one store (whose
// journals a command then finds), other endpoints and addressing another.
func TestIdentity(t *testing.T) {
	ctx := context.Background()
	name := func(endpoint string, pathStyle bool) string {
		s, err := s3store.Open(ctx, "bkt", "/a/b/", s3store.Options{Endpoint: endpoint, PathStyle: pathStyle, Anonymous: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return s.String()
	}
	const want = "s3://bkt/a/b?endpoint=http://127.0.0.1:39101&path-style"
	for _, e := range []string{"http://127.0.0.1:39101", "http://127.0.0.1:39101/", "HTTP://127.0.0.1:39101"} {
		if got := name(e, true); got != want {
			t.Errorf("endpoint %s: %q, want %q", e, got, want)
		}
	}
	for _, other := range []string{name("http://localhost:39101", true), name("http://127.0.0.1:39102", true), name("http://127.0.0.1:39101", false)} {
		if other == want {
			t.Errorf("%q names the store of another endpoint or addressing", other)
		}
	}
	if got := name("https://S3.Example.org:443/", false); got != "s3://bkt/a/b?endpoint=https://s3.example.org" {
		t.Errorf("an https endpoint with its default port: %q", got)
	}
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

// TestRetriesDoNotRunOut: after an outage in which every request failed,
// requests are still retried. (The AWS SDK's standard retryer spends a
// quota of 500 tokens, 5 per retry, and stops retrying when it is empty.)
func TestRetriesDoNotRunOut(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	srv.Bucket(t, "quota")
	srv.SetEnv(t)
	p := faultproxy.Start(t, srv.Endpoint)
	limits := requests.Limits{MaxAttempts: 11, MaxBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	s, err := s3store.Open(ctx, "quota", "", s3store.Options{Endpoint: p.URL, PathStyle: true, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Write(ctx, s, "k", []byte("value")); err != nil {
		t.Fatal(err)
	}
	p.SetRule(func(*http.Request) faultproxy.Fault { return faultproxy.Fault{Status: http.StatusServiceUnavailable} })
	for i := range 12 { // 12 x 10 retries: more than the SDK's quota
		before := p.Requests()
		if _, err := store.ReadAll(ctx, s, "k"); err == nil || p.Requests()-before != limits.MaxAttempts {
			t.Fatalf("outage, read %d: %v after %d requests; want a failure after %d", i, err, p.Requests()-before, limits.MaxAttempts)
		}
	}
	p.SetRule(faultproxy.Once(1, nil, faultproxy.Fault{Status: http.StatusServiceUnavailable}))
	before := p.Requests()
	if b, err := store.ReadAll(ctx, s, "k"); err != nil || string(b) != "value" {
		t.Fatalf("after the outage, a read meeting one 503: %q, %v after %d requests; want it retried", b, err, p.Requests()-before)
	}
}

// TestServerSaysWhy: requests the server refuses fail with its code and
// message, naming what was asked, never an empty field or "not found".
func TestServerSaysWhy(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	srv.Bucket(t, "why")
	for _, c := range []struct {
		name, accessKey, secretKey string
		want                       []string
	}{
		{"unknown access key", "nobody", s3test.SecretKey, []string{"XAdminUserNotFound", "No user exists with the provided access key ID"}},
		{"wrong secret", s3test.AccessKey, "wrong", []string{"HTTP 403", "SignatureDoesNotMatch", "signature we calculated does not match"}},
	} {
		srv.SetEnv(t)
		t.Setenv("AWS_ACCESS_KEY_ID", c.accessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", c.secretKey)
		s, err := s3store.Open(ctx, "why", "some/prefix", srv.Options())
		if err != nil {
			t.Fatal(err)
		}
		_, getErr := store.ReadAll(ctx, s, "zarr.json")
		var listErr error
		for _, err := range s.ListDir(ctx, "") {
			listErr = err
		}
		for what, err := range map[string]error{"GET zarr.json": getErr, "the listing of the root": listErr} {
			msg := fmt.Sprint(err)
			t.Logf("%s, %s: %s", c.name, what, msg)
			if err == nil || errors.Is(err, store.ErrNotFound) || strings.Contains(msg, ": :") || strings.HasPrefix(msg, ": ") {
				t.Errorf("%s, %s: %q; want the server's refusal, naming what was asked", c.name, what, msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s, %s: %q does not say %q", c.name, what, msg, w)
				}
			}
		}
		if !strings.Contains(fmt.Sprint(getErr), "zarr.json") || !strings.Contains(fmt.Sprint(listErr), "some/prefix/") {
			t.Errorf("%s: %v / %v; want the key and the prefix listed named", c.name, getErr, listErr)
		}
	}
}
