// Package requests is what the remote stores share about their HTTP
// requests: their limits, the retries of an operation, the deadlines of
// every attempt (connection, first byte, body), and their counts by kind,
// for the mount's statistics. Retries happen here and only here: the AWS
// SDK's own retryer is off (see s3store).
package requests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound the requests of a remote store.
type Limits struct {
	// MaxAttempts bounds the tries of one operation on 5xx, 429, dropped
	// connections, cut bodies and timeouts (default 8), with exponential
	// backoff and jitter up to MaxBackoff (default 5s).
	MaxAttempts int
	MaxBackoff  time.Duration
	// Concurrency is the connections kept open to the server (default 32).
	Concurrency int
	// Timeout bounds an attempt's wait for its connection and the first
	// byte of the response, and any pause in a body (default 5s). It
	// doubles with each attempt of an operation, so a slow server gets
	// longer and a dead one is given up on quickly.
	Timeout time.Duration
	// Deadline bounds the attempts of one operation together (default
	// 20s): none starts, and none waits for a response, past it, and no
	// retry starts with less than Timeout left. A body has its own
	// deadline, proportional to its size (MinRate).
	Deadline time.Duration
	// MinRate is the slowest a body may travel: an attempt that sends or
	// receives n bytes fails after Timeout + n/MinRate (default 128 KiB/s),
	// so a body trickling forever fails too (a response's body after
	// 2*Timeout + n/MinRate: the timeout more tells a trickle from a stall).
	MinRate int64
	// Logger receives one line per retry, and one when the server has not
	// answered the first request after a second (default slog.Default()).
	Logger *slog.Logger
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
	if l.Timeout <= 0 {
		l.Timeout = 5 * time.Second
	}
	if l.Deadline <= 0 {
		l.Deadline = 20 * time.Second
	}
	if l.MinRate <= 0 {
		l.MinRate = 128 << 10
	}
	if l.Logger == nil {
		l.Logger = slog.Default()
	}
	return l
}

// Client sends the requests of one remote store: HTTP() is its HTTP
// client, Do runs an operation with retries. It counts what it sends.
type Client struct {
	limits Limits
	next   *http.Transport
	http   *http.Client

	answered   atomic.Bool // a response came: the server is there
	waitLogged atomic.Bool

	counter Counter
}

// NewClient returns a client within l; it keeps up to l.Concurrency idle
// connections to the server (Go keeps 2 by default, so with more requests
// in flight connections would be reopened constantly).
func NewClient(l Limits) *Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	c := &Client{limits: l.WithDefaults(), next: t}
	t.MaxIdleConnsPerHost = c.limits.Concurrency
	c.http = &http.Client{Transport: (*transport)(c)}
	return c
}

// HTTP is the client's HTTP client. Its requests are bounded by the
// deadlines of the attempt their context comes from (Do), or by the
// first attempt's when sent outside Do.
func (c *Client) HTTP() *http.Client { return c.http }

// Close closes idle connections.
func (c *Client) Close() { c.next.CloseIdleConnections() }

// Retryable marks err as worth another attempt: the server failed (5xx,
// 429) or the connection did (reset, cut, timed out).
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryable{err}
}

type retryable struct{ error }

func (r *retryable) Unwrap() error { return r.error }

// IsRetryable reports whether err, or an error it wraps, was marked
// Retryable.
func IsRetryable(err error) bool {
	var r *retryable
	return errors.As(err, &r)
}

// RetryableStatus reports whether a response status is a failure worth
// another attempt.
func RetryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// TimeoutError: the server did not answer, or stopped sending, in time.
type TimeoutError struct {
	What  string // "no response", "no data"...
	Limit time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s within %s", e.What, e.Limit.Round(time.Millisecond))
}

// Timeout is true, as for net.Error.
func (e *TimeoutError) Timeout() bool { return true }

// attempt is what the transport knows of the attempt a request belongs to.
type attempt struct {
	timeout time.Duration
	url     *atomic.Pointer[string] // the last request's, for the log
}

type attemptKey struct{}

// Do runs op, an operation of one HTTP request and the reading of its
// response, until it succeeds or fails with an error not marked
// Retryable, the attempts are spent, the deadline passes or ctx ends.
// what names the operation in logs ("GET key"). Each attempt's context
// carries its deadlines to the requests made with it.
func (c *Client) Do(ctx context.Context, what string, op func(ctx context.Context) error) error {
	l := c.limits
	start := time.Now()
	deadline := start.Add(l.Deadline)
	var url atomic.Pointer[string]
	if !c.answered.Load() {
		// Logged while the operation waits, never after it returned.
		var waiting sync.Mutex
		done := false
		t := time.AfterFunc(time.Second, func() {
			waiting.Lock()
			defer waiting.Unlock()
			if !done {
				c.logWaiting(what, url.Load())
			}
		})
		defer func() {
			t.Stop()
			waiting.Lock()
			done = true
			waiting.Unlock()
		}()
	}
	backoff := 50 * time.Millisecond
	for n := 1; ; n++ {
		timeout := l.Timeout << min(n-1, 10)
		if rest := time.Until(deadline); timeout > rest {
			timeout = max(rest, time.Millisecond)
		}
		err := op(context.WithValue(ctx, attemptKey{}, attempt{timeout: timeout, url: &url}))
		if err == nil || !IsRetryable(err) || ctx.Err() != nil {
			return err
		}
		// No retry is given less than the first attempt's timeout: cut
		// short by the deadline, it would fail by the deadline rather
		// than by the server (on a loaded machine, a response not yet
		// read), and its error would hide why the attempts before failed.
		sleep := backoff/2 + rand.N(backoff)
		if n == l.MaxAttempts || time.Until(deadline) < sleep+l.Timeout {
			return fmt.Errorf("%w (gave up after %d attempts in %s; timeout %s per attempt, deadline %s)",
				err, n, time.Since(start).Round(time.Millisecond), l.Timeout, l.Deadline)
		}
		c.counter.retry()
		l.Logger.Warn("retrying a request to the store", "request", what, "attempt", n+1, "of", l.MaxAttempts, "in", sleep.Round(time.Millisecond), "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(sleep):
		}
		backoff = min(2*backoff, l.MaxBackoff)
	}
}

// logWaiting says, once, what the client is waiting for while the server
// has not answered yet.
func (c *Client) logWaiting(what string, url *string) {
	if c.answered.Load() || !c.waitLogged.CompareAndSwap(false, true) {
		return
	}
	server := "the server"
	if url != nil {
		server = *url
	}
	c.limits.Logger.Info("waiting for the store's first answer", "request", what, "to", server,
		"timeout", c.limits.Timeout, "deadline", c.limits.Deadline)
}

// transport is the client as an http.RoundTripper: it bounds every
// request by its attempt's deadlines and counts it.
type transport Client

// RoundTrip sends r, failing it when no response comes within the
// attempt's timeout (plus the time its body takes at MinRate), and hands
// back a body that fails when it pauses longer than the timeout or takes
// longer than its announced size allows (a body of unknown size is bounded
// by its pauses alone). Its failures are Retryable.
func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	c := (*Client)(t)
	a, ok := r.Context().Value(attemptKey{}).(attempt)
	if !ok {
		a = attempt{timeout: c.limits.Timeout}
	}
	if a.url != nil {
		u := redact(r)
		a.url.Store(&u)
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	wait := a.timeout + c.transferTime(r.ContentLength)
	timer := time.AfterFunc(wait, func() { cancel(&TimeoutError{What: "no response", Limit: wait}) })
	start := time.Now()
	resp, err := c.next.RoundTrip(r.WithContext(ctx))
	timer.Stop()
	c.counter.record(r, resp, err, time.Since(start))
	if err != nil {
		var te *TimeoutError
		if cause := context.Cause(ctx); errors.As(cause, &te) {
			err = te
		}
		cancel(nil)
		return nil, Retryable(err)
	}
	c.answered.Store(true)
	b := &body{rc: resp.Body, ctx: ctx, cancel: cancel, timeout: a.timeout, request: r.Method + " " + redact(r)}
	b.idle = time.AfterFunc(a.timeout, func() { cancel(&TimeoutError{What: "no data", Limit: a.timeout}) })
	if resp.ContentLength > 0 {
		// A body that stopped is the idle timer's, due within a timeout
		// of its last bytes. Bytes its reader came to late (a loaded
		// machine) were buffered long before they look recent, so the
		// whole-body limit first waits one timeout more: a body still
		// bringing bytes then trickles; one that stopped has met the
		// idle timer.
		whole := 2*a.timeout + c.transferTime(resp.ContentLength)
		b.whole.Store(time.AfterFunc(whole, func() {
			// No bytes for half a timeout: the idle timer's, due within
			// the other half. Look again then, in case it resumed.
			if time.Since(time.Unix(0, b.lastData.Load())) >= a.timeout/2 {
				if t := b.whole.Load(); t != nil {
					t.Reset(a.timeout / 2)
				}
				return
			}
			cancel(&TimeoutError{What: fmt.Sprintf("not all of %d bytes", resp.ContentLength), Limit: whole})
		}))
	}
	resp.Body = b
	return resp, nil
}

// transferTime is how long n bytes may take at the slowest rate allowed.
func (c *Client) transferTime(n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(float64(n) / float64(c.limits.MinRate) * float64(time.Second))
}

// redact is the request's URL without credentials or query.
func redact(r *http.Request) string {
	u := *r.URL
	u.User, u.RawQuery, u.ForceQuery = nil, "", false
	return u.String()
}

// body is a response body bounded by its attempt's deadlines.
type body struct {
	rc       io.ReadCloser
	ctx      context.Context
	cancel   context.CancelCauseFunc
	idle     *time.Timer
	whole    atomic.Pointer[time.Timer]
	lastData atomic.Int64 // when bytes last came, in Unix nanoseconds
	timeout  time.Duration
	request  string
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.idle.Reset(b.timeout)
		b.lastData.Store(time.Now().UnixNano())
	}
	switch {
	case err == io.EOF:
		b.stop()
	case err != nil:
		var te *TimeoutError
		if cause := context.Cause(b.ctx); errors.As(cause, &te) {
			err = te
		}
		err = Retryable(fmt.Errorf("reading the body of %s: %w", b.request, err))
	}
	return n, err
}

func (b *body) stop() {
	b.idle.Stop()
	if w := b.whole.Load(); w != nil {
		w.Stop()
	}
}

func (b *body) Close() error {
	b.stop()
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// Kind names a request: "ranged GET", "suffix GET", "GET", "HEAD",
// "LIST", "PUT", "DELETE". GCS's JSON API says the same with other
// requests: a GET of .../b/BUCKET/o lists, a GET without alt=media reads
// the metadata (a HEAD), a POST with uploadType uploads (a PUT).
func Kind(r *http.Request) string {
	q := r.URL.Query()
	gcs := strings.HasPrefix(r.URL.Path, "/storage/v1/b/")
	switch {
	case r.Method == http.MethodGet && (q.Has("list-type") || gcs && strings.Count(r.URL.EscapedPath(), "/") == 5 && strings.HasSuffix(r.URL.Path, "/o")):
		return "LIST"
	case r.Method == http.MethodGet && gcs && q.Get("alt") != "media":
		return "HEAD"
	case r.Method == http.MethodPost && q.Has("uploadType"):
		return "PUT"
	case r.Method == http.MethodGet && strings.HasPrefix(r.Header.Get("Range"), "bytes=-"):
		return "suffix GET"
	case r.Method == http.MethodGet && r.Header.Get("Range") != "":
		return "ranged GET"
	}
	return r.Method
}

// Counter is what counts the client's requests.
func (c *Client) Counter() *Counter { return &c.counter }

// Counts returns the counts as the stats file shows them (Counter.Counts).
func (c *Client) Counts() map[string]uint64 { return c.counter.Counts() }
