package integration_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// consolidate adds consolidated_metadata, as zarr-python 3 writes it, to
// the root group of the v3 store at dir.
func consolidate(t *testing.T, dir string) {
	t.Helper()
	h := openView(t, dir)
	nodes := map[string]json.RawMessage{}
	for _, n := range h.Nodes() {
		if n.Path == "" || n.Format != 3 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n.Path, zarr.ZarrJSON))
		if err != nil {
			t.Fatal(err)
		}
		nodes[n.Path] = b
	}
	rootPath := filepath.Join(dir, zarr.ZarrJSON)
	var root map[string]any
	b, err := os.ReadFile(rootPath)
	if err == nil {
		err = json.Unmarshal(b, &root)
	}
	if err != nil || root["node_type"] != "group" {
		t.Fatalf("%s is not a v3 group: %v", rootPath, err)
	}
	root["consolidated_metadata"] = map[string]any{"kind": "inline", "must_understand": false, "metadata": nodes}
	out, _ := json.Marshal(root)
	if err := os.WriteFile(rootPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPReads serves stores with Go's file server on 127.0.0.1, which
// cannot list: a store with consolidated metadata mounts whole, and the
// oracles read both views to the original digests; a URL that points at
// one array mounts that array.
func TestHTTPReads(t *testing.T) {
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	consolidate(t, dir)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)

	m := mount(t, srv.URL+"/", "--ro")
	checkOracles(t, o, m.Dir, m.Log(), generatedDigests(arrays))

	var one zarrtest.Generated
	for _, g := range arrays {
		if g.Sharded && g.ZarritaReads {
			one = g
			break
		}
	}
	single := mount(t, srv.URL+"/"+one.Path, "--ro")
	got := o.ZarrPythonAll(t, filepath.Join(single.Dir, "v2"))
	if r := got[""]; r.SHA256 != one.Digest {
		t.Errorf("a mount of %s/%s: zarr-python read %+v, want digest %s\n%s", srv.URL, one.Path, got, one.Digest, single.Log())
	}
}

// TestHTTPFaults puts failures between the mount and the web server:
// every third request answered 503 and some others cut in the middle of
// their bodies (retried: reads succeed), and one shard that always
// answers 500 (its chunk files fail with EIO, the others read; nothing
// hangs and the mount unmounts cleanly).
func TestHTTPFaults(t *testing.T) {
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	consolidate(t, dir)
	h := openView(t, dir)
	var a *zarr.Array
	for _, g := range arrays {
		if n, _ := h.Node(g.Path); g.Sharded && n.Array.Sharding() != nil && len(n.Array.Shape) == 2 {
			a = n.Array
			break
		}
	}
	if a == nil {
		t.Fatal("no 2-D sharded array")
	}
	broken := "/" + a.ChunkKey(make([]int, len(a.Shape)))
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == broken:
			http.Error(w, "broken", http.StatusInternalServerError)
		case n.Add(1)%3 == 0:
			http.Error(w, "slow down", http.StatusServiceUnavailable)
		case n.Load()%5 == 0:
			// The connection drops in the middle of the body.
			w.Header().Set("Content-Length", "1000000")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("partial"))
			panic(http.ErrAbortHandler)
		default:
			http.FileServer(http.Dir(dir)).ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	m := mount(t, srv.URL+"/", "--ro", "--remote-attempts", "4")
	bad, good := 0, 0
	grid := a.InnerGrid()
	for c := make([]int, len(grid)); ; {
		if _, stored := storedInner(t, dir, a, c); stored {
			p := filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", c))
			shard, _ := a.InnerChunk(c)
			_, err := os.ReadFile(p)
			switch {
			case "/"+a.ChunkKey(shard) != broken:
				good++
				if err != nil {
					t.Errorf("%s: %v", p, err)
				}
			case bad < 2:
				bad++
				if !errors.Is(err, syscall.EIO) {
					t.Errorf("%s of the failing shard: %v, want EIO", p, err)
				}
			}
		}
		if !nd.Next(c, grid) {
			break
		}
	}
	t.Logf("%d chunk files read through 503s and cut bodies, %d of the failing shard gave EIO", good, bad)
	if !strings.Contains(m.Log(), "HTTP 500") {
		t.Errorf("the log does not name the failing status:\n%s", m.Log())
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
}
