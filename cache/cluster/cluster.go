// Package cluster joins the mounts of many machines into one cache with
// groupcache: every key has one owner among the peers (consistent
// hashing), a miss anywhere is loaded once, by its owner, and served to the
// others over HTTP. Keys must name immutable values (a remote object's
// generation and byte range), so nothing is ever invalidated.
//
// groupcache's HTTP pool has no authentication, and moves a value through
// protobuf and four copies: this package speaks to its peers itself, as a
// groupcache PeerPicker over groupcache's consistent hash. A value travels
// as its bytes, written from the owner's cache without a copy. Every peer
// request carries a shared token, compared in constant time (optionally
// over mutual TLS), and a node answers only for keys it accepts (those of
// the stores it mounts itself).
//
// A peer is not trusted with what it sends: the asker says what a value
// may be (Check), a length it could not be is refused before a byte is
// read, bytes that fail the check are dropped, and the key is then loaded
// here. A peer that is dead, slow, trickling or lying costs a bounded
// time, and one that keeps failing is skipped for a while.
package cluster

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
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
	// maxValue bounds the values a peer may send whatever the asker's
	// Check: the largest a key can name (a shard index or a decoded chunk
	// of 1 GiB, in JSON or encoded).
	maxValue = 1<<30 + 1<<20
	// replicas is how many points each peer has on the hash ring.
	// groupcache's HTTP pool uses 50, too few for three nodes to own
	// about a third of the keys each (docs/PERFORMANCE.md, "Remote
	// stores").
	replicas = 500
	// minPeerRate is the slowest a peer may send a value's body: a slower
	// one is slower than reading the store.
	minPeerRate = 4 << 20 // bytes per second
	// A peer failing failsBeforeBackOff times in a row is skipped for
	// backOffMin, doubling with each further failure up to backOffMax.
	failsBeforeBackOff = 3
	backOffMin         = time.Second
	backOffMax         = 30 * time.Second
	// maxLogged bounds the (peer, key) pairs whose rejection was logged.
	maxLogged = 10000
)

// Options configure a node of the cluster.
type Options struct {
	// Self is this node's peer URL (http://HOST:PORT, or https:// with
	// TLS), one of Peers.
	Self string
	// Listen is the address the node serves its peers on.
	Listen string
	// Peers are the peer URLs of every node, Self included.
	Peers []string
	// Token is the shared secret every peer request must carry.
	Token string
	// TLS, when set, serves the peer port over TLS and is the client
	// configuration of requests to peers (certificates and the CA peers
	// are verified against; see TLSConfig).
	TLS *TLSConfig
	// CacheBytes bounds what the node keeps for the keys it owns (and a
	// few hot ones of others).
	CacheBytes int64
	// Accept reports whether the node answers for key.
	Accept func(key string) bool
	// Load loads the value of a key this node owns from the origin.
	Load func(ctx context.Context, key string) ([]byte, error)
	// Timeout bounds a request to a peer until its headers (default 2s);
	// its body then has the time it takes at minPeerRate.
	Timeout time.Duration
	// LoadTimeout bounds a load this node makes for a peer (default 1m):
	// it runs on the node's own context, as the node's readers may wait
	// for it too.
	LoadTimeout time.Duration
	// Logger receives one line per peer and key whose value was rejected,
	// one per peer and cause of failed requests to it, and one per
	// address and cause of requests refused.
	Logger *slog.Logger
}

// TLSConfig are the TLS configurations of a node: Server for its peer
// port, Client for its requests to peers.
type TLSConfig struct {
	Server, Client *tls.Config
}

// Check says what the value of a key may be, to verify what a peer sends
// before anyone uses or caches it.
type Check struct {
	// Size reports whether a value of n bytes can be the key's, before a
	// byte of it is read (nil: any up to the package's bound).
	Size func(n int64) error
	// Value verifies the bytes (nil: any bytes of a right size).
	Value func(b []byte) error
}

// Cluster is this process's node.
type Cluster struct {
	group  *groupcache.Group
	peers  *peers
	server *http.Server
	opts   Options

	served  atomic.Int64
	refused atomic.Uint64
	// refusals logs the requests refused, once per address and cause.
	refusals onceLog
}

// onceLog logs one line per subject (a peer, an address) and cause: a
// peer refusing a node's token a thousand times is one line, a peer whose
// failures change cause gets another.
type onceLog struct {
	mu     sync.Mutex
	causes map[string]string // subject: the cause logged last
}

// log logs msg with the subject and cause unless it was the subject's
// last; it reports whether it did.
func (l *onceLog) log(logger *slog.Logger, level slog.Level, msg, subjectName, subject, cause string) bool {
	l.mu.Lock()
	if l.causes == nil || len(l.causes) >= maxLogged {
		l.causes = map[string]string{}
	}
	last, seen := l.causes[subject]
	l.causes[subject] = cause
	l.mu.Unlock()
	if seen && last == cause {
		return false
	}
	logger.Log(context.Background(), level, msg, subjectName, subject, "cause", cause)
	return true
}

// forget forgets the subject's cause: it failed, and does not any more.
func (l *onceLog) forget(subject string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, seen := l.causes[subject]
	delete(l.causes, subject)
	return seen
}

// refuse answers a peer request with an error that names neither key nor
// cause, and logs the cause once per asking host.
func (c *Cluster) refuse(w http.ResponseWriter, r *http.Request, status int, answer, cause string) {
	c.refused.Add(1)
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	c.refusals.log(c.opts.Logger, slog.LevelWarn, "refused a peer's requests", "from", host, cause)
	http.Error(w, answer, status)
}

// Stats are a node's counters.
type Stats struct {
	Gets          int64  `json:"gets"`
	CacheHits     int64  `json:"cache_hits"`
	PeerLoads     int64  `json:"peer_loads"`    // values got from their owner
	PeerErrors    int64  `json:"peer_errors"`   // failed peer requests, then loaded locally
	PeerRejected  uint64 `json:"peer_rejected"` // peer values that failed their check, then loaded locally
	PeerSkipped   uint64 `json:"peer_skipped"`  // requests not sent to a peer backing off
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
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if !started.CompareAndSwap(false, true) {
		return nil, errors.New("cluster: one node per process")
	}
	c := &Cluster{opts: o}
	transport := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: o.Timeout}).DialContext,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConnsPerHost:   32,
	}
	if o.TLS != nil {
		transport.TLSClientConfig = o.TLS.Client
	}
	c.peers = &peers{self: o.Self, token: o.Token, transport: transport, timeout: o.Timeout, logger: o.Logger, logged: map[string]struct{}{}}
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
	c.server = &http.Server{Handler: http.HandlerFunc(c.serve), ReadHeaderTimeout: o.Timeout,
		WriteTimeout: o.LoadTimeout + time.Minute, IdleTimeout: time.Minute, ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)}
	if o.TLS != nil {
		c.server.TLSConfig = o.TLS.Server
		go c.server.ServeTLS(l, "", "")
	} else {
		go c.server.Serve(l)
	}
	return c, nil
}

// serve answers a peer: only with the token, only for accepted keys, with
// the value's bytes. Errors say nothing of the key or the store.
func (c *Cluster) serve(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), []byte(c.opts.Token)) != 1 {
		cause := "its peer token differs from this node's: every node needs the same secret (--peer-token-file or $ZARRFS_PEER_TOKEN)"
		if r.Header.Get(TokenHeader) == "" {
			cause = "it sent no peer token: not a zarrfs node of this cluster"
		}
		c.refuse(w, r, http.StatusUnauthorized, "a peer token is required", cause)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), basePath+groupName+"/")
	if !ok || r.Method != http.MethodGet || len(rest) > 3*maxKey {
		c.refuse(w, r, http.StatusBadRequest, "bad request", "not a request for a value: not a zarrfs node of this version")
		return
	}
	key, err := url.PathUnescape(rest)
	if err != nil || len(key) > maxKey || !c.opts.Accept(key) {
		c.refuse(w, r, http.StatusForbidden, "not a key of a store this node mounts", "it asks for keys of a store this node does not mount: do both mount the same store (the same URL and endpoint)?")
		return
	}
	c.served.Add(1)
	// The node's own context: the load is shared with this node's readers
	// (and other peers) waiting for the same key, which an asker giving up
	// must not fail.
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.LoadTimeout)
	defer cancel()
	var v groupcache.ByteView
	if err := c.group.Get(ctx, key, groupcache.ByteViewSink(&v)); err != nil {
		http.Error(w, "the value could not be loaded", http.StatusInternalServerError)
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
	timeout     time.Duration
	mu          sync.Mutex
	ring        *consistenthash.Map
	getters     map[string]*peerGetter

	rejected, skipped atomic.Uint64
	logger            *slog.Logger
	logMu             sync.Mutex
	logged            map[string]struct{} // peer \0 key, rejections logged
	failures          onceLog             // of requests to peers, by peer
}

func (p *peers) set(urls ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ring = consistenthash.New(replicas, nil)
	p.ring.Add(urls...)
	old := p.getters
	p.getters = map[string]*peerGetter{}
	for _, u := range urls {
		if g := old[u]; g != nil {
			p.getters[u] = g // its back-off stays
		} else {
			p.getters[u] = &peerGetter{p: p, base: u + basePath}
		}
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

// reject counts a value that failed its check and logs it once per peer
// and key.
func (p *peers) reject(peer, key string, err error) {
	p.rejected.Add(1)
	p.logMu.Lock()
	id := peer + "\x00" + key
	_, seen := p.logged[id]
	if !seen {
		if len(p.logged) >= maxLogged {
			clear(p.logged)
		}
		p.logged[id] = struct{}{}
	}
	p.logMu.Unlock()
	if !seen {
		p.logger.Warn("a peer sent a value that fails its check: dropped, loaded from the store", "peer", peer, "key", fmt.Sprintf("%q", key), "error", err)
	}
}

// checkKey carries a Get's Check to the peer getter groupcache calls.
type checkKey struct{}

// errNoCheck refuses to ask a peer for a value nobody can verify: a node
// answering a peer loads the keys it is asked for itself.
var errNoCheck = errors.New("cluster: no check for a peer's value")

// errBackingOff skips a peer that failed repeatedly.
var errBackingOff = errors.New("cluster: peer backing off after repeated failures")

// peerGetter fetches values from one peer.
type peerGetter struct {
	p    *peers
	base string // the peer's URL and basePath

	mu    sync.Mutex
	fails int       // in a row
	until time.Time // skipped until then
}

func (g *peerGetter) Get(ctx context.Context, in *pb.GetRequest, out *pb.GetResponse) error {
	check, _ := ctx.Value(checkKey{}).(*Check)
	if check == nil {
		return errNoCheck
	}
	g.mu.Lock()
	skip := time.Now().Before(g.until)
	g.mu.Unlock()
	if skip {
		g.p.skipped.Add(1)
		return errBackingOff
	}
	b, err := g.fetch(ctx, in.GetKey(), check)
	var bad *badValue
	if errors.As(err, &bad) {
		g.p.reject(strings.TrimSuffix(g.base, basePath), in.GetKey(), bad.err)
	}
	peer := strings.TrimSuffix(g.base, basePath)
	switch {
	case err == nil:
		if g.p.failures.forget(peer) {
			g.p.logger.Info("a peer answers again", "peer", peer)
		}
	case bad == nil && ctx.Err() == nil:
		g.p.failures.log(g.p.logger, slog.LevelWarn, "a peer's requests fail: reading from the store instead", "peer", peer, failureCause(err))
	}
	g.mu.Lock()
	if err == nil {
		g.fails = 0
	} else if ctx.Err() == nil { // the asker giving up is not the peer's fault
		if g.fails++; g.fails >= failsBeforeBackOff {
			g.until = time.Now().Add(min(backOffMin<<min(g.fails-failsBeforeBackOff, 8), backOffMax))
		}
	}
	g.mu.Unlock()
	if err != nil {
		return err
	}
	out.Value = b
	return nil
}

// statusError is a peer's answer that is not a value.
type statusError struct {
	peer   string
	status int
	text   string
}

func (e *statusError) Error() string { return fmt.Sprintf("peer %s: %s", e.peer, e.text) }

// failureCause says why a request to a peer failed, in words that tell
// an operator what to fix, and alike for alike failures (no key, no
// address of a connection), so that each cause is logged once.
func failureCause(err error) string {
	var st *statusError
	var op *net.OpError
	switch {
	case errors.As(err, &st) && st.status == http.StatusUnauthorized:
		return "it refuses this node's peer token (" + st.text + "): every node needs the same secret (--peer-token-file or $ZARRFS_PEER_TOKEN)"
	case errors.As(err, &st) && st.status == http.StatusForbidden:
		return "it does not mount this store (" + st.text + "): do both mount the same store (the same URL and endpoint)?"
	case errors.As(err, &st):
		return "it answers " + st.text
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return "no answer in time"
	case errors.As(err, &op) && op.Err != nil:
		return op.Op + ": " + op.Err.Error()
	}
	return err.Error()
}

// badValue is a peer's value that fails its check.
type badValue struct{ err error }

func (e *badValue) Error() string { return "cluster: a peer's value fails its check: " + e.err.Error() }

// fetch reads the value of key from the peer, within a deadline for the
// whole body, and checks it.
func (g *peerGetter) fetch(ctx context.Context, key string, check *Check) ([]byte, error) {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.AfterFunc(g.p.timeout, cancel)
	defer deadline.Stop()
	u := g.base + url.PathEscape(groupName) + "/" + url.PathEscape(key)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(TokenHeader, g.p.token)
	res, err := g.p.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	n := res.ContentLength
	switch {
	case res.StatusCode != http.StatusOK:
		return nil, &statusError{peer: g.base, status: res.StatusCode, text: res.Status}
	case n < 0 || n > maxValue:
		return nil, &badValue{fmt.Errorf("a value of %d bytes", n)}
	}
	if check.Size != nil {
		if err := check.Size(n); err != nil {
			return nil, &badValue{err}
		}
	}
	deadline.Reset(time.Until(start.Add(g.p.timeout + time.Duration(n)*time.Second/minPeerRate)))
	b := make([]byte, n)
	if _, err := io.ReadFull(res.Body, b); err != nil {
		return nil, fmt.Errorf("peer %s: reading a value: %w", g.base, err)
	}
	if check.Value != nil {
		if err := check.Value(b); err != nil {
			return nil, &badValue{err}
		}
	}
	return b, nil
}

// SetPeers replaces the peer URLs (Self must stay among them): keys move
// to their new owners; values already cached stay valid, as keys are
// immutable.
func (c *Cluster) SetPeers(peers ...string) { c.peers.set(peers...) }

// Get returns the value of key: from this node's cache, from the key's
// owner if it passes check, or loaded here.
func (c *Cluster) Get(ctx context.Context, key string, check Check) ([]byte, error) {
	var b []byte
	err := c.group.Get(context.WithValue(ctx, checkKey{}, &check), key, groupcache.AllocatingByteSliceSink(&b))
	return b, err
}

// Stats returns the node's counters.
func (c *Cluster) Stats() Stats {
	s := &c.group.Stats
	return Stats{
		Gets: s.Gets.Get(), CacheHits: s.CacheHits.Get(), PeerLoads: s.PeerLoads.Get(), PeerErrors: s.PeerErrors.Get(),
		PeerRejected: c.peers.rejected.Load(), PeerSkipped: c.peers.skipped.Load(),
		OriginLoads: s.LocalLoads.Get(), ServedToPeers: c.served.Load(), Refused: c.refused.Load(),
	}
}

// Close stops serving peers.
func (c *Cluster) Close() error { return c.server.Close() }

// LoadTLS reads a node's certificate and key and the CA its peers'
// certificates are verified against: peers then speak mutual TLS, each
// side proving it holds a certificate of the CA.
func LoadTLS(certFile, keyFile, caFile string) (*TLSConfig, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("peer TLS certificate: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("peer CA: %w", err)
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("peer CA %s: no PEM certificate", caFile)
	}
	return &TLSConfig{
		Server: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientCAs: ca, ClientAuth: tls.RequireAndVerifyClientCert},
		Client: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, RootCAs: ca},
	}, nil
}
