package requests_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store/requests"
)

// syncBuffer is a log destination safe for the client's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// get is an operation as the stores send them: one GET whose status is
// checked and whose body is read.
func get(c *requests.Client, url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.HTTP().Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err := fmt.Errorf("HTTP %d", resp.StatusCode)
			if requests.RetryableStatus(resp.StatusCode) {
				err = requests.Retryable(err)
			}
			return err
		}
		_, err = io.ReadAll(resp.Body)
		return err
	}
}

// TestRetriesAreLogged: each retry is one log line saying what is retried
// and why; a failure that is not worth retrying is not retried.
func TestRetriesAreLogged(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/missing":
			http.NotFound(w, r)
		case n.Add(1) <= 2:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			w.Write([]byte("ok"))
		}
	}))
	t.Cleanup(srv.Close)
	var log syncBuffer
	c := requests.NewClient(requests.Limits{MaxBackoff: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	t.Cleanup(c.Close)
	if err := c.Do(context.Background(), "GET the key", get(c, srv.URL+"/k")); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 || n.Load() != 3 {
		t.Fatalf("3 requests, 2 retried: %d requests, log:\n%s", n.Load(), log.String())
	}
	for i, l := range lines {
		for _, want := range []string{`msg="retrying a request to the store"`, `request="GET the key"`, fmt.Sprintf("attempt=%d", i+2), "HTTP 503"} {
			if !strings.Contains(l, want) {
				t.Errorf("retry line %q does not say %s", l, want)
			}
		}
	}
	if got := c.Counts()["retried"]; got != 2 {
		t.Errorf("counts %v, want 2 retried", c.Counts())
	}
	before := n.Load()
	if err := c.Do(context.Background(), "GET missing", get(c, srv.URL+"/missing")); err == nil || requests.IsRetryable(err) || n.Load() != before {
		t.Errorf("a 404: %v; want it returned at once", err)
	}
}

// TestWaitingIsLogged: while the server has not answered the first
// request after a second, the client says once what it waits for; a
// canceled operation ends at once and is not retried.
func TestWaitingIsLogged(t *testing.T) {
	release := make(chan struct{})
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select { // the first request waits until released
			case <-release:
			case <-time.After(time.Minute):
			}
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	var log syncBuffer
	c := requests.NewClient(requests.Limits{Timeout: time.Minute, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	t.Cleanup(c.Close)
	done := make(chan error, 1)
	go func() { done <- c.Do(context.Background(), "GET zarr.json", get(c, srv.URL+"/zarr.json")) }()
	for i := 0; !strings.Contains(log.String(), "waiting for the store's first answer"); i++ {
		if i == 300 {
			t.Fatalf("nothing logged after 30s of waiting:\n%s", log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	l := log.String()
	if strings.Count(l, "waiting") != 1 || !strings.Contains(l, `request="GET zarr.json"`) || !strings.Contains(l, srv.URL) || !strings.Contains(l, "timeout=1m0s") {
		t.Errorf("the waiting line does not name the request, the server and the timeout:\n%s", l)
	}

	// Canceled while the server stalls: no retry.
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if err := c.Do(ctx, "GET stalled", get(c, slow.URL+"/k")); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	if strings.Contains(log.String(), "retrying") {
		t.Errorf("a canceled request was retried:\n%s", log.String())
	}
}

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
	c := requests.NewClient(requests.Limits{Concurrency: 4})
	client := c.HTTP()
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

	kinds := c.Counter().Kinds()
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
	if got := c.Counter().BytesFetched(); got != 10+10 {
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

// TestLateReaderOfAStalledBody: a body that stops after its first bytes
// fails as stalled ("no data"), even when its reader comes to them much
// later than the body's transfer time (a loaded machine), so that they
// look recent at the whole-body limit: that limit, counted from the
// headers, does not claim a body the idle limit, counted from the last
// bytes, is about to end. A body still trickling at the whole-body limit
// fails by it.
func TestLateReaderOfAStalledBody(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "4096")
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		if r.URL.Path == "/trickle" {
			for range 4096 - 1000 {
				select {
				case <-release:
					return
				case <-time.After(20 * time.Millisecond):
				}
				w.Write([]byte{0})
				w.(http.Flusher).Flush()
			}
		}
		<-release
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	// The idle limit ends a body a timeout after its last bytes (or its
	// headers); a reader later than that meets it whatever the body does.
	const timeout = time.Second
	c := requests.NewClient(requests.Limits{MaxAttempts: 1, Timeout: timeout, Deadline: time.Minute, MinRate: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(c.Close)
	for _, r := range []struct {
		path string
		late time.Duration // before the reader comes to the first bytes
		want string
	}{
		{"/stall", timeout * 3 / 4, "no data within"},
		{"/trickle", timeout / 10, "not all of 4096 bytes"},
	} {
		err := c.Do(context.Background(), "GET "+r.path, func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+r.path, nil)
			resp, err := c.HTTP().Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			time.Sleep(r.late)
			_, err = io.ReadAll(resp.Body)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("GET %s: %v; want an error saying %q", r.path, err, r.want)
		}
	}
}

// TestNoRetryCutShortByTheDeadline: every body stalls after its headers,
// and the server no longer answers after two requests. The error says
// the bodies stalled: no retry is made that the deadline would cut
// shorter than one timeout, which would fail for want of a response
// (as a retry would on a loaded machine whose responses come late).
func TestNoRetryCutShortByTheDeadline(t *testing.T) {
	release := make(chan struct{})
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.Header().Set("Content-Length", "4096")
			w.Write(make([]byte, 1000))
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	// Attempts of 1 s and 2 s (or what the deadline leaves), then 0.5 s
	// at most are left: less than a timeout.
	const timeout, deadline = time.Second, 3500 * time.Millisecond
	c := requests.NewClient(requests.Limits{Timeout: timeout, Deadline: deadline, MaxBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(c.Close)
	err := c.Do(context.Background(), "GET /k", get(c, srv.URL+"/k"))
	if err == nil || !strings.Contains(err.Error(), "no data within") || n.Load() != 2 {
		t.Errorf("%v after %d requests; want an error saying %q after 2", err, n.Load(), "no data within")
	}
}
