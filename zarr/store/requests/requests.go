// Package requests is what the remote stores share about their HTTP
// requests: their limits, and a transport that counts them by
// kind, for the mount's statistics.
package requests

import (
	"maps"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Counter is an http.RoundTripper that counts what passes through it.
type Counter struct {
	next  http.RoundTripper
	mu    sync.Mutex
	kinds map[string]*KindStats
	bytes uint64 // response bodies of GETs, as announced
}

// KindStats are what came of the requests of one kind.
type KindStats struct {
	// Outcomes counts the requests by what came of them: "ok" (2xx and
	// 206), "not found" (404), "not modified" (304), "precondition
	// failed" (412), "rejected" (other 4xx) and "failed" (connection
	// errors, 5xx and 429, which are retried).
	Outcomes map[string]uint64
	// Latency counts the requests by the time to their response's
	// headers: Latency[i] those within LatencyBounds[i], the last those
	// beyond every bound.
	Latency [len(LatencyBounds) + 1]uint64
	// Seconds is the sum of those times.
	Seconds float64
}

// LatencyBounds are the upper bounds, in seconds, of KindStats.Latency:
// from a nearby server's few milliseconds to a retried request's minute.
var LatencyBounds = [...]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// NewCounter counts the requests sent through next.
func NewCounter(next http.RoundTripper) *Counter {
	return &Counter{next: next, kinds: map[string]*KindStats{}}
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

// RoundTrip counts the request by kind, outcome and latency.
func (c *Counter) RoundTrip(r *http.Request) (*http.Response, error) {
	kind := Kind(r)
	start := time.Now()
	resp, err := c.next.RoundTrip(r)
	seconds := time.Since(start).Seconds()
	outcome := Outcome(resp, err)
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.kinds[kind]
	if k == nil {
		k = &KindStats{Outcomes: map[string]uint64{}}
		c.kinds[kind] = k
	}
	k.Outcomes[outcome]++
	k.Latency[sort.SearchFloat64s(LatencyBounds[:], seconds)]++
	k.Seconds += seconds
	if outcome == "ok" && r.Method == http.MethodGet && resp.ContentLength > 0 {
		c.bytes += uint64(resp.ContentLength)
	}
	return resp, err
}

// Outcome names what came of a request (see KindStats.Outcomes).
func Outcome(resp *http.Response, err error) string {
	switch {
	case err != nil || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return "failed"
	case resp.StatusCode == http.StatusNotFound:
		return "not found"
	case resp.StatusCode == http.StatusNotModified:
		return "not modified"
	case resp.StatusCode == http.StatusPreconditionFailed:
		return "precondition failed"
	case resp.StatusCode >= 400:
		return "rejected"
	}
	return "ok"
}

// Kinds returns a copy of the counts of each kind of request.
func (c *Counter) Kinds() map[string]KindStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]KindStats, len(c.kinds))
	for kind, k := range c.kinds {
		out[kind] = KindStats{Outcomes: maps.Clone(k.Outcomes), Latency: k.Latency, Seconds: k.Seconds}
	}
	return out
}

// BytesFetched sums the bodies of the GET responses, as announced.
func (c *Counter) BytesFetched() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Counts sums the counts of Kinds as the stats file shows them: requests
// by kind, then "bytes fetched" and the requests that "failed", met a
// "precondition failed" or were "not modified", of every kind.
func (c *Counter) Counts() map[string]uint64 {
	out := map[string]uint64{}
	for kind, k := range c.Kinds() {
		for outcome, n := range k.Outcomes {
			out[kind] += n
			switch outcome {
			case "failed", "precondition failed", "not modified":
				out[outcome] += n
			}
		}
	}
	if b := c.BytesFetched(); b > 0 {
		out["bytes fetched"] = b
	}
	return out
}
