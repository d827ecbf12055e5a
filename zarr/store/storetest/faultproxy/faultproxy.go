// Package faultproxy is a TCP proxy for tests, on 127.0.0.1 in front of a
// real HTTP server there (an S3 server, a web server), that injects the
// faults of a bad network or a bad server into chosen requests: it stalls
// (accepts and never answers, or stops after the headers), resets
// connections, cuts bodies, lies about their length, trickles or holds
// them, answers with a status of its own (5xx, 412), answers with another
// object than the server holds, as a server or cache that ignores
// If-Match does, or lets a request through and loses its answer.
package faultproxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is what the proxy does with one request; the zero Fault forwards
// it and its answer unchanged.
type Fault struct {
	// Stall reads the request and never answers.
	Stall bool
	// Reset resets the connection (RST) instead of answering.
	Reset bool
	// Status answers with this status and a short body, without asking
	// the server.
	Status int
	// Serve answers with this object instead of asking the server,
	// honouring Range and ignoring every condition.
	Serve *Object

	// The faults below apply to the server's answer to a GET.

	// StallBody sends the headers and After bytes of the body, then
	// nothing.
	StallBody bool
	// Cut sends the headers and After bytes of the body, then closes the
	// connection.
	Cut   bool
	After int64
	// LieLength announces a Content-Length this much longer (or, when
	// negative, shorter) than the body, sends the body (as much as it
	// announces) and closes.
	LieLength int64
	// Trickle sends the body 1 KiB at a time, one per Trickle.
	Trickle time.Duration
	// Held, with any request forwarded, is called once the server has
	// answered, before the answer goes on, which waits while it runs: an
	// answer slow on its way back, the server changed meanwhile.
	Held func()
	// DropAnswer forwards the request, which the server carries out, and
	// closes the connection instead of sending the answer on: a write
	// stored whose answer was lost on its way back.
	DropAnswer bool
}

// Object is a value the proxy serves itself (Fault.Serve).
type Object struct {
	Body         []byte
	ETag         string      // sent when not empty
	LastModified time.Time   // sent when not zero
	Header       http.Header // sent besides (GCS's X-Goog-Generation)
}

// Proxy is a running proxy.
type Proxy struct {
	URL    string // http://127.0.0.1:PORT
	target string // HOST:PORT of the server

	l        net.Listener
	rule     atomic.Pointer[func(*http.Request) Fault]
	requests atomic.Int64
	closed   chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// maxBody bounds what the proxy holds of one request or response body.
const maxBody = 64 << 20

// Start starts a proxy to target (http://127.0.0.1:PORT) that forwards
// every request unchanged until SetRule, and stops it in cleanup.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" {
		t.Fatalf("faultproxy: %q is not an http://127.0.0.1:PORT URL", target)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), target: u.Host, l: l, closed: make(chan struct{}), conns: map[net.Conn]bool{}}
	p.SetRule(nil)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// SetRule makes the proxy ask rule what to do with each request from now
// on; nil forwards every request unchanged. rule may count, and may change
// the server's objects before answering.
func (p *Proxy) SetRule(rule func(r *http.Request) Fault) {
	if rule == nil {
		rule = func(*http.Request) Fault { return Fault{} }
	}
	p.rule.Store(&rule)
}

// Once applies f to the first n requests that match, and forwards the
// others.
func Once(n int, match func(*http.Request) bool, f Fault) func(*http.Request) Fault {
	var seen atomic.Int64
	return func(r *http.Request) Fault {
		if (match == nil || match(r)) && seen.Add(1) <= int64(n) {
			return f
		}
		return Fault{}
	}
}

// Every applies f to every nth request that matches (the nth, the
// 2nth...), and forwards the others.
func Every(n int, match func(*http.Request) bool, f Fault) func(*http.Request) Fault {
	var seen atomic.Int64
	return func(r *http.Request) Fault {
		if (match == nil || match(r)) && seen.Add(1)%int64(n) == 0 {
			return f
		}
		return Fault{}
	}
}

// FirstTries applies f to each request that matches, except to one that
// repeats the request before it of the same method and URL, which met f:
// every request meets f and its retry goes through.
func FirstTries(match func(*http.Request) bool, f Fault) func(*http.Request) Fault {
	var mu sync.Mutex
	met := map[string]bool{}
	return func(r *http.Request) Fault {
		if match != nil && !match(r) {
			return Fault{}
		}
		mu.Lock()
		defer mu.Unlock()
		k := r.Method + " " + r.URL.String()
		if met[k] {
			delete(met, k)
			return Fault{}
		}
		met[k] = true
		return f
	}
}

// Chance applies f to each request that matches with probability p, in a
// sequence that seed repeats, and forwards the others.
func Chance(p float64, seed uint64, match func(*http.Request) bool, f Fault) func(*http.Request) Fault {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed))
	return func(r *http.Request) Fault {
		if match != nil && !match(r) {
			return Fault{}
		}
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() < p {
			return f
		}
		return Fault{}
	}
}

// Methods matches the requests of the methods named.
func Methods(methods ...string) func(*http.Request) bool {
	return func(r *http.Request) bool { return slices.Contains(methods, r.Method) }
}

// Requests is how many requests the proxy has read.
func (p *Proxy) Requests() int { return int(p.requests.Load()) }

// Close stops the proxy, ending every connection and stall.
func (p *Proxy) Close() {
	select {
	case <-p.closed:
		return
	default:
	}
	close(p.closed)
	p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.serve(c)
		}()
	}
}

// track registers a connection to close with the proxy; false when the
// proxy is closed already.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		c.Close()
		return false
	default:
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// serve handles the requests of one client connection, one at a time,
// over one connection to the server.
func (p *Proxy) serve(c net.Conn) {
	in := bufio.NewReader(c)
	var up net.Conn
	var upIn *bufio.Reader
	defer func() {
		if up != nil {
			p.untrack(up)
		}
	}()
	for {
		req, err := http.ReadRequest(in)
		if err != nil {
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, maxBody))
		req.Body.Close()
		if err != nil {
			return
		}
		p.requests.Add(1)
		f := (*p.rule.Load())(req)
		switch {
		case f.Stall:
			<-p.closed
			return
		case f.Reset:
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			return
		case f.Status != 0:
			msg := []byte(fmt.Sprintf("fault injected: HTTP %d\n", f.Status))
			if req.Method == http.MethodHead {
				msg = nil
			}
			if !writeHead(c, f.Status, http.Header{"Content-Type": {"text/plain"}}, int64(len(msg))) || !write(c, msg) {
				return
			}
			continue
		case f.Serve != nil:
			if !serveObject(c, req, f.Serve) {
				return
			}
			continue
		}
		if up == nil {
			if up, err = net.DialTimeout("tcp", p.target, 5*time.Second); err != nil || !p.track(up) {
				return
			}
			upIn = bufio.NewReader(up)
		}
		req.Body, req.ContentLength = http.NoBody, 0
		if len(body) > 0 {
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		if req.Write(up) != nil {
			return
		}
		resp, err := http.ReadResponse(upIn, req)
		if err != nil {
			return
		}
		if !p.answer(c, req, resp, f) {
			return
		}
	}
}

// answer sends the server's response to the client as f says; false
// when the connection must end.
func (p *Proxy) answer(c net.Conn, req *http.Request, resp *http.Response, f Fault) bool {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if err != nil {
		return false
	}
	if f.Held != nil {
		f.Held()
	}
	if f.DropAnswer {
		return false
	}
	if req.Method == http.MethodHead || resp.StatusCode == http.StatusNotModified || resp.StatusCode == http.StatusNoContent {
		// No body: the headers go as they came (a HEAD's length is the
		// object's).
		return writeHead(c, resp.StatusCode, resp.Header, -1) && !resp.Close
	}
	n := int64(len(body))
	switch {
	case f.StallBody:
		if writeHead(c, resp.StatusCode, resp.Header, n) && write(c, body[:min(f.After, n)]) {
			<-p.closed
		}
		return false
	case f.Cut:
		writeHead(c, resp.StatusCode, resp.Header, n)
		write(c, body[:min(f.After, n)])
		return false
	case f.LieLength != 0:
		announced := max(n+f.LieLength, 0)
		writeHead(c, resp.StatusCode, resp.Header, announced)
		write(c, body[:min(announced, n)])
		return false
	case f.Trickle > 0:
		if !writeHead(c, resp.StatusCode, resp.Header, n) {
			return false
		}
		for len(body) > 0 {
			k := min(len(body), 1024)
			if !write(c, body[:k]) {
				return false
			}
			body = body[k:]
			select {
			case <-p.closed:
				return false
			case <-time.After(f.Trickle):
			}
		}
		return !resp.Close
	}
	return writeHead(c, resp.StatusCode, resp.Header, n) && write(c, body) && !resp.Close
}

// serveObject answers req with o, as a server that ignores conditions.
func serveObject(c net.Conn, req *http.Request, o *Object) bool {
	h := o.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if o.ETag != "" {
		h.Set("ETag", o.ETag)
	}
	if !o.LastModified.IsZero() {
		h.Set("Last-Modified", o.LastModified.UTC().Format(http.TimeFormat))
	}
	size := int64(len(o.Body))
	start, end, ok := parseRange(req.Header.Get("Range"), size)
	status := http.StatusOK
	if ok {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end-1, size))
	} else {
		start, end = 0, size
	}
	if req.Method == http.MethodHead {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		return writeHead(c, http.StatusOK, h, -1)
	}
	return writeHead(c, status, h, end-start) && write(c, o.Body[start:end])
}

// parseRange reads a single range of Range: bytes=A-B, bytes=A- or
// bytes=-N within size bytes.
func parseRange(r string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(r, "bytes=")
	a, b, dash := strings.Cut(spec, "-")
	if !found || !dash {
		return 0, 0, false
	}
	if a == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size, true
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 || start >= size {
		return 0, 0, false
	}
	end = size
	if b != "" {
		last, err := strconv.ParseInt(b, 10, 64)
		if err != nil || last < start {
			return 0, 0, false
		}
		end = min(last+1, size)
	}
	return start, end, true
}

// writeHead writes a status line and headers; length >= 0 replaces the
// Content-Length (and any chunked encoding), -1 keeps the header's.
func writeHead(c net.Conn, status int, h http.Header, length int64) bool {
	h = h.Clone()
	if length >= 0 {
		h.Del("Transfer-Encoding")
		h.Set("Content-Length", strconv.FormatInt(length, 10))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	h.Write(&b)
	b.WriteString("\r\n")
	return write(c, b.Bytes())
}

func write(c net.Conn, b []byte) bool {
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Write(b)
	return err == nil
}
