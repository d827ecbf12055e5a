package integration_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// crcArrays are arrays of clusterStore whose inner chunks and shard
// indexes end with a crc32c, so that a lying peer's bytes are caught. The
// v2 view transcodes the chunks of the last (a transpose v2 cannot
// express) to 8 raw bytes each: what a peer sends for them is checked by
// decoding it.
var crcArrays = []string{"float32_bigendian", "complex64_crc", "uint8_transposed_crc"}

// fakePeer serves a cluster's peer port with answer, which is given the
// kind of the key asked for and the length it asks for (the block's, the
// index's; 8 for a transcoded chunk, the size of one of
// uint8_transposed_crc). It counts the requests; the
// returned stop ends every answer still under way.
func fakePeer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, kind string, n int, stop <-chan struct{})) (peerURL string, requests *atomic.Int32, stop func()) {
	t.Helper()
	requests = new(atomic.Int32)
	done := make(chan struct{})
	addr := freeAddr(t)
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		key, _ := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/_groupcache/zarrfs/"))
		f := strings.Split(key, "\x00")
		n := 8
		switch f[0] {
		case "block.1":
			if o, i, err := blocks.ParseKey(key); err == nil {
				_, bn := o.Block(i)
				n = int(bn)
			}
		case "index.2":
			spec := f[len(f)-2]
			spec = strings.TrimPrefix(strings.TrimPrefix(spec, "-"), "0+")
			n, _ = strconv.Atoi(spec)
		}
		answer(w, r, f[0], n, done)
	})}
	go srv.ListenAndServe()
	var once atomic.Bool
	stop = func() {
		if once.CompareAndSwap(false, true) {
			close(done)
			srv.Close()
		}
	}
	t.Cleanup(stop)
	return "http://" + addr, requests, stop
}

// clusterStore uploads zarrtest's v3 store, and uint8_transposed_crc, to
// a fresh S3 server and returns its local copy.
func clusterStore(t *testing.T, prefix string) string {
	t.Helper()
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	crc := []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}
	a, err := zarr.CreateArrayV3(t.Context(), s, "uint8_transposed_crc", &meta.ArrayV3{
		Shape: []int{4, 4, 4}, DataType: dtype.TypeUint8, ChunkShape: []int{4, 4, 4}, FillValue: []byte{0},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
		Codecs:      []meta.Codec{zarrtest.Sharding([]int{2, 2, 2}, append([]meta.Codec{zarrtest.C("transpose", `{"order":[1,0,2]}`)}, crc...), crc, "end")},
	})
	if err == nil {
		err = a.Write(t.Context(), zarrtest.Pattern(a, 3))
	}
	if err != nil {
		t.Fatal(err)
	}
	srv.Upload(t, dir, "zarr", prefix)
	endpoint, _ := countingProxy(t, srv)
	useS3(t, srv, endpoint)
	return dir
}

// clusterNodes mounts s3://zarr/PREFIX twice as nodes of one cluster whose
// peers also include the fakes.
func clusterNodes(t *testing.T, prefix string, fakes []string, args ...string) []*integration.Mount {
	t.Helper()
	t.Setenv("ZARRFS_PEER_TOKEN", "s3cret")
	addrs := []string{freeAddr(t), freeAddr(t)}
	peers := slices.Clone(fakes)
	for _, a := range addrs {
		peers = append(peers, "http://"+a)
	}
	var nodes []*integration.Mount
	for _, a := range addrs {
		nodes = append(nodes, mount(t, "s3://zarr/"+prefix, append([]string{"--ro", "--peers", strings.Join(peers, ","), "--peer-listen", a}, args...)...))
	}
	return nodes
}

// arrayFiles reads every file of the arrays in both views of a mount,
// each read within limit and all within limit per array and view (a
// listing or read taking longer fails the test).
func arrayFiles(t *testing.T, root string, arrays []string, limit time.Duration) map[string][]byte {
	t.Helper()
	type result struct {
		files map[string][]byte
		err   error
	}
	done := make(chan result, 1)
	go func() {
		files := map[string][]byte{}
		for _, view := range []string{"v3", "v2"} {
			for _, a := range arrays {
				err := filepath.WalkDir(filepath.Join(root, view, a), func(p string, d os.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					b, err := readWithin(p, limit)
					rel, _ := filepath.Rel(root, p)
					files[rel] = b
					return err
				})
				if err != nil {
					done <- result{nil, err}
					return
				}
			}
		}
		done <- result{files, nil}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.files
	case <-time.After(limit * time.Duration(2*len(arrays))):
		t.Fatalf("%s: the arrays' files were not listed and read within %v", root, limit*time.Duration(2*len(arrays)))
		return nil
	}
}

// readWithin reads a file, failing when that takes longer than limit.
func readWithin(path string, limit time.Duration) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := os.ReadFile(path)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-time.After(limit):
		return nil, fmt.Errorf("%s: no answer within %v", path, limit)
	}
}

func sameFiles(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: no files to compare", what)
	}
	for p, w := range want {
		if g, ok := got[p]; !ok || !bytes.Equal(g, w) {
			t.Errorf("%s: %s differs from the store's (%d bytes, want %d)", what, p, len(g), len(w))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d files, want %d", what, len(got), len(want))
	}
}

func peerRejected(t *testing.T, m *integration.Mount) float64 {
	n, _ := readStats(t, m.Dir).Cluster["peer_rejected"].(float64)
	return n
}

// TestClusterLyingPeer: two real nodes share a cluster with fake peers
// that answer every key with 0xAA bytes of the length it asks for. Every
// file of both views of crc32c-protected arrays read through either node
// is the store's (as a mount outside the cluster reads it): the fakes'
// values are rejected, counted, logged, and read from the store instead.
func TestClusterLyingPeer(t *testing.T) {
	clusterStore(t, "lie")
	want := arrayFiles(t, mount(t, "s3://zarr/lie", "--ro").Dir, crcArrays, time.Minute)
	var fakes []string
	var mu sync.Mutex
	asked := map[string]int{} // by kind of key
	for range 8 {             // most keys have a lying owner
		u, _, _ := fakePeer(t, func(w http.ResponseWriter, r *http.Request, kind string, n int, stop <-chan struct{}) {
			mu.Lock()
			asked[kind]++
			mu.Unlock()
			w.Write(bytes.Repeat([]byte{0xAA}, n))
		})
		fakes = append(fakes, u)
	}
	nodes := clusterNodes(t, "lie", fakes)
	for i, m := range nodes {
		sameFiles(t, fmt.Sprintf("node %d", i+1), arrayFiles(t, m.Dir, crcArrays, time.Minute), want)
	}
	rejected := peerRejected(t, nodes[0]) + peerRejected(t, nodes[1])
	mu.Lock()
	defer mu.Unlock()
	t.Logf("the fake peers were asked for %v; the nodes rejected %v values", asked, rejected)
	if asked["block.1"] == 0 || asked["transcoded.2"] == 0 || rejected == 0 {
		t.Fatalf("the fake peers were asked for %v, %v values rejected: the test attacked too little", asked, rejected)
	}
	if !strings.Contains(nodes[0].Log()+nodes[1].Log(), "fails its check") {
		t.Error("no node logged a rejected value")
	}
}

// plainArrays are arrays of clusterStore whose inner chunks carry no
// crc32c (the last one's index neither): nothing checks what a peer sends
// for them.
var plainArrays = []string{"uint16_zstd_end", "int16_dotkeys", "int32_gzip_start_nocrc"}

// TestClusterLyingPeerUnverifiable: fake peers answer every key with
// 0x55 bytes of the length it asks for. Nodes with --peer-verify=crc32c-only
// read the arrays whose chunks carry no crc32c from the store, and
// every file of both views is the store's; they log that they do. Nodes
// without it serve the fakes' bytes for some of those files (what the
// flag is for), and log that peers can.
func TestClusterLyingPeerUnverifiable(t *testing.T) {
	clusterStore(t, "plain")
	want := arrayFiles(t, mount(t, "s3://zarr/plain", "--ro").Dir, plainArrays, time.Minute)
	var fakes []string
	var asked atomic.Int32
	for range 8 { // most keys have a lying owner
		u, _, _ := fakePeer(t, func(w http.ResponseWriter, r *http.Request, kind string, n int, stop <-chan struct{}) {
			asked.Add(1)
			w.Write(bytes.Repeat([]byte{0x55}, n))
		})
		fakes = append(fakes, u)
	}
	verified := clusterNodes(t, "plain", fakes, "--peer-verify=crc32c-only")
	for i, m := range verified {
		sameFiles(t, fmt.Sprintf("node %d with --peer-verify=crc32c-only", i+1), arrayFiles(t, m.Dir, plainArrays, time.Minute), want)
		for _, a := range plainArrays {
			if !strings.Contains(m.Log(), "read from the store, not from peers") || !strings.Contains(m.Log(), "/"+a) {
				t.Errorf("node %d with --peer-verify=crc32c-only does not log that %s is read from the store:\n%s", i+1, a, m.Log())
			}
		}
	}
	for _, m := range verified {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	}

	trusting := clusterNodes(t, "plain", fakes)
	differ := 0
	for _, m := range trusting {
		got := arrayFiles(t, m.Dir, plainArrays, time.Minute)
		for p, w := range want {
			if !bytes.Equal(got[p], w) {
				differ++
			}
		}
		if !strings.Contains(m.Log(), "peers can serve wrong bytes") || !strings.Contains(m.Log(), "/int16_dotkeys") {
			t.Errorf("a node without --peer-verify does not warn that peers can serve wrong bytes for /int16_dotkeys:\n%s", m.Log())
		}
	}
	t.Logf("the fakes were asked %d times; without --peer-verify, %d files of both nodes were theirs", asked.Load(), differ)
	if differ == 0 {
		t.Error("no node without --peer-verify served a fake's bytes: the test attacked too little")
	}
}

// TestClusterStallingPeer: fake peers announcing 1 GiB and then sending
// 256 MiB of it before stalling, trickling a byte a second, and resetting
// connections cost
// the readers of two real nodes a few seconds at most: every file is
// read within a generous limit, right, and the node's memory stays within
// 100 MiB of a mount's outside the cluster.
func TestClusterStallingPeer(t *testing.T) {
	clusterStore(t, "stall")
	ref := mount(t, "s3://zarr/stall", "--ro")
	want := arrayFiles(t, ref.Dir, crcArrays, time.Minute)
	base := daemonRSS(t, ref.Pid())
	// The fakes take turns at stalling, trickling and resetting: each
	// attack is made whatever keys they own.
	attacks := []func(w http.ResponseWriter, r *http.Request, n int, stop <-chan struct{}){
		func(w http.ResponseWriter, r *http.Request, n int, stop <-chan struct{}) { // 1 GiB announced
			w.Header().Set("Content-Length", strconv.Itoa(1<<30))
			w.WriteHeader(http.StatusOK)
			chunk := bytes.Repeat([]byte{0xAA}, 1<<20)
			for range 256 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			w.(http.Flusher).Flush()
			select {
			case <-stop:
			case <-r.Context().Done():
			}
		},
		func(w http.ResponseWriter, r *http.Request, n int, stop <-chan struct{}) { // a byte a second
			w.Header().Set("Content-Length", strconv.Itoa(n))
			w.WriteHeader(http.StatusOK)
			for range n {
				w.Write([]byte{0xAA})
				w.(http.Flusher).Flush()
				select {
				case <-stop:
					return
				case <-r.Context().Done():
					return
				case <-time.After(time.Second):
				}
			}
		},
		func(w http.ResponseWriter, r *http.Request, n int, stop <-chan struct{}) { // a reset
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
		},
	}
	var turn atomic.Int32
	var fakes []string
	for range 4 {
		u, _, stop := fakePeer(t, func(w http.ResponseWriter, r *http.Request, kind string, n int, stop <-chan struct{}) {
			attacks[int(turn.Add(1)-1)%len(attacks)](w, r, n, stop)
		})
		// Stop the fakes before the nodes unmount (cleanups run last
		// first): a node still waiting for one would not.
		defer stop()
		fakes = append(fakes, u)
	}
	nodes := clusterNodes(t, "stall", fakes)
	for i, m := range nodes {
		start := time.Now()
		got := arrayFiles(t, m.Dir, crcArrays, 20*time.Second)
		t.Logf("node %d read %d files in %v", i+1, len(got), time.Since(start))
		sameFiles(t, fmt.Sprintf("node %d", i+1), got, want)
	}
	if turn.Load() < int32(len(attacks)) {
		t.Fatalf("the fake peers were asked %d times: the test attacked too little", turn.Load())
	}
	for i, m := range nodes {
		rss := daemonRSS(t, m.Pid())
		t.Logf("node %d: peak RSS %d MiB (a mount outside the cluster: %d MiB); cluster stats %v", i+1, rss>>20, base>>20, readStats(t, m.Dir).Cluster)
		if rss > base+100<<20 {
			t.Errorf("node %d peaked at %d MiB: it read a peer's announced value", i+1, rss>>20)
		}
	}
}

// peerCerts writes a CA and a certificate it signed for 127.0.0.1 (for
// serving and as a client) into dir, and returns their files.
func peerCerts(t *testing.T, dir, name string) (ca, cert, key string) {
	t.Helper()
	write := func(file, typ string, der []byte) string {
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(leafKey)
	return write(name+"-ca.pem", "CERTIFICATE", caDER), write(name+".pem", "CERTIFICATE", leafDER), write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
}

// TestClusterTLS: two nodes with --peer-tls-cert/--peer-tls-key/--peer-ca
// and --peer-token-file share their cache over mutual TLS and read the
// store's bytes; their peer port refuses plain HTTP, a client without a
// certificate, and one whose certificate another CA signed. A token on
// the command line is warned about.
func TestClusterTLS(t *testing.T) {
	clusterStore(t, "tls")
	want := arrayFiles(t, mount(t, "s3://zarr/tls", "--ro").Dir, crcArrays, time.Minute)
	dir := t.TempDir()
	ca, cert, key := peerCerts(t, dir, "peers")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ZARRFS_PEER_TOKEN", "")
	addrs := []string{freeAddr(t), freeAddr(t)}
	peers := "https://" + addrs[0] + ",https://" + addrs[1]
	var nodes []*integration.Mount
	for _, a := range addrs {
		nodes = append(nodes, mount(t, "s3://zarr/tls", "--ro", "--peers", peers, "--peer-listen", a,
			"--peer-token-file", tokenFile, "--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-ca", ca))
	}
	for i, m := range nodes {
		sameFiles(t, fmt.Sprintf("node %d", i+1), arrayFiles(t, m.Dir, crcArrays, time.Minute), want)
	}
	var loads float64
	for _, m := range nodes {
		n, _ := readStats(t, m.Dir).Cluster["peer_loads"].(float64)
		loads += n
	}
	if loads == 0 {
		t.Error("no node got a value from its peer over TLS")
	}
	if strings.Contains(nodes[0].Log(), "command line") {
		t.Error("a token from --peer-token-file was warned about")
	}

	path := "/_groupcache/zarrfs/x"
	if resp, err := http.Get("http://" + addrs[0] + path); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the TLS peer port answered plain HTTP")
		}
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(ca)
	pool.AppendCertsFromPEM(caPEM)
	_, otherCert, otherKey := peerCerts(t, dir, "other")
	other, err := tls.LoadX509KeyPair(otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	for what, certs := range map[string][]tls.Certificate{"no certificate": nil, "a certificate of another CA": {other}} {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
		req, _ := http.NewRequest(http.MethodGet, "https://"+addrs[0]+path, nil)
		req.Header.Set(cluster.TokenHeader, "s3cret")
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("a client with %s and the token: HTTP %d, want the TLS handshake refused", what, resp.StatusCode)
		}
	}

	t.Setenv("ZARRFS_PEER_TOKEN", "")
	m := mount(t, "s3://zarr/tls", "--ro", "--peers", "http://"+freeAddr(t), "--peer-listen", freeAddr(t), "--peer-token", "s3cret")
	if !strings.Contains(m.Log(), "--peer-token is on the command line") {
		t.Errorf("a token on the command line was not warned about:\n%s", m.Log())
	}
}
