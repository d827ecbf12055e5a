package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestCluster mounts one s3:// store three times as peers of one cache
// (as on three machines) and reads every chunk file of an array through
// each in turn: the second and third mounts fetch no chunk bytes from the
// store, which the three together ask at most 1.1 times what one mount
// does, and all three read the original bytes. A peer request without
// the token, or for a store the node does not mount, is refused.
func TestCluster(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	srv.Upload(t, dir, "zarr", "cl")
	endpoint, counter := countingProxy(t, srv)
	useS3(t, srv, endpoint)
	t.Setenv("ZARRFS_PEER_TOKEN", "s3cret")
	h := openView(t, dir)
	var a *zarr.Array
	for _, g := range arrays {
		if n, _ := h.Node(g.Path); g.Sharded && n.Array.Sharding() != nil && len(n.Array.Shape) == 2 {
			a = n.Array
			break
		}
	}
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	var peers []string
	for _, addr := range addrs {
		peers = append(peers, "http://"+addr)
	}
	var mounts []*integration.Mount
	for _, addr := range addrs {
		mounts = append(mounts, mount(t, "s3://zarr/cl", "--ro", "--revalidate", "1m", "--peers", strings.Join(peers, ","), "--peer-listen", addr))
	}
	counter.take() // discovery
	grid := a.InnerGrid()
	// Every inner chunk: a stored one reads back as stored, any other is
	// no file (readers use the fill value).
	readAll := func(m *integration.Mount) {
		missing := 0
		for c := make([]int, len(grid)); ; {
			want, stored := storedInner(t, dir, a, c)
			got, err := os.ReadFile(filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", c)))
			switch {
			case stored && (err != nil || !bytes.Equal(got, want)):
				t.Fatalf("inner chunk %v through %s: %v; not the original bytes", c, m.Dir, err)
			case !stored && !errors.Is(err, fs.ErrNotExist):
				t.Fatalf("inner chunk %v, not stored, through %s: %d bytes, %v; want no such file", c, m.Dir, len(got), err)
			case !stored:
				missing++
			}
			if !nd.Next(c, grid) {
				break
			}
		}
		if missing == 0 {
			t.Fatalf("%s has no inner chunk missing: the test checks none", a.Path)
		}
	}
	var origin []map[string]int
	for _, m := range mounts {
		readAll(m)
		origin = append(origin, counter.take())
	}
	t.Logf("origin requests of the three mounts reading %s in turn: %v", a.Path, origin)
	gets := func(c map[string]int) int { return c["ranged GET"] + c["suffix GET"] + c["GET"] }
	if all := gets(origin[0]) + gets(origin[1]) + gets(origin[2]); float64(all) > 1.1*float64(gets(origin[0])) {
		t.Errorf("three peers sent %d GETs to the store, one alone %d: want at most 1.1x", all, gets(origin[0]))
	}
	if origin[1]["ranged GET"]+origin[2]["ranged GET"] > 0 {
		t.Errorf("the second and third mounts fetched chunk bytes from the store: %v %v", origin[1], origin[2])
	}
	st := readStats(t, mounts[1].Dir)
	t.Logf("second mount's stats: %+v", st.Cluster)
	// The v2 view, transcoded chunks included: what the first node's read
	// made the owners transcode serves the others.
	transcodes := func() (n uint64) {
		for _, m := range mounts {
			n += readStats(t, m.Dir).Transcodes
		}
		return n
	}
	var firstBytes map[string][]byte
	var after []uint64
	for i, m := range mounts {
		files := map[string][]byte{}
		err := filepath.WalkDir(filepath.Join(m.Dir, "v2"), func(p string, d os.DirEntry, err error) error {
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
		if i == 0 {
			firstBytes = files
		} else if fmt.Sprint(files) != fmt.Sprint(firstBytes) {
			t.Errorf("mount %d reads other v2 files than mount 1", i+1)
		}
		after = append(after, transcodes())
	}
	t.Logf("chunks transcoded in the cluster after each mount read v2/: %v", after)
	if after[0] == 0 || float64(after[2]) > 1.1*float64(after[0]) {
		t.Errorf("transcodes after each mount's read of v2/: %v; want the second and third to add (almost) none", after)
	}
	// The peer port.
	key := url.PathEscape(blocks.Object{Store: "s3://zarr/cl", Key: a.ChunkKey(make([]int, len(a.Shape))), Gen: "x", Size: 1}.BlockKey(0))
	foreign := url.PathEscape(blocks.Object{Store: "s3://other/store", Key: "k", Gen: "x", Size: 1}.BlockKey(0))
	for _, c := range []struct {
		token, key string
		want       int
	}{
		{"", key, http.StatusUnauthorized},
		{"wrong", key, http.StatusUnauthorized},
		{"s3cret", foreign, http.StatusForbidden},
	} {
		req, _ := http.NewRequest("GET", peers[0]+"/_groupcache/zarrfs/"+c.key, nil)
		if c.token != "" {
			req.Header.Set(cluster.TokenHeader, c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("a peer request with token %q for %q: HTTP %d, want %d", c.token, c.key, resp.StatusCode, c.want)
		}
	}

}

// TestClusterWritesAndDeadPeer: a write published through one peer is
// read by the others within the revalidation interval; after one peer is
// killed, the others keep reading the original bytes (the dead peer's
// keys are loaded from the store instead).
func TestClusterWritesAndDeadPeer(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir, _ := writeStore(t)
	srv.Upload(t, dir, "zarr", "cw")
	endpoint, counter := countingProxy(t, srv)
	useS3(t, srv, endpoint)
	t.Setenv("ZARRFS_PEER_TOKEN", "s3cret")
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	var peers []string
	for _, addr := range addrs {
		peers = append(peers, "http://"+addr)
	}
	var mounts []*integration.Mount
	for _, addr := range addrs {
		mounts = append(mounts, mount(t, "s3://zarr/cw", "--revalidate", "1s", "--journal-dir", t.TempDir(),
			"--peers", strings.Join(peers, ","), "--peer-listen", addr))
	}
	raw := storeArray(t, dir, "int32_raw_3d")
	c0 := firstStoredInner(t, raw)
	path := func(m *integration.Mount) string { return filepath.Join(m.Dir, "v3", raw.Path, keyIn(raw, "v3", c0)) }
	old, err := os.ReadFile(path(mounts[1]))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if b, err := os.ReadFile(path(m)); err != nil || !bytes.Equal(b, old) {
			t.Fatalf("%s: %v", path(m), err)
		}
	}
	written := bytes.Repeat([]byte{7, 1, 7, 1}, len(old)/4)
	if err := os.WriteFile(path(mounts[0]), written, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the write is published", func() bool { return readStats(t, mounts[0].Dir).Unpublished == 0 })
	for _, m := range mounts[1:] {
		eventually(t, "a peer reads the published write", func() bool {
			b, err := os.ReadFile(path(m))
			return err == nil && bytes.Equal(b, written)
		})
	}
	mounts[2].Kill()
	counter.take()
	a := storeArray(t, dir, "uint16_zstd_end")
	grid := a.InnerGrid()
	for _, m := range mounts[:2] {
		for c := make([]int, len(grid)); ; {
			want, stored := storedInner(t, dir, a, c)
			got, err := os.ReadFile(filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", c)))
			if stored && (err != nil || !bytes.Equal(got, want)) {
				t.Fatalf("inner chunk %v through %s with a dead peer: %v; not the original bytes", c, m.Dir, err)
			}
			if !nd.Next(c, grid) {
				break
			}
		}
	}
	t.Logf("two live peers reading %s with the third dead: origin %v; stats %v", a.Path, counter.take(), readStats(t, mounts[0].Dir).Cluster)
}
