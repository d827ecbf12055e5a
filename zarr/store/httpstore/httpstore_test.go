package httpstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/httpstore"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
)

// serve serves dir with Go's file server, through wrap when given.
func serve(t *testing.T, dir string, wrap func(http.Handler) http.Handler) *httpstore.Store {
	t.Helper()
	var h http.Handler = http.FileServer(http.Dir(dir))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s, err := httpstore.Open(srv.URL+"/root", httpstore.Options{Limits: requests.Limits{MaxAttempts: 4, MaxBackoff: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func writeFile(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestReads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	writeFile(t, filepath.Join(dir, "root/a/c/0"), "hello world", t0)
	s := serve(t, dir, nil)
	for _, c := range []struct {
		span store.Span
		want string
	}{
		{store.Range(6, 5), "world"},
		{store.Range(6, -1), "world"},
		{store.Last(5), "world"},
		{store.Last(100), "hello world"},
		{store.All, "hello world"},
	} {
		b, info, err := s.Get(ctx, "a/c/0", c.span, store.Cond{})
		if err != nil || string(b) != c.want || info.Size != 11 || info.Generation == "" {
			t.Errorf("Get(%+v) = %q, %+v, %v; want %q", c.span, b, info, err, c.want)
		}
	}
	if _, _, err := s.Get(ctx, "a/c/0", store.Range(6, 6), store.Cond{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Get past the end: %v, want ErrUnexpectedEOF", err)
	}
	info, err := s.Stat(ctx, "a/c/0")
	if err != nil || info.Size != 11 || !info.ModTime.Equal(t0) {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
	if _, _, err := s.Get(ctx, "a/c/0", store.Last(4), store.Cond{IfNoneMatch: info.Generation}); !errors.Is(err, store.ErrNotModified) {
		t.Errorf("revalidating an unchanged value: %v, want ErrNotModified", err)
	}
	p := make([]byte, 5)
	if err := s.ReadAt(ctx, "a/c/0", info.Generation, p, 0); err != nil || string(p) != "hello" {
		t.Fatalf("ReadAt = %q, %v", p, err)
	}
	// Replaced: a read tied to the old generation must fail, not mix.
	writeFile(t, filepath.Join(dir, "root/a/c/0"), "HELLO WORLD", t0.Add(time.Minute))
	if err := s.ReadAt(ctx, "a/c/0", info.Generation, p, 0); !errors.Is(err, store.ErrPrecondition) {
		t.Errorf("ReadAt of a replaced value: %v (%q), want ErrPrecondition", err, p)
	}
	if _, _, err := s.Get(ctx, "a/c/0", store.Last(4), store.Cond{IfNoneMatch: info.Generation}); err != nil {
		t.Errorf("revalidating a changed value: %v", err)
	}
	if _, err := store.ReadAll(ctx, s, "a/missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing key: %v, want ErrNotFound", err)
	}
	if _, err := store.ReadAll(ctx, s, "../secret"); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("escaping key: %v, want ErrInvalidKey", err)
	}
	if err := store.Write(ctx, s, "a/c/1", []byte("x")); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Put: %v, want ErrReadOnly", err)
	}
	for _, err := range store.ListDir(ctx, s, "") {
		if !errors.Is(err, store.ErrNoListing) {
			t.Errorf("ListDir: %v, want ErrNoListing", err)
		}
	}
	// It declares what it is, and offers only what it can do.
	if _, ok := any(s).(store.Writer); ok {
		t.Error("a web server's store is a store.Writer")
	}
	if _, ok := any(s).(store.Lister); ok {
		t.Error("a web server's store is a store.Lister")
	}
	if !s.Remote() {
		t.Error("a web server's store is not remote")
	}
}

// Failures between zarrfs and the server: 503s and cut bodies are retried;
// a server that keeps failing gives an error naming the key and status.
func TestFaults(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "root/k"), strings.Repeat("x", 1000), time.Now().Add(-time.Hour))
	var requests, failFirst atomic.Int32
	var mode atomic.Value
	mode.Store("")
	s := serve(t, dir, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := requests.Add(1)
			switch m := mode.Load().(string); {
			case m == "503" && n <= failFirst.Load():
				http.Error(w, "slow down", http.StatusServiceUnavailable)
			case m == "500":
				http.Error(w, "broken", http.StatusInternalServerError)
			case m == "cut" && n <= failFirst.Load():
				w.Header().Set("Content-Length", "1000")
				w.Write([]byte("xxx"))
				panic(http.ErrAbortHandler) // drop the connection mid-body
			default:
				h.ServeHTTP(w, r)
			}
		})
	})
	for _, m := range []string{"503", "cut"} {
		requests.Store(0)
		failFirst.Store(2)
		mode.Store(m)
		b, err := store.ReadAll(ctx, s, "k")
		if err != nil || len(b) != 1000 || requests.Load() != 3 {
			t.Errorf("%s twice, then served: %d bytes, %v, after %d requests; want 1000 bytes after 3", m, len(b), err, requests.Load())
		}
	}
	requests.Store(0)
	mode.Store("500")
	_, err := store.ReadAll(ctx, s, "k")
	if err == nil || !strings.Contains(err.Error(), "k: HTTP 500") || requests.Load() != 4 {
		t.Errorf("a failing server: %v after %d requests; want an error naming the key and HTTP 500 after 4", err, requests.Load())
	}
}

// TestFaultProxy reads through a proxy in front of a real web server that
// stalls, resets, cuts, lies and swaps files.
func TestFaultProxy(t *testing.T) {
	dir := t.TempDir()
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	p := faultproxy.Start(t, srv.URL)
	s, err := httpstore.Open(p.URL+"/root", httpstore.Options{Limits: storetest.FaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	mtime := time.Now().Add(-time.Hour).Truncate(time.Second)
	storetest.RunFaults(t, storetest.FaultTarget{
		Store: s, Proxy: p, Limits: storetest.FaultLimits.WithDefaults(),
		Replace: func(t *testing.T, key string, b []byte) faultproxy.Object {
			mtime = mtime.Add(time.Minute) // a new generation
			writeFile(t, filepath.Join(dir, "root", key), string(b), mtime)
			return faultproxy.Object{Body: b, LastModified: mtime}
		},
	})
}
