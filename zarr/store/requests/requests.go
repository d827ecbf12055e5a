// Package requests is what the remote stores share about their HTTP
// requests: their limits, and a transport that counts them by
// kind, for the mount's statistics.
package requests

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// Counter is an http.RoundTripper that counts what passes through it.
type Counter struct {
	next   http.RoundTripper
	mu     sync.Mutex
	counts map[string]uint64
}

// NewCounter counts the requests sent through next.
func NewCounter(next http.RoundTripper) *Counter {
	return &Counter{next: next, counts: map[string]uint64{}}
}

// Limits bound the requests of a remote store.
type Limits struct {
	// MaxAttempts bounds the tries of one request on 5xx, 429 and
	// connection errors (default 8), with exponential backoff and jitter
	// up to MaxBackoff (default 5s).
	MaxAttempts int
	MaxBackoff  time.Duration
	// Concurrency is the connections kept open to the server (default 32).
	Concurrency int
}

// WithDefaults returns l with its zero members set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxAttempts <= 0 {
		l.MaxAttempts = 8
	}
	if l.MaxBackoff <= 0 {
		l.MaxBackoff = 5 * time.Second
	}
	if l.Concurrency <= 0 {
		l.Concurrency = 32
	}
	return l
}

// NewTransport returns a transport for a remote store, counted: it keeps
// up to concurrency idle connections to the server (Go keeps 2 by default,
// so with more requests in flight connections would be reopened
// constantly) and waits at most a minute for a response to begin.
func NewTransport(concurrency int) *Counter {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = concurrency
	t.ResponseHeaderTimeout = time.Minute
	return NewCounter(t)
}

// Kind names a request: "ranged GET", "suffix GET", "GET", "HEAD",
// "LIST", "PUT", "DELETE".
func Kind(r *http.Request) string {
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Has("list-type"):
		return "LIST"
	case r.Method == http.MethodGet && strings.HasPrefix(r.Header.Get("Range"), "bytes=-"):
		return "suffix GET"
	case r.Method == http.MethodGet && r.Header.Get("Range") != "":
		return "ranged GET"
	}
	return r.Method
}

// RoundTrip counts the request, then what came of it: "bytes fetched"
// (response bodies as announced), "failed" (errors, 5xx and 429, which
// are retried), "precondition failed" (412) and "not modified" (304).
func (c *Counter) RoundTrip(r *http.Request) (*http.Response, error) {
	kind := Kind(r)
	resp, err := c.next.RoundTrip(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[kind]++
	switch {
	case err != nil || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		c.counts["failed"]++
	case resp.StatusCode == http.StatusPreconditionFailed:
		c.counts["precondition failed"]++
	case resp.StatusCode == http.StatusNotModified:
		c.counts["not modified"]++
	case r.Method == http.MethodGet && resp.ContentLength > 0:
		c.counts["bytes fetched"] += uint64(resp.ContentLength)
	}
	return resp, err
}

// Counts returns a copy of the counts.
func (c *Counter) Counts() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]uint64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}
