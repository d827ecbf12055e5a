// Package cluster joins the mounts of many machines into one cache with
// groupcache: every key has one owner among the peers (consistent
// hashing), a miss anywhere is loaded once, by its owner, and served to the
// others over HTTP. Keys must name immutable values (a remote object's
// generation and byte range), so nothing is ever invalidated.
//
// groupcache's HTTP pool has no authentication: every peer request here
// carries a shared token, compared in constant time, and a node answers
// only for keys it accepts (those of the stores it mounts itself). A peer
// that is dead, slow or failing costs a short timeout, after which the
// key is loaded locally.
package cluster

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang/groupcache"
)

// TokenHeader carries the shared token of peer requests.
const TokenHeader = "X-Zarrfs-Peer-Token"

const (
	groupName = "zarrfs"
	basePath  = "/_groupcache/"
	// maxKey bounds the keys a peer may ask for.
	maxKey = 4096
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
	pool   *groupcache.HTTPPool
	server *http.Server
	opts   Options

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
	c.pool = groupcache.NewHTTPPoolOpts(o.Self, &groupcache.HTTPPoolOptions{BasePath: basePath})
	transport := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: o.Timeout}).DialContext,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConnsPerHost:   32,
	}
	c.pool.Transport = func(context.Context) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set(TokenHeader, o.Token)
			return transport.RoundTrip(r)
		})
	}
	c.pool.Set(o.Peers...)
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

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// serve answers a peer: only with the token, only for accepted keys.
func (c *Cluster) serve(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), []byte(c.opts.Token)) != 1 {
		c.refused.Add(1)
		http.Error(w, "a peer token is required", http.StatusUnauthorized)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), basePath+groupName+"/")
	if !ok || len(rest) > 3*maxKey {
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
	c.pool.ServeHTTP(w, r)
}

// SetPeers replaces the peer URLs (Self must stay among them): keys move
// to their new owners; values already cached stay valid, as keys are
// immutable.
func (c *Cluster) SetPeers(peers ...string) { c.pool.Set(peers...) }

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
		OriginLoads: s.LocalLoads.Get(), ServedToPeers: s.ServerRequests.Get(), Refused: c.refused.Load(),
	}
}

// Close stops serving peers.
func (c *Cluster) Close() error { return c.server.Close() }
