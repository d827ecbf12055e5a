package requests

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestCounter sends requests of several kinds and outcomes to a real
// server: each is counted once by kind and outcome, with its latency, and
// the stats file's sums agree.
func TestCounter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/missing":
			http.NotFound(w, r)
		case "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/changed":
			w.WriteHeader(http.StatusPreconditionFailed)
		default:
			w.Write([]byte("0123456789"))
		}
	}))
	defer srv.Close()
	c := NewTransport(4)
	client := &http.Client{Transport: c}
	send := func(method, path, rng string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send("GET", "/a", "bytes=0-3")
	send("GET", "/a", "")
	send("GET", "/missing", "")
	send("GET", "/busy", "bytes=-4")
	send("PUT", "/changed", "")

	kinds := c.Kinds()
	want := map[string]map[string]uint64{
		"ranged GET": {"ok": 1},
		"GET":        {"ok": 1, "not found": 1},
		"suffix GET": {"failed": 1},
		"PUT":        {"precondition failed": 1},
	}
	if len(kinds) != len(want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	for kind, outcomes := range want {
		k := kinds[kind]
		var n, latencies uint64
		for outcome, count := range outcomes {
			if k.Outcomes[outcome] != count {
				t.Errorf("%s %s: %d, want %d (%v)", kind, outcome, k.Outcomes[outcome], count, k.Outcomes)
			}
			n += count
		}
		for _, l := range k.Latency {
			latencies += l
		}
		if latencies != n || k.Seconds <= 0 {
			t.Errorf("%s: %d latencies summing to %vs, want %d", kind, latencies, k.Seconds, n)
		}
	}
	if got := c.BytesFetched(); got != 10+10 {
		// The ranged GET's server ignores the range: 10 bytes each.
		t.Errorf("bytes fetched %d, want 20 (the bodies of the successful GETs)", got)
	}
	counts := c.Counts()
	for key, n := range map[string]uint64{"ranged GET": 1, "GET": 2, "suffix GET": 1, "PUT": 1, "failed": 1, "precondition failed": 1, "bytes fetched": 20} {
		if counts[key] != n {
			t.Errorf("Counts()[%q] = %d, want %d (%v)", key, counts[key], n, counts)
		}
	}
}
