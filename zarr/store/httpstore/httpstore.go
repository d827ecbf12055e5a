// Package httpstore is a read-only store on a web server, read with HTTP
// range requests (public datasets). A web server cannot list keys: the
// hierarchy is found through consolidated metadata (see zarr.Open).
package httpstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
)

// Options tune requests.
type Options struct {
	requests.Limits
}

// Store is the tree of values below a base URL.
type Store struct {
	client   *http.Client
	base     string // ending in '/'
	opts     Options
	requests *requests.Counter
}

var _ store.Store = (*Store)(nil)

// Requests counts the requests sent, by kind.
func (s *Store) Requests() map[string]uint64 { return s.requests.Counts() }

// Open returns the store below base (http:// or https://). It sends no
// request.
func Open(base string, opts Options) (*Store, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: not an http:// or https:// URL", store.Redacted(base))
	}
	opts.Limits = opts.WithDefaults()
	counter := requests.NewTransport(opts.Concurrency)
	return &Store{client: &http.Client{Transport: counter}, base: strings.TrimSuffix(base, "/") + "/", opts: opts, requests: counter}, nil
}

// String is the base URL without its secrets.
func (s *Store) String() string { return store.Redacted(strings.TrimSuffix(s.base, "/")) }

// ReadOnly is true: web servers take no writes.
func (s *Store) ReadOnly() bool { return true }

// Close releases idle connections.
func (s *Store) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// errTruncated: the connection failed or ended before the body did.
var errTruncated = fmt.Errorf("body cut short: %w", io.ErrUnexpectedEOF)

// Generations are the ETag when the server sends one, otherwise the
// Last-Modified time and the size ("lm:TIME/SIZE"), which conditions
// send as If-Unmodified-Since / If-Modified-Since.
const lastModified = "lm:"

// Get reads span with one GET (Range: bytes=A-B, or bytes=-N for a suffix).
func (s *Store) Get(ctx context.Context, key string, span store.Span, cond store.Cond) ([]byte, store.Info, error) {
	if err := store.ValidateKey(key); err != nil {
		return nil, store.Info{}, err
	}
	h := http.Header{}
	switch {
	case span.Suffix > 0:
		h.Set("Range", fmt.Sprintf("bytes=-%d", span.Suffix))
	case span.Length > 0:
		h.Set("Range", fmt.Sprintf("bytes=%d-%d", span.Offset, span.Offset+span.Length-1))
	case span.Offset > 0:
		h.Set("Range", fmt.Sprintf("bytes=%d-", span.Offset))
	}
	setCond(h, cond)
	var b []byte
	var info store.Info
	err := s.do(ctx, http.MethodGet, key, h, func(resp *http.Response) error {
		info = describe(resp)
		if err := cond.Check(key, true, info); err != nil && !errors.Is(err, store.ErrNotModified) {
			return err // a generation of ours the server could not check
		}
		var err error
		if b, err = span.ReadBody(resp.Body, resp.ContentLength); errors.Is(err, store.ErrTooLarge) {
			return fmt.Errorf("%s: %w", key, err)
		} else if err != nil {
			return fmt.Errorf("%s: %w (%v)", key, errTruncated, err)
		}
		if resp.ContentLength >= 0 && int64(len(b)) != resp.ContentLength {
			return fmt.Errorf("%s: got %d of %d bytes: %w", key, len(b), resp.ContentLength, errTruncated)
		}
		if resp.StatusCode == http.StatusOK {
			// The server sent the whole value: take the span from it.
			off, n, err := span.Resolve(int64(len(b)))
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			b = b[off : off+n]
		} else if span.Suffix == 0 && span.Length > 0 && int64(len(b)) != span.Length {
			return fmt.Errorf("%s: range [%d, %d+%d) of %d bytes: %w", key, span.Offset, span.Offset, span.Length, info.Size, io.ErrUnexpectedEOF)
		}
		return nil
	})
	if err != nil {
		return nil, info, err
	}
	return b, info, nil
}

// ReadAt reads len(p) bytes at off, conditional on the generation.
func (s *Store) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	b, _, err := s.Get(ctx, key, store.Range(off, int64(len(p))), store.Cond{IfMatch: gen})
	if err == nil {
		copy(p, b)
	}
	return err
}

// Stat describes the value with a HEAD request.
func (s *Store) Stat(ctx context.Context, key string) (store.Info, error) {
	if err := store.ValidateKey(key); err != nil {
		return store.Info{}, err
	}
	var info store.Info
	err := s.do(ctx, http.MethodHead, key, nil, func(resp *http.Response) error {
		info = describe(resp)
		return nil
	})
	return info, err
}

// Put is refused.
func (s *Store) Put(_ context.Context, key string, _ [][]byte, _ store.Cond) (store.Info, error) {
	return store.Info{}, fmt.Errorf("%w: %s", store.ErrReadOnly, key)
}

// Delete is refused.
func (s *Store) Delete(_ context.Context, key string, _ store.Cond) error {
	return fmt.Errorf("%w: %s", store.ErrReadOnly, key)
}

// List fails with ErrNoListing.
func (s *Store) List(context.Context, string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) { yield("", fmt.Errorf("%s: %w", s, store.ErrNoListing)) }
}

// ListDir fails with ErrNoListing.
func (s *Store) ListDir(context.Context, string) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		yield(store.Entry{}, fmt.Errorf("%s: %w", s, store.ErrNoListing))
	}
}

// setCond turns a condition into request headers.
func setCond(h http.Header, c store.Cond) {
	if c.IfMatch != "" {
		if t, ok := lastModifiedOf(c.IfMatch); ok {
			h.Set("If-Unmodified-Since", t)
		} else {
			h.Set("If-Match", string(c.IfMatch))
		}
	}
	if c.IfNoneMatch != "" {
		if t, ok := lastModifiedOf(c.IfNoneMatch); ok {
			h.Set("If-Modified-Since", t)
		} else {
			h.Set("If-None-Match", string(c.IfNoneMatch))
		}
	}
}

func lastModifiedOf(g store.Generation) (string, bool) {
	rest, ok := strings.CutPrefix(string(g), lastModified)
	if !ok {
		return "", false
	}
	t, _, _ := strings.Cut(rest, "/")
	return t, true
}

// describe builds the Info of a response: the value's size (from
// Content-Range for a partial response) and its generation.
func describe(resp *http.Response) store.Info {
	info := store.Info{Size: resp.ContentLength}
	if cr := resp.Header.Get("Content-Range"); cr != "" {
		if _, total, ok := strings.Cut(cr, "/"); ok && total != "*" {
			if n, err := strconv.ParseInt(total, 10, 64); err == nil {
				info.Size = n
			}
		}
	}
	lm := resp.Header.Get("Last-Modified")
	info.ModTime, _ = http.ParseTime(lm)
	if tag := resp.Header.Get("ETag"); tag != "" {
		info.Generation = store.Generation(tag)
	} else if lm != "" {
		info.Generation = store.Generation(fmt.Sprintf("%s%s/%d", lastModified, lm, info.Size))
	}
	return info
}

// do sends a request, retrying 5xx, 429 and connection errors with
// backoff and jitter, and hands a successful response to read.
func (s *Store) do(ctx context.Context, method, key string, h http.Header, read func(*http.Response) error) error {
	u := s.base + (&url.URL{Path: key}).EscapedPath()
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return err
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := s.client.Do(req)
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			ue.URL = store.Redacted(ue.URL) // the error is logged
		}
		retry := err != nil && ctx.Err() == nil
		if err == nil {
			err = status(key, resp)
			retry = resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
			if err == nil {
				err = read(resp)
				// A body cut short is retried like a dropped connection.
				retry = errors.Is(err, errTruncated)
			}
			io.Copy(io.Discard, resp.Body) // so the connection is reused
			resp.Body.Close()
		}
		if !retry || attempt == s.opts.MaxAttempts {
			if err != nil && attempt > 1 {
				err = fmt.Errorf("%w (after %d attempts)", err, attempt)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff/2 + rand.N(backoff)):
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// status maps a response status to a store error naming the key.
func status(key string, resp *http.Response) error {
	switch resp.StatusCode {
	case http.StatusOK, http.StatusPartialContent:
		return nil
	case http.StatusNotFound, http.StatusGone:
		return fmt.Errorf("%w: %s", store.ErrNotFound, key)
	case http.StatusNotModified:
		return fmt.Errorf("%w: %s", store.ErrNotModified, key)
	case http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %s changed (HTTP 412)", store.ErrPrecondition, key)
	case http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%s: %w (HTTP 416)", key, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("%s: HTTP %s", key, resp.Status)
}
