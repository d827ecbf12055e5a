// Package cluster joins the mounts of many machines into one cache with
// groupcache: every key has one owner among the peers (consistent
// hashing), a miss anywhere is loaded once, by its owner, and served to the
// others over HTTP. Keys must name immutable values (a remote object's
// generation and byte range), so nothing is ever invalidated.
//
// groupcache's HTTP pool has no authentication, and moves a value through
// protobuf and four copies: this package speaks to its peers itself, as a
// groupcache PeerPicker over groupcache's consistent hash. A value travels
// as its bytes, written from the owner's cache without a copy and read
// into one buffer of the announced length. Every peer request carries a
// shared token, compared in constant time, and a node answers only for
// keys it accepts (those of the stores it mounts itself). A peer that is
// dead, slow or failing costs a short timeout, after which the key is
// loaded locally.
package cluster

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/groupcache"
	"github.com/golang/groupcache/consistenthash"
	pb "github.com/golang/groupcache/groupcachepb"
)

// TokenHeader carries the shared token of peer requests.
const TokenHeader = "X-Zarrfs-Peer-Token"

const (
	groupName = "zarrfs"
	basePath  = "/_groupcache/"
	// maxKey bounds the keys a peer may ask for.
	maxKey = 4096
	// maxValue bounds the values a peer may send: the largest a key can
	// name (a shard index or a decoded chunk of 1 GiB, in JSON or encoded).
	maxValue = 1<<30 + 1<<20
	// replicas is how many points each peer has on the hash ring.
	// groupcache's HTTP pool uses 50, which gave one of three nodes about
	// half of the keys in several runs of the harness.
	replicas = 500
)

// Options configure a node of the cluster.
type Options struct {
	// Self is this node's peer URL (http://HOST:PORT), one of Peers.
	Self string
	// Listen is the address the node serves its peers on.
	Listen string
	// Peers are the peer URLs of every node, Self included.
	Peers []string
	// Token is the shared secret every peer request must carry.
	Token string
	// CacheBytes bounds what the node keeps for the keys it owns (and a
	// few hot ones of others).
	CacheBytes int64
	// Accept reports whether the node answers for key.
	Accept func(key string) bool
	// Load loads the value of a key this node owns from the origin.
	Load func(ctx context.Context, key string) ([]byte, error)
	// Timeout bounds a request to a peer (default 2s).
	Timeout time.Duration
}

// Cluster is this process's node.
type Cluster struct {
	group  *groupcache.Group
	peers  *peers
	server *http.Server
	opts   Options

	served  atomic.Int64
	refused atomic.Uint64
}

// Stats are a node's counters.
type Stats struct {
	Gets          int64  `json:"gets"`
	CacheHits     int64  `json:"cache_hits"`
	PeerLoads     int64  `json:"peer_loads"`    // values got from their owner
	PeerErrors    int64  `json:"peer_errors"`   // failed peer requests, then loaded locally
	OriginLoads   int64  `json:"origin_loads"`  // values loaded from the store by this node
	ServedToPeers int64  `json:"served_peers"`  // requests of peers answered
	Refused       uint64 `json:"refused_peers"` // peer requests refused (token, key)
}

// started guards groupcache's process-wide pool: one node per process.
var started atomic.Bool

// Start starts this process's node: it listens for peers and returns
// once it does.
func Start(o Options) (*Cluster, error) {
	if o.Token == "" {
		return nil, errors.New("cluster: a peer token is required")
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if !started.CompareAndSwap(false, true) {
		return nil, errors.New("cluster: one node per process")
	}
	c := &Cluster{opts: o}
	transport := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: o.Timeout}).DialContext,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConnsPerHost:   32,
	}
	c.peers = &peers{self: o.Self, token: o.Token, transport: transport}
	c.peers.set(o.Peers...)
	groupcache.RegisterPeerPicker(func() groupcache.PeerPicker { return c.peers })
	c.group = groupcache.NewGroup(groupName, o.CacheBytes, groupcache.GetterFunc(func(ctx context.Context, key string, dest groupcache.Sink) error {
		b, err := o.Load(ctx, key)
		if err != nil {
			return err
		}
		return dest.SetBytes(b)
	}))
	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.server = &http.Server{Handler: http.HandlerFunc(c.serve), ReadHeaderTimeout: o.Timeout}
	go c.server.Serve(l)
	return c, nil
}

// serve answers a peer: only with the token, only for accepted keys, with
// the value's bytes.
func (c *Cluster) serve(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), []byte(c.opts.Token)) != 1 {
		c.refused.Add(1)
		http.Error(w, "a peer token is required", http.StatusUnauthorized)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), basePath+groupName+"/")
	if !ok || r.Method != http.MethodGet || len(rest) > 3*maxKey {
		c.refused.Add(1)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	key, err := url.PathUnescape(rest)
	if err != nil || len(key) > maxKey || !c.opts.Accept(key) {
		c.refused.Add(1)
		http.Error(w, "not a key of a store this node mounts", http.StatusForbidden)
		return
	}
	c.served.Add(1)
	var v groupcache.ByteView
	if err := c.group.Get(r.Context(), key, groupcache.ByteViewSink(&v)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(v.Len()))
	v.WriteTo(w) // the cached bytes, not a copy
}

// peers is the PeerPicker of the node: groupcache's consistent hash over
// the peer URLs, and a getter for each.
type peers struct {
	self, token string
	transport   http.RoundTripper
	mu          sync.Mutex
	ring        *consistenthash.Map
	getters     map[string]*peerGetter
}

func (p *peers) set(urls ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ring = consistenthash.New(replicas, nil)
	p.ring.Add(urls...)
	p.getters = map[string]*peerGetter{}
	for _, u := range urls {
		p.getters[u] = &peerGetter{p: p, base: u + basePath}
	}
}

// PickPeer returns the getter of the key's owner, unless that is this node.
func (p *peers) PickPeer(key string) (groupcache.ProtoGetter, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ring.IsEmpty() {
		return nil, false
	}
	if owner := p.ring.Get(key); owner != p.self {
		return p.getters[owner], true
	}
	return nil, false
}

// peerGetter fetches values from one peer.
type peerGetter struct {
	p    *peers
	base string // the peer's URL and basePath
}

func (g *peerGetter) Get(ctx context.Context, in *pb.GetRequest, out *pb.GetResponse) error {
	u := g.base + url.PathEscape(in.GetGroup()) + "/" + url.PathEscape(in.GetKey())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set(TokenHeader, g.p.token)
	res, err := g.p.transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode != http.StatusOK:
		return fmt.Errorf("peer %s: %s", g.base, res.Status)
	case res.ContentLength < 0 || res.ContentLength > maxValue:
		return fmt.Errorf("peer %s: a value of %d bytes", g.base, res.ContentLength)
	}
	b := make([]byte, res.ContentLength)
	if _, err := io.ReadFull(res.Body, b); err != nil {
		return fmt.Errorf("peer %s: reading a value: %w", g.base, err)
	}
	out.Value = b
	return nil
}

// SetPeers replaces the peer URLs (Self must stay among them): keys move
// to their new owners; values already cached stay valid, as keys are
// immutable.
func (c *Cluster) SetPeers(peers ...string) { c.peers.set(peers...) }

// Get returns the value of key: from this node's cache, from the key's
// owner, or loaded here.
func (c *Cluster) Get(ctx context.Context, key string) ([]byte, error) {
	var b []byte
	err := c.group.Get(ctx, key, groupcache.AllocatingByteSliceSink(&b))
	return b, err
}

// Stats returns the node's counters.
func (c *Cluster) Stats() Stats {
	s := &c.group.Stats
	return Stats{
		Gets: s.Gets.Get(), CacheHits: s.CacheHits.Get(), PeerLoads: s.PeerLoads.Get(), PeerErrors: s.PeerErrors.Get(),
		OriginLoads: s.LocalLoads.Get(), ServedToPeers: c.served.Load(), Refused: c.refused.Load(),
	}
}

// Close stops serving peers.
func (c *Cluster) Close() error { return c.server.Close() }
