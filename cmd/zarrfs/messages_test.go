package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store/gcsstore/gcstest"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestGCSCredentialsRefused: gs:// with credentials that Google's token
// endpoint refuses fails at once (one token request, no retries for the
// remote deadline), naming the key file and the ways out.
func TestGCSCredentialsRefused(t *testing.T) {
	var tokenRequests atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenRequests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`))
	}))
	defer tokens.Close()
	keyFile := gcstest.UseServiceAccount(t, tokens.URL+"/token")
	// The store's server is never reached: the token comes first.
	code, _, stderr := runCLI(t, "info", "--gcs-endpoint", "http://127.0.0.1:1", "gs://bucket/store")
	if code != 1 || !strings.Contains(stderr, "GOOGLE_APPLICATION_CREDENTIALS="+keyFile) || !strings.Contains(stderr, "--gcs-anonymous") || !strings.Contains(stderr, "invalid_grant") {
		t.Errorf("zarrfs info gs:// with refused credentials: exit %d, %q; want 1 naming the key file, the cause and --gcs-anonymous", code, stderr)
	}
	if n := tokenRequests.Load(); n != 1 {
		t.Errorf("%d token requests, want 1: a refusal is not retried", n)
	}
}

// TestStoreMistakes: what an operator gets for a plain file as STORE, a
// Zarr metadata file as STORE, and an unknown log level.
func TestStoreMistakes(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	plain := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(plain, []byte("not a store\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for arg, want := range map[string]string{
		plain:                           "is a file but not a zip archive: a store is a directory, a zip file (.zip, .ozx) or a URL",
		filepath.Join(dir, "zarr.json"): "is a Zarr metadata file, not a store: give the directory holding it",
	} {
		code, _, stderr := runCLI(t, "info", arg)
		if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "zip: not a valid zip file") {
			t.Errorf("zarrfs info %s: exit %d, %q; want 1 and %q", arg, code, stderr, want)
		}
	}
	code, _, stderr := runCLI(t, "mount", "--log-level", "verbose", dir, t.TempDir())
	if code != 1 || !strings.Contains(stderr, "debug, info, warn or error") {
		t.Errorf("zarrfs mount --log-level verbose: exit %d, %q; want the levels listed", code, stderr)
	}
}
