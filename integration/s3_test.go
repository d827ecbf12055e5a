package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// requestCounter is a reverse proxy in front of the S3 server that counts
// requests by kind.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	total  map[string]int
}

func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

// countingProxy starts a proxy to the server and returns its endpoint.
func countingProxy(t *testing.T, srv *s3test.Server) (string, *requestCounter) {
	return countingProxyTo(t, srv.Endpoint)
}

// countingProxyTo starts a proxy to the server at endpoint
// (http://HOST:PORT) and returns its URL.
func countingProxyTo(t *testing.T, endpoint string) (string, *requestCounter) {
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := &requestCounter{counts: map[string]int{}, total: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.StatusCode == http.StatusPreconditionFailed {
			c.mu.Lock()
			c.counts["412"]++
			c.total["412"]++
			c.mu.Unlock()
		}
		return nil
	}
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.counts[requests.Kind(r)]++
		c.total[requests.Kind(r)]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p.URL, c
}

// useS3 points the AWS environment of this process, which mounts inherit,
// at endpoint.
func useS3(t *testing.T, srv *s3test.Server, endpoint string) {
	srv.SetEnv(t)
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
}

// firstStoredInner returns the inner grid coordinates of a stored inner
// chunk of the sharded array a.
func firstStoredInner(t *testing.T, a *zarr.Array) []int {
	t.Helper()
	for c, err := range a.ChunkCandidates(t.Context()) { // listed: stored
		if err != nil {
			t.Fatal(err)
		}
		ix, _, err := a.ReadShardIndex(t.Context(), a.ChunkKey(c), store.Cond{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range ix.Len() {
			if _, _, ok := ix.Chunk(i); ok {
				return a.InnerCoords(c, i)
			}
		}
	}
	t.Fatalf("%s: no stored inner chunk", a.Path)
	return nil
}

// TestS3Reads mounts a store uploaded to a real S3 server with an
// independent client: the oracles read both views to the original
// digests, and a cold read of one inner chunk costs two GETs, the index by
// suffix range and the chunk by range, and no HEAD.
func TestS3Reads(t *testing.T) {
	o := zarrtest.NewOracle(t)
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	srv.Upload(t, dir, "zarr", "gen/v3")
	endpoint, counter := countingProxy(t, srv)
	useS3(t, srv, endpoint)

	m := mount(t, "s3://zarr/gen/v3", "--ro", "--s3-path-style")
	h := openView(t, dir)
	var a *zarr.Array
	for _, g := range arrays {
		if n, _ := h.Node(g.Path); g.Sharded && n.Array.Sharding() != nil && len(n.Array.Shape) == 2 {
			a = n.Array
			break
		}
	}
	if a == nil {
		t.Fatal("the generated store has no 2-D sharded array")
	}
	coords := firstStoredInner(t, a)
	path := filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", coords))
	discovery := counter.take()
	if _, err := os.ReadFile(path); err != nil {
		t.Fatalf("read %s: %v\n%s", path, err, m.Log())
	}
	cold := counter.take()
	t.Logf("mount discovery: %v; cold read of one inner chunk: %v", discovery, cold)
	if want := map[string]int{"suffix GET": 1, "ranged GET": 1}; fmt.Sprint(cold) != fmt.Sprint(want) {
		t.Errorf("a cold read of one inner chunk sent %v, want %v", cold, want)
	}
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	again := counter.take()
	t.Logf("re-read: %v", again)
	if again["ranged GET"] != 0 || again["GET"] != 0 || again["HEAD"] != 0 {
		t.Errorf("a re-read fetched again: %v", again)
	}
	// Every chunk file of the array in key order, as cat would: one index
	// GET per shard and one ranged GET per run of adjacent chunks, which
	// for these small shards is one per shard.
	shards := 0
	for _, err := range a.ChunkCandidates(t.Context()) { // listed: stored
		if err != nil {
			t.Fatal(err)
		}
		shards++
	}
	files := 0
	err := filepath.WalkDir(filepath.Join(m.Dir, "v3", a.Path, "c"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		_, err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	all := counter.take()
	t.Logf("reading the %d chunk files of %s (%d shards): %v", files, a.Path, shards, all)
	if all["suffix GET"] > shards || all["ranged GET"] > shards || all["HEAD"] > 0 || all["GET"] > 0 {
		t.Errorf("reading %d chunk files of %d shards sent %v; want at most one suffix GET and one ranged GET per shard", files, shards, all)
	}
	checkOracles(t, o, m.Dir, m.Log(), generatedDigests(arrays))
	t.Logf("reading every array through both views: %v", counter.take())
	// The mount's own counts agree with what the server was sent.
	st := readStats(t, m.Dir)
	t.Logf("MNT/.zarrfs/stats: requests %v, %d chunks coalesced, %d pushed to the page cache", st.Requests, st.Coalesced, st.Pushed)
	if st.Pushed == 0 {
		t.Errorf("the readers read chunk files in key order, but none was pushed to the page cache after its lookup")
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	for _, k := range []string{"suffix GET", "ranged GET", "HEAD", "LIST", "GET"} {
		if st.Requests[k] != uint64(counter.total[k]) {
			t.Errorf("the stats file counts %d %s requests, the server got %d", st.Requests[k], k, counter.total[k])
		}
	}
	if st.Requests["bytes fetched"] == 0 || st.Coalesced == 0 {
		t.Errorf("the stats file counts %d bytes fetched and %d chunks coalesced", st.Requests["bytes fetched"], st.Coalesced)
	}
	if st.Fetched == 0 || st.Fetched > st.Requests["bytes fetched"] || st.Served.PassThroughBytes == 0 {
		t.Errorf("the stats file counts %d chunk bytes fetched (of %d bytes fetched) and %d served", st.Fetched, st.Requests["bytes fetched"], st.Served.PassThroughBytes)
	}
}

// TestS3ZarrPythonWrites: zarr-python 2.13 writes regions through the v2
// view of a read-write s3:// mount; after unmounting, the bucket,
// downloaded with an independent client and read by zarrita, holds what
// zarr-python wrote, and `zarrfs check s3://…` passes.
func TestS3ZarrPythonWrites(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	script, err := filepath.Abs(filepath.Join("testdata", "zarr_write.py"))
	if err != nil {
		t.Fatal(err)
	}
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir, arrays := writeStore(t)
	srv.Upload(t, dir, "zarr", "w")
	endpoint, counter := countingProxy(t, srv)
	useS3(t, srv, endpoint)
	journals := t.TempDir()
	m := mount(t, "s3://zarr/w", "--s3-path-style", "--journal-dir", journals)
	w := zarrPythonWrites(t, script, m, openView(t, dir), arrays, 5)
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("requests of the mount: %v", counter.take())
	if left, _ := filepath.Glob(filepath.Join(journals, "*", "*", "*")); len(left) > 0 {
		t.Errorf("a clean unmount left journal files: %v", left)
	}
	out, err := exec.Command(zarrfsBin, "check", "--s3-path-style", "s3://zarr/w").CombinedOutput()
	if err != nil {
		t.Errorf("zarrfs check s3://zarr/w: %v\n%s", err, out)
	}
	got := t.TempDir()
	srv.Download(t, "zarr", "w", got)
	w.check(t, o, got)
}

// TestS3TwoMounts: two read-write mounts of one bucket lose no update
// (twoMountsLoseNothing).
func TestS3TwoMounts(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir, _ := writeStore(t)
	srv.Upload(t, dir, "zarr", "two")
	endpoint, counter := countingProxy(t, srv)
	useS3(t, srv, endpoint)
	twoMountsLoseNothing(t, dir, srv, "zarr", "two", "s3://zarr/two", "--s3-path-style")
	t.Logf("requests: %v", counter.take())
}

// bucketServer is a test server of a cloud's buckets.
type bucketServer interface {
	// Download copies the objects below prefix into dir with a client
	// independent of zarrfs.
	Download(t testing.TB, bucket, prefix, dir string)
}

// twoMountsLoseNothing: two read-write mounts of url, the bucket prefix
// holding a copy of dir, as on two machines, write disjoint inner chunks
// of the same shards at once; each publishes whole shards with
// conditional uploads, re-reading when the other won, so that after both
// unmount the bucket holds every write of both.
func twoMountsLoseNothing(t *testing.T, dir string, srv bucketServer, bucket, prefix, url string, flags ...string) {
	t.Helper()
	a := storeArray(t, dir, "int32_raw_3d") // raw inner chunks: any bytes of the right size
	size := 4 * nd.Size(a.Sharding().ChunkShape())
	var coords [][]int
	grid := a.InnerGrid()
	for c := make([]int, len(grid)); ; {
		coords = append(coords, slices.Clone(c))
		if !nd.Next(c, grid) {
			break
		}
	}
	content := func(mount, i int) []byte {
		return bytes.Repeat([]byte{byte(mount + 1), byte(i), byte(i >> 8), 0xa5}, size/4)
	}
	mounts := []*integration.Mount{
		mount(t, url, append(slices.Clone(flags), "--journal-dir", t.TempDir())...),
		mount(t, url, append(slices.Clone(flags), "--journal-dir", t.TempDir())...),
	}
	var wg sync.WaitGroup
	for k, m := range mounts {
		wg.Go(func() {
			for i, c := range coords {
				if i%2 != k {
					continue
				}
				p := filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", c))
				if err := os.WriteFile(p, content(k, i), 0o644); err != nil {
					t.Errorf("mount %d: write %s: %v", k, p, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Both publish what they hold as they unmount, at once, so that their
	// conditional uploads race.
	for _, m := range mounts {
		wg.Go(func() {
			if err := m.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got := t.TempDir()
	srv.Download(t, bucket, prefix, got)
	lost := 0
	for i, c := range coords {
		b, ok := storedInner(t, got, a, c)
		if !ok || !bytes.Equal(b, content(i%2, i)) {
			lost++
			if lost <= 5 {
				t.Errorf("inner chunk %v does not hold what mount %d wrote", c, i%2)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d writes lost", lost, len(coords))
	} else {
		t.Logf("%d inner chunks written by two mounts, none lost", len(coords))
	}
}

// TestS3Crash kills an s3:// mount with SIGKILL right after its writes
// returned, before it publishes them: `zarrfs check` names the journal it
// left on local disk (exit 1), a --ro mount shows the writes, and `zarrfs
// recover` publishes them into the bucket; killed again, the next
// read-write mount replays its journal.
func TestS3Crash(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir, _ := writeStore(t)
	srv.Upload(t, dir, "zarr", "crash")
	useS3(t, srv, srv.Endpoint)
	a := storeArray(t, dir, "int32_raw_3d")
	size := 4 * nd.Size(a.Sharding().ChunkShape())
	journals := t.TempDir()
	url := "s3://zarr/crash"
	m := mount(t, url, "--s3-path-style", "--journal-dir", journals)
	var coords [][]int
	grid := a.InnerGrid()
	for c := make([]int, len(grid)); len(coords) < 6; {
		coords = append(coords, slices.Clone(c))
		if !nd.Next(c, grid) {
			break
		}
	}
	content := func(i int) []byte { return bytes.Repeat([]byte{0x5c, byte(i), 0, 1}, size/4) }
	for i, c := range coords {
		if err := os.WriteFile(filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", c)), content(i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.Kill()
	args := []string{"--s3-path-style", "--journal-dir", journals, url}
	out, err := exec.Command(zarrfsBin, append([]string{"check"}, args...)...).CombinedOutput()
	if !isExit(err, 1) || !strings.Contains(string(out), "UNPUBLISHED ") {
		t.Errorf("zarrfs check after the kill: %v, want exit 1 naming the journal\n%s", err, out)
	}
	ro := mount(t, url, "--ro", "--s3-path-style", "--journal-dir", journals)
	for i, c := range coords {
		b, err := os.ReadFile(filepath.Join(ro.Dir, "v3", a.Path, keyIn(a, "v3", c)))
		if err != nil || !bytes.Equal(b, content(i)) {
			t.Errorf("the --ro mount shows %v of inner chunk %v, not the acknowledged write (%v)", b[:min(len(b), 4)], c, err)
		}
	}
	if err := ro.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(zarrfsBin, append([]string{"recover"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("zarrfs recover: %v\n%s", err, out)
	}
	if out, err := exec.Command(zarrfsBin, append([]string{"check"}, args...)...).CombinedOutput(); err != nil {
		t.Errorf("zarrfs check after recover: %v\n%s", err, out)
	}
	got := t.TempDir()
	srv.Download(t, "zarr", "crash", got)
	for i, c := range coords {
		if b, ok := storedInner(t, got, a, c); !ok || !bytes.Equal(b, content(i)) {
			t.Errorf("the bucket does not hold the write of inner chunk %v after recover", c)
		}
	}
	// Again, and this time the next read-write mount replays the journal.
	m = mount(t, url, "--s3-path-style", "--journal-dir", journals)
	for i, c := range coords {
		if err := os.WriteFile(filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", c)), content(100+i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.Kill()
	m = mount(t, url, "--s3-path-style", "--journal-dir", journals)
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Log(), "replayed a journal") {
		t.Errorf("the read-write remount did not replay the journal:\n%s", m.Log())
	}
	got = t.TempDir()
	srv.Download(t, "zarr", "crash", got)
	for i, c := range coords {
		if b, ok := storedInner(t, got, a, c); !ok || !bytes.Equal(b, content(100+i)) {
			t.Errorf("the bucket does not hold the write of inner chunk %v after a read-write remount", c)
		}
	}
}

// TestS3DiskCache reads every chunk file of an array through an s3://
// mount with --cache-dir, then again through a new mount with the same
// directory: the second read fetches no chunk (each shard index costs one
// conditional request, answered 304 without a body). After the shards are
// replaced in the bucket, a third mount serves the new bytes.
func TestS3DiskCache(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	srv.Upload(t, dir, "zarr", "dc")
	endpoint, counter := countingProxy(t, srv)
	useS3(t, srv, endpoint)
	h := openView(t, dir)
	var a *zarr.Array
	for _, g := range arrays {
		if n, _ := h.Node(g.Path); g.Sharded && n.Array.Sharding() != nil && len(n.Array.Shape) == 2 {
			a = n.Array
			break
		}
	}
	cacheDir := t.TempDir()
	readAll := func() map[string][]byte {
		m := mount(t, "s3://zarr/dc", "--ro", "--s3-path-style", "--cache-dir", cacheDir)
		defer m.Stop()
		counter.take()
		files := map[string][]byte{}
		err := filepath.WalkDir(filepath.Join(m.Dir, "v3", a.Path, "c"), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(m.Dir, p)
			files[rel] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	first := readAll()
	cold := counter.take()
	second := readAll()
	warm := counter.take()
	t.Logf("%d chunk files; first mount: %v; second mount, same --cache-dir: %v", len(first), cold, warm)
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatal("the second mount read other bytes")
	}
	if warm["ranged GET"] != 0 || warm["GET"] != 0 || warm["suffix GET"] > cold["suffix GET"] {
		t.Errorf("with the disk cache, reading again sent %v; want no chunk fetched", warm)
	}
	// Replace the array's shards with scrambled ones (same content, other
	// layout): the cache must not serve the old layout's ranges.
	local, err := store.OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if err := zarrtest.ScrambleShards(t.Context(), local, a); err != nil {
		t.Fatal(err)
	}
	srv.Upload(t, filepath.Join(dir, a.Path), "zarr", "dc/"+a.Path)
	third := readAll()
	if fmt.Sprint(first) != fmt.Sprint(third) {
		t.Error("after the shards were rewritten in another layout, the mount with the disk cache read other chunk bytes")
	}
}

// TestS3RejectedWrites: garbage chunk bytes, chunk names outside the grid
// and invalid attributes written through an s3:// mount fail with EINVAL,
// and the bucket, downloaded after unmounting, holds exactly what was
// uploaded.
func TestS3RejectedWrites(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	srv.Upload(t, dir, "zarr", "rej")
	useS3(t, srv, srv.Endpoint)
	m := mount(t, "s3://zarr/rej", "--s3-path-style", "--journal-dir", t.TempDir())
	arr := filepath.Join(m.Dir, "v2", "uint16_zstd_end")
	for _, w := range []struct{ name, data string }{
		{"0.0", "garbage, not a zstd frame"},
		{"99.99", "out of the grid"},
		{".zattrs", "{not json"},
	} {
		if err := writeTrunc(filepath.Join(arr, w.name), []byte(w.data)); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("writing %s: %v, want EINVAL", w.name, err)
		}
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	got := t.TempDir()
	srv.Download(t, "zarr", "rej", got)
	requireSameFiles(t, storeFiles(t, dir), storeFiles(t, got))
}
