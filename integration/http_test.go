package integration_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
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
