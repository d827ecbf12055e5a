package requests

import (
	"maps"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Counter counts a client's requests by kind, outcome and latency, for the
// stats file and the metrics.
type Counter struct {
	mu      sync.Mutex
	kinds   map[string]*KindStats
	bytes   uint64 // response bodies of GETs, as announced
	retried uint64
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

// record counts one request by its kind, what came of it and the time to
// its response's headers.
func (c *Counter) record(r *http.Request, resp *http.Response, err error, took time.Duration) {
	seconds := took.Seconds()
	outcome := Outcome(resp, err)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kinds == nil {
		c.kinds = map[string]*KindStats{}
	}
	kind := Kind(r)
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
}

func (c *Counter) retry() {
	c.mu.Lock()
	c.retried++
	c.mu.Unlock()
}

// Outcome names what came of a request (see KindStats.Outcomes).
func Outcome(resp *http.Response, err error) string {
	switch {
	case err != nil || RetryableStatus(resp.StatusCode):
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
// by kind, then "bytes fetched", the requests "retried", and those that
// "failed", met a "precondition failed" or were "not modified", of every
// kind.
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
	c.mu.Lock()
	if c.retried > 0 {
		out["retried"] = c.retried
	}
	c.mu.Unlock()
	return out
}
