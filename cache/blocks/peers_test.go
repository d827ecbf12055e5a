package blocks_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/cache/cluster"
)

// TestPeers runs a real cluster node (one per process) whose only peer
// lies: it owns every key and sends 0xAA bytes of each block's length. A
// block failing its own check is dropped and loaded by this node from the
// store (blocks.Load); one that passes it (no check) but fails the check
// across the range is read again from the store, fresh, past the
// cluster.
func TestPeers(t *testing.T) {
	s, o, want := object(t)
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, err := url.PathUnescape(r.URL.EscapedPath()[strings.LastIndex(r.URL.EscapedPath(), "/")+1:])
		lo, i, perr := blocks.ParseKey(k)
		if err != nil || perr != nil {
			http.Error(w, "bad key", http.StatusBadRequest)
			return
		}
		_, n := lo.Block(i)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		w.Write(bytes.Repeat([]byte{0xAA}, int(n)))
	}))
	defer liar.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	src, c := origin(s)
	node, err := cluster.Start(cluster.Options{
		Self: "http://" + addr, Listen: addr, Peers: []string{liar.URL}, Token: "s3cret", CacheBytes: 64 << 20,
		Accept: func(k string) bool { lo, _, err := blocks.ParseKey(k); return err == nil && lo.Store == o.Store },
		Load:   func(ctx context.Context, k string) ([]byte, error) { return blocks.Load(ctx, src, k) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	peers := &blocks.Peers{Cluster: node, Next: src}

	isBlock := func(i int64, b []byte) error {
		if off, n := o.Block(i); !bytes.Equal(b, want[off:off+n]) {
			return errBlock
		}
		return nil
	}
	read(t, peers, o, want, 10, 100, blocks.Checks{Block: isBlock})
	if st := node.Stats(); st.PeerRejected != 1 || c.requests.Load() != 1 {
		t.Errorf("block 0 from a lying owner: %d values rejected, %d requests to the store; want 1 and 1", st.PeerRejected, c.requests.Load())
	}
	off, n := int64(blocks.Size+10), int64(100)
	read(t, peers, o, want, off, n, spanIs(want, off, n))
	if st := node.Stats(); st.PeerRejected != 1 || st.PeerLoads != 1 || c.requests.Load() != 2 {
		t.Errorf("block 1 from a lying owner, without a check of its own: %d values rejected, %d got from the owner, %d requests to the store in all; want 1, 1 and 2 (read again, fresh)", st.PeerRejected, st.PeerLoads, c.requests.Load())
	}
}
