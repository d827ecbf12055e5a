package integration_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestReadAheadZeroFetchesAhead: --read-ahead counts transcoded chunks
// prepared ahead, and means nothing else. Mounted with --read-ahead 0 over
// a web server, a reader reading the chunk files of a sharded array in key
// order still gets the bytes stored, has the chunk it reads next handed to
// the page cache after its lookup, and chunks fetched ahead of it.
func TestReadAheadZeroFetchesAhead(t *testing.T) {
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	consolidate(t, dir)
	h := openView(t, dir)
	var a *zarr.Array
	for _, g := range arrays {
		if n, _ := h.Node(g.Path); g.Sharded && n.Array.Sharding() != nil && nd.Size(n.Array.Grid()) > 1 {
			a = n.Array
			break
		}
	}
	if a == nil {
		t.Fatal("the generated store has no sharded array of several shards")
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	m := mount(t, srv.URL+"/", "--ro", "--read-ahead", "0")
	grid := a.InnerGrid()
	coords := make([]int, len(grid))
	read := 0
	for ok := nd.Size(grid) > 0; ok; ok = nd.Next(coords, grid) {
		want, _ := storedInner(t, dir, a, coords)
		if got := readOrMissing(t, chunkPath(m.Dir, "v3", ".", a, coords)); !bytes.Equal(got, want) {
			t.Errorf("chunk %v: %d bytes, want the %d stored", coords, len(got), len(want))
		}
		if want != nil {
			read++
		}
	}
	st := readStats(t, m.Dir)
	t.Logf("%s: %d chunk files read in key order; %d pushed to the page cache, %d fetched ahead, requests %v", a.Path, read, st.Pushed, st.ReadAhead, st.Requests)
	if st.Pushed == 0 {
		t.Errorf("--read-ahead 0: no chunk read in key order was pushed to the page cache\n%s", m.Log())
	}
	if st.ReadAhead == 0 {
		t.Errorf("--read-ahead 0: no chunk was fetched ahead of the reader\n%s", m.Log())
	}
}
