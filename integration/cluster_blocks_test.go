package integration_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// peerURLs returns n free peer addresses and their URLs.
func peerURLs(t *testing.T, n int) (addrs, urls []string) {
	for range n {
		a := freeAddr(t)
		addrs, urls = append(addrs, a), append(urls, "http://"+a)
	}
	return addrs, urls
}

// TestClusterBlocks: three peered mounts read every inner chunk of an
// array whose shards are cut into several runs, each mount in another
// order (forward, backward, every third chunk first), after one mount
// outside the cluster read it alone. The caches hold aligned blocks of the
// shards, named whatever runs the readers made: the three together send
// the store at most 1.1 times the data GETs of the one alone (+2), and
// read the original bytes.
func TestClusterBlocks(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir := t.TempDir()
	s := zarrtest.OpenStore(t, dir)
	crc := []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}
	// One shard of 128 inner chunks of 128 KiB (and a crc32c): 16.8 MB of
	// chunks, fetched by one mount in three runs.
	err := zarr.CreateGroup(t.Context(), s, "", 3, nil)
	var a *zarr.Array
	if err == nil {
		a, err = zarr.CreateArrayV3(t.Context(), s, "big", &meta.ArrayV3{
			Shape: []int{4096, 4096}, DataType: dtype.TypeUint8, ChunkShape: []int{4096, 4096}, FillValue: []byte{0},
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
			Codecs:      []meta.Codec{zarrtest.Sharding([]int{256, 512}, crc, crc, "end")},
		})
	}
	if err == nil {
		c := codec.NewChunk(codec.Spec{Shape: a.Shape, Type: a.Type, Fill: a.Fill()})
		rand.NewChaCha8([32]byte{7}).Read(c.Data) // no chunk is all fill value
		err = a.Write(t.Context(), c)
	}
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	srv.Upload(t, dir, "zarr", "blk")
	endpoint, counter := countingProxy(t, srv)
	useS3(t, srv, endpoint)
	t.Setenv("ZARRFS_PEER_TOKEN", "s3cret")
	grid := a.InnerGrid()
	var order []int // chunk indexes in C order
	for i := range nd.Size(grid) {
		order = append(order, i)
	}
	want := make([][]byte, nd.Size(grid)) // the stored inner chunks, by index in C order
	shard, err := os.ReadFile(filepath.Join(dir, a.ChunkKey([]int{0, 0})))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := a.Sharding().ReadIndex(bytes.NewReader(shard), int64(len(shard)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		c := make([]int, len(grid))
		nd.Unravel(i, grid, c)
		_, local := a.InnerChunk(c)
		off, n, ok := ix.Chunk(local)
		if !ok {
			t.Fatalf("inner chunk %v is not stored", c)
		}
		want[i] = shard[off : off+n]
	}
	readAll := func(m *integration.Mount, idx []int) {
		c := make([]int, len(grid))
		for _, i := range idx {
			nd.Unravel(i, grid, c)
			got, err := os.ReadFile(filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", c)))
			if err != nil || !bytes.Equal(got, want[i]) {
				t.Errorf("inner chunk %v through %s: %v; not the original bytes", c, m.Dir, err)
				return
			}
		}
	}
	data := func(c map[string]int) int { return c["ranged GET"] + c["GET"] }

	alone := mount(t, "s3://zarr/blk", "--ro", "--revalidate", "1m")
	counter.take() // discovery
	readAll(alone, order)
	one := counter.take()

	addrs, peers := peerURLs(t, 3)
	var nodes []*integration.Mount
	for _, addr := range addrs {
		nodes = append(nodes, mount(t, "s3://zarr/blk", "--ro", "--revalidate", "1m", "--peers", strings.Join(peers, ","), "--peer-listen", addr))
	}
	counter.take()
	backward := make([]int, len(order))
	for i, v := range order {
		backward[len(order)-1-i] = v
	}
	var strided []int
	for r := range 3 {
		for i := r; i < len(order); i += 3 {
			strided = append(strided, order[i])
		}
	}
	var wg sync.WaitGroup
	for i, idx := range [][]int{order, backward, strided} {
		wg.Go(func() { readAll(nodes[i], idx) })
	}
	wg.Wait()
	three := counter.take()
	all := data(three)
	t.Logf("origin requests: one mount alone %v; three peered mounts at once (forward, backward, strided) %v: %d data GETs against %d", one, three, all, data(one))
	if float64(all) > 1.1*float64(data(one))+2 {
		t.Errorf("three peered mounts sent %d data GETs to the store, one alone %d: want at most 1.1x + 2", all, data(one))
	}
}

// TestClusterTranscodeSettings: two peered mounts with different
// --v2-transcode settings (raw, blosc-lz4) read the v2 view of every array
// with zarr-python, each in turn: each reads every array to its digest,
// which needs the bytes its own .zarray describes. Their transcoded
// chunks have different keys, which each node's peer answers with the
// asker's encoding: no value is sent that fails its check.
func TestClusterTranscodeSettings(t *testing.T) {
	o := zarrtest.NewOracle(t)
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir := t.TempDir()
	want := generatedDigests(zarrtest.WriteV3Store(t, dir))
	srv.Upload(t, dir, "zarr", "tc")
	endpoint, _ := countingProxy(t, srv)
	useS3(t, srv, endpoint)
	t.Setenv("ZARRFS_PEER_TOKEN", "s3cret")
	addrs, peers := peerURLs(t, 2)
	var nodes []*integration.Mount
	for i, setting := range []string{"raw", "blosc-lz4"} {
		nodes = append(nodes, mount(t, "s3://zarr/tc", "--ro", "--revalidate", "1m", "--v2-transcode", setting,
			"--peers", strings.Join(peers, ","), "--peer-listen", addrs[i]))
	}
	for i, m := range nodes {
		got := o.ZarrPythonAll(t, filepath.Join(m.Dir, "v2"))
		for p, d := range want {
			if r, ok := got[p]; ok && (r.Error != "" || r.SHA256 != d) {
				t.Errorf("node %d: zarr-python reads %s: %q, digest %s; want %s", i+1, p, r.Error, r.SHA256, d)
			}
		}
		if len(got) == 0 {
			t.Fatalf("node %d: zarr-python found no array in v2/", i+1)
		}
	}
	for i, m := range nodes {
		st := readStats(t, m.Dir)
		t.Logf("node %d: %d chunks transcoded; cluster %v", i+1, st.Transcodes, st.Cluster)
		if n := peerRejected(t, m); n != 0 {
			t.Errorf("node %d rejected %v values of its peer: the nodes exchanged chunks of other encodings", i+1, n)
		}
		if st.Transcodes == 0 {
			t.Errorf("node %d transcoded no chunk: the test checks nothing", i+1)
		}
	}
}
