// Package gcsstore is a store in a Google Cloud Storage bucket, through
// the JSON API: ranged and suffix media GETs tied to object generations,
// uploads conditional on ifGenerationMatch (0 for a new object), deletes
// conditional on it, listings with prefix and delimiter. Credentials are
// Google's Application Default Credentials.
//
// The requests are sent by package requests, which owns retries and
// deadlines. Google's storage SDK is not used: its reader reopens a body
// that fails mid-way on its own, request after request, whatever its
// retry policy says, so a body that always stalls would never fail within
// the deadline, and its requests could not be counted as attempts.
package gcsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
)

// Google is where the JSON API is served.
const Google = "https://storage.googleapis.com"

// Options say how to reach the bucket.
type Options struct {
	// Endpoint is a server other than Google's (e.g.
	// http://127.0.0.1:4443). Without it, STORAGE_EMULATOR_HOST names an
	// emulator, to which no credentials are sent, as Google's own clients
	// do.
	Endpoint string
	// Anonymous sends no credentials, for public buckets.
	Anonymous bool
	ReadOnly  bool
	requests.Limits
}

// Store is a bucket, or a prefix of one, as a store.
type Store struct {
	client   *requests.Client
	creds    *auth.Credentials // nil: anonymous
	endpoint string            // scheme://host, no trailing '/'
	name     string            // see String
	bucket   string
	prefix   string // "" or ending in '/'
	readOnly bool
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
	_ store.Writer = (*Store)(nil)
)

// Requests counts the requests sent, by kind.
func (s *Store) Requests() map[string]uint64 { return s.client.Counts() }

// RequestCounter is what counts the requests, for the mount's metrics.
func (s *Store) RequestCounter() *requests.Counter { return s.client.Counter() }

// Open opens the store at gs://bucket/prefix. Against Google it finds the
// Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's
// user credentials, the metadata server) unless opts.Anonymous.
func Open(ctx context.Context, bucket, prefix string, opts Options) (*Store, error) {
	if bucket == "" {
		return nil, errors.New("gs: no bucket")
	}
	endpoint, anonymous := opts.Endpoint, opts.Anonymous
	if endpoint == "" {
		if endpoint = os.Getenv("STORAGE_EMULATOR_HOST"); endpoint != "" {
			anonymous = true
		}
	}
	switch {
	case endpoint == "":
		endpoint = Google
	case !strings.Contains(endpoint, "://"):
		endpoint = "http://" + endpoint // as Google's clients read STORAGE_EMULATOR_HOST
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("gs: endpoint %s: want http(s)://HOST[:PORT]", store.Redacted(endpoint))
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := store.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("gs://%s/%s: %w", bucket, prefix, err)
		}
		prefix += "/"
	}
	s := &Store{
		client: requests.NewClient(opts.Limits), endpoint: strings.TrimSuffix(u.String(), "/"),
		bucket: bucket, prefix: prefix, readOnly: opts.ReadOnly,
	}
	s.name = "gs://" + bucket + "/" + strings.TrimSuffix(prefix, "/")
	if ep := store.Endpoint(s.endpoint); ep != Google {
		// gs://b/p on two servers are two stores, whose journals and
		// caches must not mix.
		s.name += "?endpoint=" + ep
	}
	if !anonymous {
		scope := "https://www.googleapis.com/auth/devstorage.read_write"
		if opts.ReadOnly {
			scope = "https://www.googleapis.com/auth/devstorage.read_only"
		}
		// The token requests get deadlines too, from a client of their
		// own: they are not the store's requests.
		s.creds, err = credentials.DetectDefault(&credentials.DetectOptions{
			Scopes: []string{scope}, Client: requests.NewClient(opts.Limits).HTTP(),
		})
		if err != nil {
			return nil, fmt.Errorf("gs://%s: no Google credentials (%s): %w", bucket, credentialsHint, err)
		}
	}
	return s, nil
}

// credentialsHint says where Google credentials come from.
const credentialsHint = "set GOOGLE_APPLICATION_CREDENTIALS to a key file, run gcloud auth application-default login, or use --gcs-anonymous for a public bucket"

// credentialsSource names the key file of GOOGLE_APPLICATION_CREDENTIALS,
// if it is set.
func credentialsSource() string {
	if f := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"); f != "" {
		return " of GOOGLE_APPLICATION_CREDENTIALS=" + f
	}
	return ""
}

// String is the store's URL, and the endpoint when it is not Google's:
// gs://bucket/prefix?endpoint=http://host:port.
func (s *Store) String() string { return s.name }

// ReadOnly reports whether the store refuses changes.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Remote is true.
func (s *Store) Remote() bool { return true }

// Close closes idle connections.
func (s *Store) Close() error {
	s.client.Close()
	return nil
}

// objectURL is the JSON API's URL of the object at key; upload is that of
// its uploads.
func (s *Store) objectURL(key string, query url.Values) string {
	return s.endpoint + "/storage/v1/b/" + url.PathEscape(s.bucket) + "/o/" + url.PathEscape(s.prefix+key) + encode(query)
}

func encode(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// generation is a condition's generation as GCS's number; ok is false for
// a generation no GCS object can be at (the condition cannot hold).
func generation(g store.Generation) (n int64, ok bool) {
	n, err := strconv.ParseInt(string(g), 10, 64)
	return n, err == nil && n > 0
}

// send sends one request of an attempt, with the credentials, and maps
// an answer that is not a success to a store error naming what.
func (s *Store) send(ctx context.Context, what, method, u string, body io.Reader, length int64, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if body != nil {
		req.ContentLength = length
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if s.creds != nil {
		tok, err := s.creds.Token(ctx)
		if err != nil {
			err = fmt.Errorf("%s: Google credentials%s: %w (%s)", what, credentialsSource(), err, credentialsHint)
			var refused *auth.Error
			if errors.As(err, &refused) && refused.Response != nil && refused.Response.StatusCode/100 == 4 {
				return nil, err // refused: asking again cannot help
			}
			return nil, requests.Retryable(err)
		}
		typ := tok.Type
		if typ == "" {
			typ = "Bearer"
		}
		req.Header.Set("Authorization", typ+" "+tok.Value)
	}
	resp, err := s.client.HTTP().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err) // the transport marked it Retryable
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		// A listing or an upload names no object that could be missing.
		object := method != http.MethodPost && !strings.HasSuffix(req.URL.EscapedPath(), "/b/"+url.PathEscape(s.bucket)+"/o")
		return nil, answerErr(what, object, resp)
	}
	return resp, nil
}

// Get reads span with one media GET: a Range header for a range, a suffix
// range for the last bytes, and the condition as ifGenerationMatch /
// ifGenerationNotMatch. The answer's generation is checked here too, as
// a server or cache may ignore the condition (fake-gcs-server does).
func (s *Store) Get(ctx context.Context, key string, span store.Span, cond store.Cond) ([]byte, store.Info, error) {
	if err := store.ValidateKey(key); err != nil {
		return nil, store.Info{}, err
	}
	q := url.Values{"alt": {"media"}}
	if cond.IfMatch != "" {
		n, ok := generation(cond.IfMatch)
		if !ok {
			return nil, store.Info{}, fmt.Errorf("%w: %s is at no generation %q", store.ErrPrecondition, key, cond.IfMatch)
		}
		q.Set("ifGenerationMatch", strconv.FormatInt(n, 10))
	}
	if n, ok := generation(cond.IfNoneMatch); ok {
		q.Set("ifGenerationNotMatch", strconv.FormatInt(n, 10))
	}
	h := http.Header{}
	switch {
	case span.Suffix > 0:
		h.Set("Range", fmt.Sprintf("bytes=-%d", span.Suffix))
	case span.Length == 0:
		info, err := s.Stat(ctx, key)
		if err == nil {
			err = cond.Check(key, true, info)
		}
		if err == nil && span.Offset > info.Size {
			err = fmt.Errorf("%s: %w", key, io.ErrUnexpectedEOF)
		}
		return []byte{}, info, err
	case span.Length > 0:
		h.Set("Range", fmt.Sprintf("bytes=%d-%d", span.Offset, span.Offset+span.Length-1))
	case span.Offset > 0:
		h.Set("Range", fmt.Sprintf("bytes=%d-", span.Offset))
	}
	var b []byte
	var info store.Info
	err := s.client.Do(ctx, "GET "+key, func(ctx context.Context) error {
		resp, err := s.send(ctx, key, http.MethodGet, s.objectURL(key, q), nil, 0, h)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		cr := resp.Header.Get("Content-Range")
		info = store.Info{Generation: store.Generation(resp.Header.Get("X-Goog-Generation")), Size: resp.ContentLength}
		info.ModTime, _ = http.ParseTime(resp.Header.Get("Last-Modified"))
		if _, _, size, ok := requests.ContentRange(cr); ok && size >= 0 {
			info.Size = size
		}
		switch {
		case cond.IfMatch != "" && info.Generation != cond.IfMatch:
			return fmt.Errorf("%w: %s changed: asked for generation %s, the server answered with %q", store.ErrPrecondition, key, cond.IfMatch, info.Generation)
		case cond.IfNoneMatch != "" && info.Generation == cond.IfNoneMatch:
			return fmt.Errorf("%w: %s", store.ErrNotModified, key)
		}
		if b, err = requests.ReadSelection(span, resp.Body, resp.ContentLength, cr); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, info, err
	}
	return b, info, nil
}

// ReadAt reads len(p) bytes at off with a ranged GET tied to generation
// gen (see Get).
func (s *Store) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	return store.ReadAtByGet(ctx, s, key, gen, p, off)
}

// ReadScatter reads the bytes at off into bufs, one after another, with
// one ranged GET as ReadAt does, straight into bufs.
func (s *Store) ReadScatter(ctx context.Context, key string, gen store.Generation, bufs [][]byte, off int64) error {
	return store.ReadScatterByGet(ctx, s, key, gen, bufs, off)
}

// object is the part of the JSON API's object resource the store reads.
type object struct {
	Name       string `json:"name"`
	Size       string `json:"size"`
	Generation string `json:"generation"`
	Updated    string `json:"updated"`
}

func (o object) info(key string) (store.Info, error) {
	size, err := strconv.ParseInt(o.Size, 10, 64)
	if _, ok := generation(store.Generation(o.Generation)); err != nil || size < 0 || !ok {
		return store.Info{}, fmt.Errorf("%s: the server describes it with size %q and generation %q", key, requests.Printable(o.Size), requests.Printable(o.Generation))
	}
	info := store.Info{Size: size, Generation: store.Generation(o.Generation)}
	info.ModTime, _ = time.Parse(time.RFC3339Nano, o.Updated)
	return info, nil
}

// maxDocument bounds the JSON documents read (object metadata, listing
// pages of 1000 names).
const maxDocument = 16 << 20

// decode reads a JSON document of at most maxDocument bytes into v.
func decode(what string, body io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(body, maxDocument+1))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err) // the transport marked it Retryable
	}
	if len(b) > maxDocument {
		return fmt.Errorf("%s: an answer of more than %d bytes", what, maxDocument)
	}
	if err := json.Unmarshal(b, v); err != nil {
		// A body cut short by a proxy, or garbage: worth another attempt.
		return requests.Retryable(fmt.Errorf("%s: the server's answer is not the JSON expected: %w", what, err))
	}
	return nil
}

// Stat describes the value with a GET of its metadata.
func (s *Store) Stat(ctx context.Context, key string) (store.Info, error) {
	if err := store.ValidateKey(key); err != nil {
		return store.Info{}, err
	}
	var info store.Info
	err := s.client.Do(ctx, "HEAD "+key, func(ctx context.Context) error {
		resp, err := s.send(ctx, key, http.MethodGet, s.objectURL(key, url.Values{"fields": {"size,generation,updated"}}), nil, 0, nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var o object
		if err := decode(key, resp.Body, &o); err != nil {
			return err
		}
		info, err = o.info(key)
		return err
	})
	return info, err
}

// Put uploads the value with one media upload, conditional on
// ifGenerationMatch (0: the object must not exist); GCS replaces objects
// atomically. A retry refused for the value an earlier attempt stored
// succeeded (requests.Client.Put): every upload makes a new generation,
// so the retry of one whose answer was lost is always refused.
func (s *Store) Put(ctx context.Context, key string, parts [][]byte, cond store.Cond) (store.Info, error) {
	if err := s.writable(key); err != nil {
		return store.Info{}, err
	}
	q := url.Values{"uploadType": {"media"}, "name": {s.prefix + key}, "fields": {"size,generation,updated"}}
	switch {
	case cond.IfMatch != "":
		n, ok := generation(cond.IfMatch)
		if !ok {
			return store.Info{}, fmt.Errorf("%w: %s is at no generation %q", store.ErrPrecondition, key, cond.IfMatch)
		}
		q.Set("ifGenerationMatch", strconv.FormatInt(n, 10))
	case cond.IfNoneMatch == store.AnyGeneration:
		q.Set("ifGenerationMatch", "0")
	case cond.IfNoneMatch != "":
		return store.Info{}, fmt.Errorf("%s: a write can require only that the value does not exist", key)
	}
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	u := s.endpoint + "/upload/storage/v1/b/" + url.PathEscape(s.bucket) + "/o" + encode(q)
	h := http.Header{"Content-Type": {"application/octet-stream"}}
	return s.client.Put(ctx, s, key, parts, func(ctx context.Context) (store.Info, error) {
		body := make([]io.Reader, len(parts))
		for i, p := range parts {
			body[i] = bytes.NewReader(p)
		}
		resp, err := s.send(ctx, key, http.MethodPost, u, io.MultiReader(body...), int64(size), h)
		if err != nil {
			return store.Info{}, err
		}
		defer resp.Body.Close()
		var o object
		if err := decode(key, resp.Body, &o); err != nil {
			return store.Info{}, err
		}
		info, err := o.info(key)
		if err == nil && info.Size != int64(size) {
			err = fmt.Errorf("%s: uploaded %d bytes, the server stored %d", key, size, info.Size)
		}
		return info, err
	})
}

// Delete removes the object, with ifGenerationMatch when cond names a
// generation (fake-gcs-server ignores it and deletes); a retry refused
// after an earlier attempt deleted it succeeded (requests.Client.Delete).
func (s *Store) Delete(ctx context.Context, key string, cond store.Cond) error {
	if err := s.writable(key); err != nil {
		return err
	}
	if cond.IfNoneMatch != "" {
		return fmt.Errorf("%s: a delete cannot require that the value does not exist", key)
	}
	q := url.Values{}
	if cond.IfMatch != "" {
		n, ok := generation(cond.IfMatch)
		if !ok {
			return fmt.Errorf("%w: %s is at no generation %q", store.ErrPrecondition, key, cond.IfMatch)
		}
		q.Set("ifGenerationMatch", strconv.FormatInt(n, 10))
	}
	return s.client.Delete(ctx, s, key, cond, func(ctx context.Context) error {
		resp, err := s.send(ctx, key, http.MethodDelete, s.objectURL(key, q), nil, 0, nil)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	})
}

func (s *Store) writable(key string) error {
	if s.readOnly {
		return fmt.Errorf("%w: %s", store.ErrReadOnly, key)
	}
	return store.ValidateKey(key)
}

// List yields every key below prefix, 1000 per request.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for l, err := range s.ListInfo(ctx, prefix) {
			if !yield(l.Key, err) || err != nil {
				return
			}
		}
	}
}

// ListInfo yields every value below prefix with its generation, size and
// time, 1000 per request: the generation reads condition on.
func (s *Store) ListInfo(ctx context.Context, prefix string) iter.Seq2[store.Listed, error] {
	return func(yield func(store.Listed, error) bool) {
		for page, err := range s.pages(ctx, prefix, "") {
			if err != nil {
				yield(store.Listed{}, err)
				return
			}
			for _, o := range page.Items {
				key := strings.TrimPrefix(o.Name, s.prefix)
				info, err := o.info(key)
				if err != nil {
					yield(store.Listed{}, err)
					return
				}
				if !yield(store.Listed{Key: key, Info: info}, nil) {
					return
				}
			}
		}
	}
}

// ListDir yields the children of prefix, with '/' as the delimiter.
func (s *Store) ListDir(ctx context.Context, prefix string) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		dir := s.prefix + strings.TrimSuffix(prefix, "/")
		if !strings.HasSuffix(dir, "/") && dir != "" {
			dir += "/"
		}
		for page, err := range s.pages(ctx, prefix, "/") {
			if err != nil {
				yield(store.Entry{}, err)
				return
			}
			for _, e := range page.entries(dir) {
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}

// listing is one page of the JSON API's objects.list.
type listing struct {
	Items         []object `json:"items"`
	Prefixes      []string `json:"prefixes"`
	NextPageToken string   `json:"nextPageToken"`
}

// entries returns the directories and values of the page below dir in
// name order (GCS sends both sorted).
func (p *listing) entries(dir string) []store.Entry {
	out := make([]store.Entry, 0, len(p.Prefixes)+len(p.Items))
	i, j := 0, 0
	for i < len(p.Prefixes) || j < len(p.Items) {
		var e store.Entry
		if j == len(p.Items) || i < len(p.Prefixes) && p.Prefixes[i] < p.Items[j].Name {
			e = store.Entry{Name: strings.TrimSuffix(strings.TrimPrefix(p.Prefixes[i], dir), "/"), Dir: true}
			i++
		} else {
			e = store.Entry{Name: strings.TrimPrefix(p.Items[j].Name, dir)}
			j++
		}
		if e.Name != "" && !strings.Contains(e.Name, "/") {
			out = append(out, e)
		}
	}
	return out
}

// pages yields the listing pages below prefix.
func (s *Store) pages(ctx context.Context, prefix, delimiter string) iter.Seq2[*listing, error] {
	return func(yield func(*listing, error) bool) {
		if err := store.ValidatePrefix(prefix); err != nil {
			yield(nil, err)
			return
		}
		full := s.prefix + strings.TrimSuffix(prefix, "/")
		if prefix != "" {
			full += "/"
		}
		q := url.Values{"prefix": {full}, "maxResults": {"1000"}, "fields": {"items(name),prefixes,nextPageToken"}}
		if delimiter != "" {
			q.Set("delimiter", delimiter)
		}
		what := "LIST " + full
		if full == "" {
			what = "LIST of the bucket's root"
		}
		base := s.endpoint + "/storage/v1/b/" + url.PathEscape(s.bucket) + "/o"
		for {
			page := &listing{}
			err := s.client.Do(ctx, what, func(ctx context.Context) error {
				resp, err := s.send(ctx, what, http.MethodGet, base+encode(q), nil, 0, nil)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				*page = listing{}
				return decode(what, resp.Body, page)
			})
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(page, nil) || page.NextPageToken == "" {
				return
			}
			if page.NextPageToken == q.Get("pageToken") {
				yield(nil, fmt.Errorf("%s: the server repeats its page token", what))
				return
			}
			q.Set("pageToken", page.NextPageToken)
		}
	}
}

// answerErr turns an answer that is not a success into a store error
// naming what was asked, the HTTP status and what the server said;
// failures worth another attempt are marked Retryable. A 404 to a request
// of an object is ErrNotFound.
func answerErr(what string, object bool, resp *http.Response) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil {
		// The status is known; the body is only its explanation.
		b = nil
	}
	reason, message := explain(b)
	said := fmt.Sprintf("HTTP %d", resp.StatusCode)
	for _, s := range []string{reason, message} {
		if s != "" && !strings.Contains(said, s) {
			said += " " + s
		}
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		// A missing bucket is an error, not an empty store (Google says
		// which is missing; fake-gcs-server says "Not Found" to both).
		if object && !strings.Contains(strings.ToLower(message), "bucket") {
			return fmt.Errorf("%w: %s", store.ErrNotFound, what)
		}
	case http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %s changed (%s)", store.ErrPrecondition, what, said)
	case http.StatusNotModified:
		return fmt.Errorf("%w: %s", store.ErrNotModified, what)
	case http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%s: %w (%s)", what, io.ErrUnexpectedEOF, said)
	}
	err = fmt.Errorf("%s: %s", what, said)
	if requests.RetryableStatus(resp.StatusCode) {
		return requests.Retryable(err)
	}
	return err
}

// explain reads what an error answer says: the JSON API's error document
// (its first reason and its message), else the start of the body.
func explain(body []byte) (reason, message string) {
	var doc struct {
		Error struct {
			Message string `json:"message"`
			Errors  []struct {
				Reason string `json:"reason"`
			} `json:"errors"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &doc) == nil && (doc.Error.Message != "" || len(doc.Error.Errors) > 0) {
		if len(doc.Error.Errors) > 0 {
			reason = doc.Error.Errors[0].Reason
		}
		return requests.Printable(reason), requests.Printable(doc.Error.Message)
	}
	msg := requests.Printable(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return "", msg
}
