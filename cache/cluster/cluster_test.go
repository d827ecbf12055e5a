package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/golang/groupcache/groupcachepb"
)

// TestPeerProtocol runs one node (groupcache allows one per process) whose
// only peer is itself, so it loads every key, and talks to its peer port
// as another node would: the token and the accepted keys are enforced, a
// value travels as its bytes with its length, and a peer's getter reads
// it back; a length over the bound is refused before anything is read.
func TestPeerProtocol(t *testing.T) {
	c, self := testNode(t)
	run := runs.Add(1) // keys of this run, not cached by an earlier one (-count)
	get := func(token, key string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, self+basePath+groupName+"/"+url.PathEscape(key), nil)
		if token != "" {
			req.Header.Set(TokenHeader, token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	refusedBefore := c.Stats().Refused
	for _, tc := range []struct {
		token, key string
		want       int
	}{
		{"", "mine/x", http.StatusUnauthorized},
		{"wrong", "mine/x", http.StatusUnauthorized},
		{"s3cret", "theirs/a", http.StatusForbidden},
		{"s3cret", "mine/" + strings.Repeat("x", maxKey), http.StatusForbidden},
		{"s3cret", strings.Repeat("x", 3*maxKey+1), http.StatusBadRequest},
		{"s3cret", "mine/missing", http.StatusInternalServerError},
	} {
		resp, body := get(tc.token, tc.key)
		if resp.StatusCode != tc.want {
			t.Errorf("token %q, key %.20q: HTTP %d, want %d", tc.token, tc.key, resp.StatusCode, tc.want)
		}
		if bytes.Contains(body, []byte("no such value")) || bytes.Contains(body, []byte("mine/")) || bytes.Contains(body, []byte("theirs/")) {
			t.Errorf("token %q, key %.20q: the answer %q says what is internal (the key, the load's error)", tc.token, tc.key, body)
		}
	}
	if s := c.Stats(); s.Refused != refusedBefore+5 {
		t.Errorf("%d refused peer requests counted, want 5", s.Refused-refusedBefore)
	}

	key := "mine/" + strconv.Itoa(int(run))
	resp, body := get("s3cret", key)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, value) || resp.ContentLength != int64(len(value)) {
		t.Fatalf("a value: HTTP %d, %d bytes, length %d; want 200 and its %d bytes", resp.StatusCode, len(body), resp.ContentLength, len(value))
	}
	g := &peerGetter{p: testPeers(), base: self + basePath}
	group := groupName
	var out pb.GetResponse
	ctx := context.WithValue(context.Background(), checkKey{}, &Check{})
	if err := g.Get(ctx, &pb.GetRequest{Group: &group, Key: &key}, &out); err != nil || !bytes.Equal(out.Value, value) {
		t.Fatalf("the peer getter read %d bytes, %v; want the value", len(out.Value), err)
	}
	if n, _ := loads.Load(key); n.(*atomic.Int32).Load() != 1 {
		t.Errorf("%s loaded %d times, want once, then served from the cache", key, n.(*atomic.Int32).Load())
	}

	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(maxValue+1))
		w.WriteHeader(http.StatusOK)
	}))
	defer huge.Close()
	g.base = huge.URL + basePath
	if err := g.Get(ctx, &pb.GetRequest{Group: &group, Key: &key}, &out); err == nil {
		t.Error("a value longer than the bound was accepted")
	}
}

func testPeers() *peers {
	return &peers{token: "s3cret", transport: http.DefaultTransport, timeout: 2 * time.Second, logger: slog.New(slog.DiscardHandler), logged: map[string]struct{}{}}
}

// TestLyingPeer: a peer's value that fails the asker's check, or of a
// length the check refuses, is dropped and counted; one trickling its body
// is given up within the deadline; a peer failing repeatedly is then
// skipped without a request; and nothing is asked of a peer without a
// check (a node answering a peer loads the key itself).
func TestLyingPeer(t *testing.T) {
	var requests atomic.Int32
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch {
		case strings.HasSuffix(r.URL.Path, "trickle"):
			w.Header().Set("Content-Length", "10")
			w.WriteHeader(http.StatusOK)
			for range 10 {
				w.Write([]byte{0xAA})
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(time.Second):
				}
			}
		case strings.HasSuffix(r.URL.Path, "huge"):
			w.Header().Set("Content-Length", strconv.Itoa(1<<30))
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			w.Write(bytes.Repeat([]byte{0xAA}, 10))
		}
	}))
	defer peer.Close()
	p := testPeers()
	g := &peerGetter{p: p, base: peer.URL + basePath}
	group := groupName
	get := func(key string, check *Check) error {
		var out pb.GetResponse
		ctx := context.Background()
		if check != nil {
			ctx = context.WithValue(ctx, checkKey{}, check)
		}
		return g.Get(ctx, &pb.GetRequest{Group: &group, Key: &key}, &out)
	}
	exact10 := &Check{Size: func(n int64) error {
		if n != 10 {
			return errors.New("not 10 bytes")
		}
		return nil
	}}
	if err := get("plain", nil); !errors.Is(err, errNoCheck) || requests.Load() != 0 {
		t.Fatalf("a get without a check: %v after %d requests; want no request", err, requests.Load())
	}
	if err := get("plain", &Check{Value: func(b []byte) error { return errors.New("not the bytes") }}); err == nil {
		t.Error("a value failing its check was accepted")
	}
	start := time.Now()
	if err := get("huge", exact10); err == nil {
		t.Error("an announced 1 GiB was accepted for a 10-byte value")
	}
	if err := get("trickle", exact10); err == nil {
		t.Error("a trickled value was accepted")
	}
	if took := time.Since(start); took > 8*time.Second { // the deadline is 2 s
		t.Errorf("a stalled and a trickling peer took %v; want them given up within the deadline", took)
	}
	if p.rejected.Load() != 2 {
		t.Errorf("%d rejected values counted, want 2 (wrong bytes, wrong length)", p.rejected.Load())
	}
	// Three failures in a row: the peer is now skipped.
	before := requests.Load()
	if err := get("plain", exact10); !errors.Is(err, errBackingOff) || requests.Load() != before {
		t.Errorf("after 3 failures: %v, %d requests; want the peer skipped", err, requests.Load()-before)
	}
}

var (
	value = bytes.Repeat([]byte("chunk bytes "), 100_000)
	loads sync.Map // key -> *atomic.Int32
	// A load of mine/slow* waits for slowRelease, having said it started.
	slowStarted = make(chan struct{}, 1)
	slowRelease = make(chan struct{})
	runs        atomic.Int32
	node        struct {
		once sync.Once
		c    *Cluster
		self string
		err  error
	}
)

// testNode starts the process's node once: its only peer is itself, so it
// loads every key.
func testNode(t *testing.T) (*Cluster, string) {
	node.once.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			node.err = err
			return
		}
		addr := l.Addr().String()
		l.Close()
		node.self = "http://" + addr
		node.c, node.err = Start(Options{
			Self: node.self, Listen: addr, Peers: []string{node.self}, Token: "s3cret", CacheBytes: 16 << 20,
			Accept: func(key string) bool { return strings.HasPrefix(key, "mine/") },
			Load: func(ctx context.Context, key string) ([]byte, error) {
				n, _ := loads.LoadOrStore(key, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
				if key == "mine/missing" {
					return nil, errors.New("no such value")
				}
				if strings.HasPrefix(key, "mine/slow") {
					slowStarted <- struct{}{}
					select {
					case <-slowRelease:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				return value, nil
			},
		})
	})
	if node.err != nil {
		t.Fatal(node.err)
	}
	return node.c, node.self
}

// TestOwnerLoadOutlivesAsker: a peer asks the node for a key whose load
// is slow and gives up; the node's own reader, waiting for the same load,
// still gets the value: the load runs on the node's context, not the
// asker's request.
func TestOwnerLoadOutlivesAsker(t *testing.T) {
	c, self := testNode(t)
	key := "mine/slow" + strconv.Itoa(int(runs.Add(1)))
	ctx, giveUp := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, self+basePath+groupName+"/"+url.PathEscape(key), nil)
	req.Header.Set(TokenHeader, "s3cret")
	asked := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		asked <- err
	}()
	<-slowStarted // the peer's request is loading the key
	local := make(chan error, 1)
	go func() {
		b, err := c.Get(context.Background(), key, Check{})
		if err == nil && !bytes.Equal(b, value) {
			err = errors.New("not the value")
		}
		local <- err
	}()
	time.Sleep(100 * time.Millisecond) // the local Get joins the load under way
	giveUp()
	<-asked
	close(slowRelease)
	select {
	case err := <-local:
		if err != nil {
			t.Errorf("the node's own reader, after the asking peer gave up: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the node's own reader got no answer")
	}
}
