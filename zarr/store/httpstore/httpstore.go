// Package httpstore is a read-only store on a web server, read with HTTP
// range requests (public datasets). A web server cannot list keys: the
// hierarchy is found through consolidated metadata (see zarr.Open).
package httpstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
)

// Options tune requests.
type Options struct {
	requests.Limits
}

// Store is the tree of values below a base URL. It is neither a
// store.Lister nor a store.Writer: web servers neither list nor take
// writes.
type Store struct {
	client *requests.Client
	base   string // ending in '/'
}

var _ store.Store = (*Store)(nil)

// Requests counts the requests sent, by kind.
func (s *Store) Requests() map[string]uint64 { return s.client.Counts() }

// RequestCounter is what counts the requests, for the mount's metrics.
func (s *Store) RequestCounter() *requests.Counter { return s.client.Counter() }

// Open returns the store below base (http:// or https://). It sends no
// request.
func Open(base string, opts Options) (*Store, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: not an http:// or https:// URL", store.Redacted(base))
	}
	return &Store{client: requests.NewClient(opts.Limits), base: strings.TrimSuffix(base, "/") + "/"}, nil
}

// String is the base URL without its secrets.
func (s *Store) String() string { return store.Redacted(strings.TrimSuffix(s.base, "/")) }

// Remote is true.
func (s *Store) Remote() bool { return true }

// Close releases idle connections.
func (s *Store) Close() error {
	s.client.Close()
	return nil
}

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
		if b, err = requests.ReadSelection(span, resp.Body, resp.ContentLength, resp.Header.Get("Content-Range")); err != nil {
			return fmt.Errorf("%s: %w", key, err)
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
	if gen != "" {
		return store.ReadAtByGet(ctx, s, key, gen, p, off)
	}
	// A server that names no generations (neither ETag nor Last-Modified):
	// the read cannot be tied to one.
	b, _, err := s.Get(ctx, key, store.Range(off, int64(len(p))), store.Cond{})
	if err == nil {
		copy(p, b)
	}
	return err
}

// ReadScatter reads the bytes at off into bufs, one after another, with
// one GET as ReadAt does: straight into bufs when it is tied to a
// generation, else by ReadAt and a copy.
func (s *Store) ReadScatter(ctx context.Context, key string, gen store.Generation, bufs [][]byte, off int64) error {
	if gen == "" {
		return store.ReadScatter(ctx, struct{ store.RangeReader }{s}, key, gen, bufs, off) // its ReadAt alone
	}
	return store.ReadScatterByGet(ctx, s, key, gen, bufs, off)
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
	if _, _, size, ok := requests.ContentRange(resp.Header.Get("Content-Range")); ok && size >= 0 {
		info.Size = size
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

// do sends a request, with the retries and deadlines of package
// requests, and hands a successful response to read.
func (s *Store) do(ctx context.Context, method, key string, h http.Header, read func(*http.Response) error) error {
	u := s.base + (&url.URL{Path: key}).EscapedPath()
	return s.client.Do(ctx, method+" "+key, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return err
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := s.client.HTTP().Do(req)
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			ue.URL = store.Redacted(ue.URL) // the error is logged
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err) // marked Retryable by the transport
		}
		defer func() {
			// Drained so that the connection is reused, unless the rest
			// is long: closing is cheaper then.
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}()
		if err := status(key, resp); err != nil {
			return err
		}
		return read(resp)
	})
}

// status maps a response status to a store error naming the key and
// what the server said; failures worth another attempt are Retryable.
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
	err := fmt.Errorf("%s: HTTP %s%s", key, resp.Status, said(resp.Body))
	if requests.RetryableStatus(resp.StatusCode) {
		return requests.Retryable(err)
	}
	return err
}

// said is the start of an error response's body, as one printable line
// (": text"), or "" when it has none.
func said(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, 200))
	if text := requests.Printable(string(b)); text != "" {
		return ": " + text
	}
	return ""
}
