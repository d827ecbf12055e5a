package integration_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store/gcsstore/gcstest"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// useGCS points this process, which mounts inherit, at the emulator, as
// Google's clients are: STORAGE_EMULATOR_HOST.
func useGCS(t *testing.T, srv *gcstest.Server) {
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// TestGCSReads mounts stores uploaded to a GCS emulator by Google's own
// SDK as gs://: zarrita through v3/ and zarr-python 2 through v2/ read
// every array to the original digests; so for the hold-out fixtures, when
// ../shared is there.
func TestGCSReads(t *testing.T) {
	o := zarrtest.NewOracle(t)
	srv := gcstest.Start(t)
	srv.Bucket(t, "zarr")
	useGCS(t, srv)
	t.Run("generated", func(t *testing.T) {
		dir := t.TempDir()
		arrays := zarrtest.WriteV3Store(t, dir)
		srv.Upload(t, dir, "zarr", "gen/v3")
		m := mount(t, "gs://zarr/gen/v3", "--ro")
		checkOracles(t, o, m.Dir, m.Log(), generatedDigests(arrays))
		st := readStats(t, m.Dir)
		t.Logf("MNT/.zarrfs/stats: requests %v", st.Requests)
		if st.Requests["suffix GET"] == 0 || st.Requests["ranged GET"] == 0 || st.Requests["LIST"] == 0 {
			t.Errorf("the mount counts requests %v; want its index, chunk and listing requests counted by kind", st.Requests)
		}
	})
	t.Run("fixtures", func(t *testing.T) {
		fixtures := zarrtest.Fixtures(t)
		srv.Upload(t, fixtures, "zarr", "fixtures")
		m := mount(t, "gs://zarr/fixtures", "--ro")
		checkOracles(t, o, m.Dir, m.Log(), fixtureDigests(t, fixtures))
	})
}

// TestGCSZarrPythonWrites: zarr-python 2.13 writes regions through the v2
// view of a read-write gs:// mount; after unmounting, the bucket, read by
// Google's SDK and then by zarrita, holds what zarr-python wrote, and
// `zarrfs check gs://…` passes.
func TestGCSZarrPythonWrites(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	script, err := filepath.Abs(filepath.Join("testdata", "zarr_write.py"))
	if err != nil {
		t.Fatal(err)
	}
	srv := gcstest.Start(t)
	srv.Bucket(t, "zarr")
	dir, arrays := writeStore(t)
	srv.Upload(t, dir, "zarr", "w")
	useGCS(t, srv)
	journals := t.TempDir()
	m := mount(t, "gs://zarr/w", "--journal-dir", journals)
	w := zarrPythonWrites(t, script, m, openView(t, dir), arrays, 5)
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(journals, "*", "*", "*")); len(left) > 0 {
		t.Errorf("a clean unmount left journal files: %v", left)
	}
	if out, err := exec.Command(zarrfsBin, "check", "gs://zarr/w").CombinedOutput(); err != nil {
		t.Errorf("zarrfs check gs://zarr/w: %v\n%s", err, out)
	}
	got := t.TempDir()
	srv.Download(t, "zarr", "w", got)
	w.check(t, o, got)
}

// TestGCSTwoMounts: two read-write gs:// mounts of one bucket writing the
// same shards lose no update (twoMountsLoseNothing): their uploads are
// conditional on the object generation. The emulator is reached through
// a proxy adding latency to every request, so that the two mounts' reads
// and uploads of a shard overlap (without the condition, updates are
// lost).
func TestGCSTwoMounts(t *testing.T) {
	srv := gcstest.Start(t)
	srv.Bucket(t, "zarr")
	dir, _ := writeStore(t)
	srv.Upload(t, dir, "zarr", "two")
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(slow.URL, "http://"))
	twoMountsLoseNothing(t, dir, srv, "zarr", "two", "gs://zarr/two")
}
