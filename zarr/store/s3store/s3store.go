// Package s3store is a store in an S3-compatible bucket, through the AWS
// SDK for Go v2: ranged and suffix GETs tied to ETags, conditional PUTs
// and DELETEs, listings with ListObjectsV2. Retries and deadlines are
// those of package requests: the SDK's retryer is off, so that a body cut
// short is retried like a failed request and no retry quota turns retries
// off under load.
package s3store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
)

// Options say how to reach the bucket. Credentials, region and endpoint
// otherwise come from the standard AWS environment and files.
type Options struct {
	// Endpoint overrides AWS_ENDPOINT_URL (e.g. http://127.0.0.1:7070).
	Endpoint string
	// Region overrides AWS_REGION and the configuration files' region.
	Region string
	// PathStyle addresses the bucket in the path (most servers other
	// than AWS need it) instead of in the host name.
	PathStyle bool
	// Anonymous sends unsigned requests, for public buckets.
	Anonymous bool
	ReadOnly  bool
	requests.Limits
}

// Store is a bucket, or a prefix of one, as a store.
type Store struct {
	s3       *s3.Client
	client   *requests.Client
	name     string // see String
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

// Open opens the store at s3://bucket/prefix. It sends no request.
func Open(ctx context.Context, bucket, prefix string, opts Options) (*Store, error) {
	if bucket == "" {
		return nil, errors.New("s3: no bucket")
	}
	client := requests.NewClient(opts.Limits)
	var loads []func(*config.LoadOptions) error
	if opts.Anonymous {
		loads = append(loads, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("s3: AWS configuration: %w", err)
	}
	cfg.Region = cmp.Or(opts.Region, cfg.Region, "us-east-1")
	api := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.PathStyle
		o.HTTPClient = client.HTTP()
		o.Retryer, o.RetryMaxAttempts = aws.NopRetryer{}, 0 // see the package comment
		// Servers other than AWS may not know the newer checksums.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := store.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("s3://%s/%s: %w", bucket, prefix, err)
		}
		prefix += "/"
	}
	return &Store{s3: api, client: client, name: name(bucket, prefix, api.Options()), bucket: bucket, prefix: prefix, readOnly: opts.ReadOnly}, nil
}

// name is the store's URL with what else chooses the server: a bucket
// name means one bucket on AWS (whatever the region and addressing), but
// s3://b/p on two other servers, or on one addressed by path and by host
// name, are different stores, whose journals and caches must not mix.
func name(bucket, prefix string, o s3.Options) string {
	n := "s3://" + bucket + "/" + strings.TrimSuffix(prefix, "/")
	if o.BaseEndpoint == nil {
		return n
	}
	n += "?endpoint=" + store.Endpoint(*o.BaseEndpoint)
	if o.UsePathStyle {
		n += "&path-style"
	}
	return n
}

// String is the store's URL, and the endpoint when it is not AWS's:
// s3://bucket/prefix?endpoint=http://host:port&path-style.
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

func (s *Store) object(key string) (*string, error) {
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	return aws.String(s.prefix + key), nil
}

// Get reads span with one GET: a Range header for a range, a suffix range
// for the last bytes, and the condition as If-Match / If-None-Match. An
// answer at another generation than If-Match asks for (a server or proxy
// that ignores the condition) is refused with ErrPrecondition.
func (s *Store) Get(ctx context.Context, key string, span store.Span, cond store.Cond) ([]byte, store.Info, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, store.Info{}, err
	}
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: obj, IfMatch: etag(cond.IfMatch), IfNoneMatch: etag(cond.IfNoneMatch)}
	switch {
	case span.Suffix > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=-%d", span.Suffix))
	case span.Length == 0:
		info, err := s.Stat(ctx, key)
		if err == nil {
			err = cond.Check(key, true, info)
		}
		if err == nil && span.Offset > info.Size {
			err = fmt.Errorf("%s: %w", key, io.ErrUnexpectedEOF)
		}
		return []byte{}, info, err
	case span.Offset > 0 || span.Length > 0:
		in.Range = aws.String(httpRange(span))
	}
	var b []byte
	var info store.Info
	err = s.client.Do(ctx, "GET "+key, func(ctx context.Context) error {
		out, err := s.s3.GetObject(ctx, in)
		if err != nil {
			return mapErr(key, err)
		}
		defer out.Body.Close()
		info = describe(out.ETag, out.LastModified, out.ContentLength, out.ContentRange)
		if cond.IfMatch != "" && info.Generation != cond.IfMatch {
			return fmt.Errorf("%w: %s changed: asked for generation %s, the server answered with %s", store.ErrPrecondition, key, cond.IfMatch, info.Generation)
		}
		declared := int64(-1)
		if out.ContentLength != nil {
			declared = *out.ContentLength
		}
		if b, err = requests.ReadSelection(span, out.Body, declared, aws.ToString(out.ContentRange)); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, info, err
	}
	return b, info, nil
}

// httpRange is the Range header of a span with an offset.
func httpRange(span store.Span) string {
	if span.Length < 0 {
		return fmt.Sprintf("bytes=%d-", span.Offset)
	}
	return fmt.Sprintf("bytes=%d-%d", span.Offset, span.Offset+span.Length-1)
}

// ReadAt reads len(p) bytes at off with a ranged GET carrying If-Match,
// whose answer must come from generation gen (see Get).
func (s *Store) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	return store.ReadAtByGet(ctx, s, key, gen, p, off)
}

// ReadScatter reads the bytes at off into bufs, one after another, with
// one ranged GET as ReadAt does, straight into bufs.
func (s *Store) ReadScatter(ctx context.Context, key string, gen store.Generation, bufs [][]byte, off int64) error {
	return store.ReadScatterByGet(ctx, s, key, gen, bufs, off)
}

// Stat describes the value with a HEAD request.
func (s *Store) Stat(ctx context.Context, key string) (store.Info, error) {
	obj, err := s.object(key)
	if err != nil {
		return store.Info{}, err
	}
	var info store.Info
	err = s.client.Do(ctx, "HEAD "+key, func(ctx context.Context) error {
		out, err := s.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: obj})
		if err != nil {
			return mapErr(key, err)
		}
		info = describe(out.ETag, out.LastModified, out.ContentLength, nil)
		return nil
	})
	return info, err
}

// Put uploads the value with one PUT, conditional as cond says; S3
// replaces objects atomically. A retry refused for the value an earlier
// attempt stored succeeded (requests.Client.Put).
func (s *Store) Put(ctx context.Context, key string, parts [][]byte, cond store.Cond) (store.Info, error) {
	if err := s.writable(key); err != nil {
		return store.Info{}, err
	}
	// The SDK signs a seekable body: join the parts.
	body := bytes.Join(parts, nil)
	return s.client.Put(ctx, s, key, [][]byte{body}, func(ctx context.Context) (store.Info, error) {
		out, err := s.s3.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: aws.String(s.prefix + key),
			Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
			IfMatch: etag(cond.IfMatch), IfNoneMatch: etag(cond.IfNoneMatch),
		})
		if err != nil {
			return store.Info{}, mapErr(key, err)
		}
		return store.Info{Size: int64(len(body)), ModTime: time.Now(), Generation: store.Generation(aws.ToString(out.ETag))}, nil
	})
}

// Delete removes the object, with If-Match when cond names a generation
// (servers that do not support it delete unconditionally); a retry
// refused after an earlier attempt deleted it succeeded
// (requests.Client.Delete).
func (s *Store) Delete(ctx context.Context, key string, cond store.Cond) error {
	if err := s.writable(key); err != nil {
		return err
	}
	if cond.IfNoneMatch != "" {
		return fmt.Errorf("%s: a delete cannot require that the value does not exist", key)
	}
	return s.client.Delete(ctx, s, key, cond, func(ctx context.Context) error {
		_, err := s.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key), IfMatch: etag(cond.IfMatch)})
		return mapErr(key, err)
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

// ListInfo yields every value below prefix with its ETag, size and time,
// 1000 per request: a listing's ETag is the one GETs return and condition on.
func (s *Store) ListInfo(ctx context.Context, prefix string) iter.Seq2[store.Listed, error] {
	return func(yield func(store.Listed, error) bool) {
		for page, err := range s.pages(ctx, prefix, "") {
			if err != nil {
				yield(store.Listed{}, err)
				return
			}
			for _, o := range page.Contents {
				l := store.Listed{Key: strings.TrimPrefix(aws.ToString(o.Key), s.prefix), Info: describe(o.ETag, o.LastModified, o.Size, nil)}
				if !yield(l, nil) {
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
			for _, e := range mergeEntries(dir, page.CommonPrefixes, page.Contents) {
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}

// mergeEntries returns the directories and values of one listing page in
// name order; both come sorted.
func mergeEntries(dir string, prefixes []types.CommonPrefix, objects []types.Object) []store.Entry {
	out := make([]store.Entry, 0, len(prefixes)+len(objects))
	i, j := 0, 0
	for i < len(prefixes) || j < len(objects) {
		var e store.Entry
		if j == len(objects) || i < len(prefixes) && aws.ToString(prefixes[i].Prefix) < aws.ToString(objects[j].Key) {
			e = store.Entry{Name: strings.TrimSuffix(strings.TrimPrefix(aws.ToString(prefixes[i].Prefix), dir), "/"), Dir: true}
			i++
		} else {
			e = store.Entry{Name: strings.TrimPrefix(aws.ToString(objects[j].Key), dir)}
			j++
		}
		if e.Name != "" && !strings.Contains(e.Name, "/") {
			out = append(out, e)
		}
	}
	return out
}

// pages yields the ListObjectsV2 pages below prefix.
func (s *Store) pages(ctx context.Context, prefix, delimiter string) iter.Seq2[*s3.ListObjectsV2Output, error] {
	return func(yield func(*s3.ListObjectsV2Output, error) bool) {
		if err := store.ValidatePrefix(prefix); err != nil {
			yield(nil, err)
			return
		}
		full := s.prefix + strings.TrimSuffix(prefix, "/")
		if prefix != "" {
			full += "/"
		}
		in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(full)}
		if delimiter != "" {
			in.Delimiter = aws.String(delimiter)
		}
		what := "LIST " + full
		if full == "" {
			what = "LIST of the bucket's root"
		}
		for {
			var page *s3.ListObjectsV2Output
			err := s.client.Do(ctx, what, func(ctx context.Context) (err error) {
				page, err = s.s3.ListObjectsV2(ctx, in)
				return mapErr(what, err)
			})
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(page, nil) {
				return
			}
			next := aws.ToString(page.NextContinuationToken)
			if !aws.ToBool(page.IsTruncated) || next == "" {
				return
			}
			if next == aws.ToString(in.ContinuationToken) {
				yield(nil, fmt.Errorf("%s: the server repeats its continuation token", what))
				return
			}
			in.ContinuationToken = &next
		}
	}
}

// etag is a condition's generation as a header value (nil for none).
func etag(g store.Generation) *string {
	if g == "" {
		return nil
	}
	return aws.String(string(g))
}

// describe builds the Info of a response; for a ranged response the size
// is the object's, from Content-Range.
func describe(tag *string, modTime *time.Time, length *int64, contentRange *string) store.Info {
	info := store.Info{Generation: store.Generation(aws.ToString(tag)), ModTime: aws.ToTime(modTime), Size: aws.ToInt64(length)}
	if _, _, size, ok := requests.ContentRange(aws.ToString(contentRange)); ok && size >= 0 {
		info.Size = size
	}
	return info
}

// mapErr turns S3 answers into store errors naming the key (or what was
// listed), the HTTP status and the server's code and message; failures
// worth another attempt are marked Retryable.
func mapErr(key string, err error) error {
	if err == nil {
		return nil
	}
	var re *awshttp.ResponseError
	var sendErr *smithyhttp.RequestSendError
	if errors.As(err, &sendErr) || !errors.As(err, &re) {
		// No answer: the request failed (the error says how, and the
		// transport marked it), or the SDK refused it.
		var ue *url.Error
		if errors.As(err, &ue) {
			return &cause{fmt.Sprintf("%s: %v", key, ue), err}
		}
		return fmt.Errorf("%s: %w", key, err)
	}
	code, message := "", ""
	var api smithy.APIError
	if errors.As(err, &api) {
		code, message = requests.Printable(api.ErrorCode()), requests.Printable(api.ErrorMessage())
	}
	status := re.HTTPStatusCode()
	said := fmt.Sprintf("HTTP %d", status)
	for _, s := range []string{code, message} {
		if s != "" && !strings.Contains(said, s) {
			said += " " + s
		}
	}
	switch status {
	case http.StatusNotFound:
		if code == "" || code == "NoSuchKey" || code == "NotFound" {
			return fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		// NoSuchBucket, or a server's way of refusing (an unknown key).
	case http.StatusPreconditionFailed, http.StatusConflict:
		// 409: a conditional write raced another one (AWS).
		return fmt.Errorf("%w: %s changed (%s)", store.ErrPrecondition, key, said)
	case http.StatusNotModified:
		return fmt.Errorf("%w: %s", store.ErrNotModified, key)
	case http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%s: %w (%s)", key, io.ErrUnexpectedEOF, said)
	}
	err = &cause{fmt.Sprintf("%s: %s", key, said), err}
	if requests.RetryableStatus(status) || code == "SlowDown" || code == "RequestTimeout" || code == "InternalError" {
		return requests.Retryable(err)
	}
	return err
}

// cause is an error worded for the user (what the server said), which
// wraps the SDK's.
type cause struct {
	msg string
	err error
}

func (c *cause) Error() string { return c.msg }
func (c *cause) Unwrap() error { return c.err }
