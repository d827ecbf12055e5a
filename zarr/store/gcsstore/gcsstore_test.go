package gcsstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/gcsstore"
	"github.com/zarrfs/zarrfs/zarr/store/gcsstore/gcstest"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
)

func TestConformance(t *testing.T) {
	srv := gcstest.Start(t)
	srv.Bucket(t, "conformance")
	storetest.Run(t, srv.Open(t, "conformance", "some/prefix", false))
}

// TestFaults reads and writes through a proxy in front of the emulator
// that stalls, resets, cuts, lies and swaps objects.
func TestFaults(t *testing.T) {
	ctx := context.Background()
	srv := gcstest.Start(t)
	srv.Bucket(t, "faults")
	p := faultproxy.Start(t, srv.Endpoint)
	s, err := gcsstore.Open(ctx, "faults", "p", gcsstore.Options{Endpoint: p.URL, Anonymous: true, Limits: storetest.FaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	client := srv.Client(t)
	storetest.RunFaults(t, storetest.FaultTarget{
		Store: s, Proxy: p, Limits: storetest.FaultLimits.WithDefaults(),
		Replace: func(t *testing.T, key string, b []byte) faultproxy.Object {
			w := client.Bucket("faults").Object("p/" + key).NewWriter(ctx)
			if _, err := w.Write(b); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			gen := strconv.FormatInt(w.Attrs().Generation, 10)
			return faultproxy.Object{Body: b, Header: http.Header{"X-Goog-Generation": {gen}}}
		},
	})
}

// TestReadOnlyAndIdentity: a read-only store refuses writes before any
// request; the store's name is its URL with the emulator, no more.
func TestReadOnlyAndIdentity(t *testing.T) {
	ctx := context.Background()
	srv := gcstest.Start(t)
	srv.Bucket(t, "bkt")
	ro := srv.Open(t, "bkt", "/a/b/", true)
	if err := store.Write(ctx, ro, "k", []byte("v")); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Put on a read-only store: %v", err)
	}
	if err := ro.Delete(ctx, "k", store.Cond{}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Delete on a read-only store: %v", err)
	}
	if got, want := ro.String(), "gs://bkt/a/b?endpoint="+srv.Endpoint; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.Endpoint, "http://"))
	env, err := gcsstore.Open(ctx, "bkt", "a/b", gcsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if env.String() != ro.String() {
		t.Errorf("through STORAGE_EMULATOR_HOST: %q, want %q", env.String(), ro.String())
	}
	spelled, err := gcsstore.Open(ctx, "bkt", "a/b", gcsstore.Options{Endpoint: strings.ToUpper(srv.Endpoint) + "/", Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer spelled.Close()
	if spelled.String() != ro.String() {
		t.Errorf("the endpoint spelled in capitals with a trailing slash: %q, want %q", spelled.String(), ro.String())
	}
	if _, err := gcsstore.Open(ctx, "bkt", "", gcsstore.Options{Endpoint: "http://user:secret@127.0.0.1:1", Anonymous: true}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("an endpoint with credentials: %v; want refused without the secret", err)
	}
	if _, err := gcsstore.Open(ctx, "bkt", "a/../b", gcsstore.Options{}); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("a prefix leaving the bucket: %v", err)
	}
}

// TestServerSaysWhy: a request the server refuses fails with its status,
// reason and message, naming what was asked; a missing bucket is not an
// empty store.
func TestServerSaysWhy(t *testing.T) {
	ctx := context.Background()
	srv := gcstest.Start(t)
	s := srv.Open(t, "no-such-bucket", "some/prefix", false)
	var listErr error
	for _, err := range s.ListDir(ctx, "") {
		listErr = err
	}
	msg := fmt.Sprint(listErr)
	t.Log(msg)
	if listErr == nil || errors.Is(listErr, store.ErrNotFound) || !strings.Contains(msg, "HTTP 404") || !strings.Contains(msg, "some/prefix/") {
		t.Errorf("listing a missing bucket: %q; want the server's 404 naming the prefix", msg)
	}
	_, err := s.Put(ctx, "zarr.json", [][]byte{[]byte("{}")}, store.Cond{})
	msg = fmt.Sprint(err)
	t.Log(msg)
	if err == nil || !strings.Contains(msg, "zarr.json") || !strings.Contains(msg, "HTTP 404") {
		t.Errorf("a write into a missing bucket: %q; want the server's refusal naming the key", msg)
	}
}

// TestCredentials: the store authorizes its requests with the token of
// the Application Default Credentials (here a service account whose
// token server is local), and never sends it to an emulator named by
// STORAGE_EMULATOR_HOST; --gcs-anonymous sends none.
func TestCredentials(t *testing.T) {
	ctx := context.Background()
	const token = "ya29.zarrfs-test-token"
	var grants atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ParseForm() != nil || r.Form.Get("assertion") == "" {
			http.Error(w, "no assertion", http.StatusBadRequest)
			return
		}
		grants.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, token)
	}))
	defer tokens.Close()
	var mu sync.Mutex
	var auths []string
	bucket := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, `{"error":{"code":404,"message":"No such object: bkt/p/k"}}`, http.StatusNotFound)
	}))
	defer bucket.Close()

	gcstest.UseServiceAccount(t, tokens.URL+"/token")
	s, err := gcsstore.Open(ctx, "bkt", "p", gcsstore.Options{Endpoint: bucket.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Stat(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Stat: %v", err)
	}
	anon, err := gcsstore.Open(ctx, "bkt", "p", gcsstore.Options{Endpoint: bucket.URL, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	anon.Stat(ctx, "k")
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(bucket.URL, "http://"))
	emu, err := gcsstore.Open(ctx, "bkt", "p", gcsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	emu.Stat(ctx, "k")
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"Bearer " + token, "", ""}; !slices.Equal(auths, want) || grants.Load() != 1 {
		t.Errorf("Authorization sent: %q after %d grants; want %q after 1", auths, grants.Load(), want)
	}

	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	if _, err := gcsstore.Open(ctx, "bkt", "", gcsstore.Options{Endpoint: bucket.URL}); err == nil || !strings.Contains(err.Error(), "--gcs-anonymous") {
		t.Errorf("credentials that cannot be read: %v; want an error saying what to do", err)
	}
}

// TestRequestKinds: the requests are counted by what they do, as those
// of s3:// are, so that the statistics compare.
func TestRequestKinds(t *testing.T) {
	ctx := context.Background()
	srv := gcstest.Start(t)
	srv.Bucket(t, "kinds")
	s := srv.Open(t, "kinds", "p", false)
	if err := store.Write(ctx, s, "a/k", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	info, err := s.Stat(ctx, "a/k")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4)
	if err := s.ReadAt(ctx, "a/k", info.Generation, p, 2); err != nil || string(p) != "2345" {
		t.Fatalf("ReadAt: %q, %v", p, err)
	}
	if b, _, err := s.Get(ctx, "a/k", store.Last(3), store.Cond{}); err != nil || string(b) != "789" {
		t.Fatalf("suffix Get: %q, %v", b, err)
	}
	if b, err := store.ReadAll(ctx, s, "a/k"); err != nil || string(b) != "0123456789" {
		t.Fatalf("Get: %q, %v", b, err)
	}
	for range s.ListDir(ctx, "a") {
	}
	if err := s.Delete(ctx, "a/k", store.Cond{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"PUT": 1, "HEAD": 1, "ranged GET": 1, "suffix GET": 1, "GET": 1, "LIST": 1, "DELETE": 1}
	got := s.Requests()
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s requests: %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
}
