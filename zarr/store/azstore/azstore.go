// Package azstore is a store in an Azure Blob Storage container, through
// the Azure SDK for Go: ranged GETs tied to ETags, conditional PUTs (one
// Put Blob each, with its MD5 for the server to check) and DELETEs,
// listings with and without a delimiter. Retries and deadlines are those
// of package requests: the SDK's retry policy is off, as in s3store.
//
// Azure Blob Storage has no suffix ranges ("bytes=-N"): the last bytes of
// a blob cost a HEAD and a ranged GET tied to the ETag the HEAD saw.
package azstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
)

// Options say how to reach the container. What they leave empty comes
// from Azure's environment variables: AZURE_STORAGE_CONNECTION_STRING,
// AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN,
// else DefaultAzureCredential (service principal, workload or managed
// identity, Azure CLI sign-in).
type Options struct {
	// Account is the storage account (default AZURE_STORAGE_ACCOUNT, or
	// the connection string's).
	Account string
	// Endpoint is the blob service URL, for emulators and sovereign
	// clouds (default https://ACCOUNT.blob.core.windows.net).
	Endpoint string
	// SAS is a shared access signature token (default
	// AZURE_STORAGE_SAS_TOKEN).
	SAS string
	// Anonymous sends requests without credentials, for public containers.
	Anonymous bool
	ReadOnly  bool
	requests.Limits
}

// Store is a container, or a prefix of one, as a store.
type Store struct {
	c        *container.Client
	client   *requests.Client
	name     string // see String
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

// Open opens the store at az://containerName/prefix. It sends no request.
func Open(ctx context.Context, containerName, prefix string, opts Options) (*Store, error) {
	if containerName == "" {
		return nil, errors.New("az: no container")
	}
	prefix = strings.Trim(prefix, "/")
	where := "az://" + containerName + "/" + prefix
	if prefix != "" {
		if err := store.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		prefix += "/"
	}
	client := requests.NewClient(opts.Limits)
	copts := &container.ClientOptions{
		ClientOptions: policy.ClientOptions{
			Transport:       client.HTTP(),
			Retry:           policy.RetryOptions{MaxRetries: -1}, // see the package comment
			PerCallPolicies: []policy.Policy{standardRange{}},
		},
		// After a 503 the SDK would send bodies only once the server
		// answers "100 Continue", or after a second: retries and their
		// pace are package requests' to decide.
		ExpectContinueBehavior: container.ExpectContinueOptions{Mode: container.ExpectContinueModeOff},
	}
	c, err := newContainerClient(containerName, opts, copts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return &Store{c: c, client: client, name: name(c.URL(), containerName, prefix), prefix: prefix, readOnly: opts.ReadOnly}, nil
}

// newContainerClient chooses the credentials: anonymous when asked, a SAS
// token, the connection string, the account key, else
// DefaultAzureCredential.
func newContainerClient(containerName string, opts Options, copts *container.ClientOptions) (*container.Client, error) {
	sas := opts.SAS
	if sas == "" && !opts.Anonymous {
		sas = os.Getenv("AZURE_STORAGE_SAS_TOKEN")
	}
	account := opts.Account
	if conn := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); conn != "" && !opts.Anonymous && sas == "" && opts.Endpoint == "" {
		if a := connAccount(conn); account != "" && a != "" && a != account {
			return nil, fmt.Errorf("AZURE_STORAGE_CONNECTION_STRING is for account %q, not %q", a, account)
		}
		c, err := container.NewClientFromConnectionString(conn, containerName, copts)
		if err != nil {
			// The SDK's error may quote the string: say only what is wrong.
			return nil, errors.New("AZURE_STORAGE_CONNECTION_STRING is not a valid connection string")
		}
		return c, nil
	}
	if account == "" {
		account = os.Getenv("AZURE_STORAGE_ACCOUNT")
	}
	endpoint := strings.TrimSuffix(opts.Endpoint, "/")
	if endpoint == "" {
		if account == "" {
			return nil, errors.New("no storage account: set AZURE_STORAGE_ACCOUNT or AZURE_STORAGE_CONNECTION_STRING, or write abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX")
		}
		endpoint = "https://" + account + ".blob.core.windows.net"
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("endpoint %q: want http(s)://HOST[/ACCOUNT], without credentials", store.Redacted(endpoint))
	}
	containerURL := endpoint + "/" + url.PathEscape(containerName)
	switch key := os.Getenv("AZURE_STORAGE_KEY"); {
	case opts.Anonymous:
		return container.NewClientWithNoCredential(containerURL, copts)
	case sas != "":
		return container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(sas, "?"), copts)
	case key != "":
		if account == "" {
			return nil, errors.New("AZURE_STORAGE_KEY without AZURE_STORAGE_ACCOUNT")
		}
		cred, err := container.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, errors.New("AZURE_STORAGE_KEY is not a valid account key (base64)")
		}
		return container.NewClientWithSharedKeyCredential(containerURL, cred, copts)
	}
	// Its token requests go to other hosts (Entra ID, the metadata
	// service) with its own retries, bounded by the request's deadline.
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("no credentials (AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, a connection string or DefaultAzureCredential): %w", err)
	}
	return container.NewClient(containerURL, cred, copts)
}

// standardRange sends a range in the standard Range header, which Azure
// reads as x-ms-range (the SDK's choice, for clients that cannot send a
// Range beyond 4 GiB), so that the requests are counted by kind and seen
// by proxies and caches as the ranged GETs they are.
type standardRange struct{}

func (standardRange) Do(req *policy.Request) (*http.Response, error) {
	h := req.Raw().Header
	for k, v := range h { // the SDK's key is not canonical
		if strings.EqualFold(k, "x-ms-range") {
			delete(h, k)
			h["Range"] = v
		}
	}
	return req.Next()
}

// connAccount is the AccountName of a connection string ("" if none).
func connAccount(conn string) string {
	for _, f := range strings.Split(conn, ";") {
		if k, v, ok := strings.Cut(f, "="); ok && strings.EqualFold(strings.TrimSpace(k), "AccountName") {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// name is the store's URL with its account: a container name means
// different containers in different accounts, and on an emulator or
// another cloud, so its journals and caches must not mix.
func name(containerURL, containerName, prefix string) string {
	n := "az://" + containerName + "/" + strings.TrimSuffix(prefix, "/")
	u, err := url.Parse(containerURL)
	if err != nil {
		return n
	}
	u.RawQuery, u.User, u.Fragment = "", nil, "" // a SAS token is no part of the identity
	if account, ok := strings.CutSuffix(strings.ToLower(u.Host), ".blob.core.windows.net"); ok && u.Scheme == "https" && !strings.Contains(account, ".") {
		return n + "?account=" + account
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/"+containerName)
	u.RawPath = ""
	return n + "?endpoint=" + store.Endpoint(u.String())
}

// String is the store's URL with the account, or the endpoint when it is
// not Azure's: az://container/prefix?account=NAME, or
// az://container/prefix?endpoint=http://host:port/account. It holds no
// secret.
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

func (s *Store) blob(key string) (*blob.Client, error) {
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	return s.c.NewBlobClient(s.prefix + key), nil
}

// Get reads span with one GET (a Range header for a range; for the last
// bytes a HEAD first, see the package comment), the condition as If-Match
// / If-None-Match. An answer at another generation than If-Match asks for
// (a server or proxy that ignores the condition) is refused with
// ErrPrecondition.
func (s *Store) Get(ctx context.Context, key string, span store.Span, cond store.Cond) ([]byte, store.Info, error) {
	if span.Suffix == 0 && span.Length != 0 {
		return s.get(ctx, key, span, cond)
	}
	for attempt := 1; ; attempt++ {
		b, info, err := s.getByStat(ctx, key, span, cond)
		// Replaced between the HEAD and the GET: read the new blob,
		// unless the caller asked for the old one.
		if errors.Is(err, store.ErrPrecondition) && cond.IfMatch == "" && attempt < 3 {
			continue
		}
		return b, info, err
	}
}

// getByStat reads a span that needs the blob's size (the last bytes, or
// none) with a HEAD, then a ranged GET tied to the ETag the HEAD saw.
func (s *Store) getByStat(ctx context.Context, key string, span store.Span, cond store.Cond) ([]byte, store.Info, error) {
	info, err := s.Stat(ctx, key)
	if err == nil {
		err = cond.Check(key, true, info)
	}
	if err != nil {
		return nil, info, err
	}
	switch {
	case span.Suffix == 0: // no bytes
		if span.Offset > info.Size {
			return nil, info, fmt.Errorf("%s: %w", key, io.ErrUnexpectedEOF)
		}
		return []byte{}, info, nil
	case info.Size == 0:
		return []byte{}, info, nil
	}
	off, n, _ := span.Resolve(info.Size)
	sel := store.Range(off, n)
	sel.Max = span.Max
	return s.get(ctx, key, sel, store.Cond{IfMatch: info.Generation})
}

// get reads span, a range or the whole value, with one GET.
func (s *Store) get(ctx context.Context, key string, span store.Span, cond store.Cond) ([]byte, store.Info, error) {
	b, err := s.blob(key)
	if err != nil {
		return nil, store.Info{}, err
	}
	in := &blob.DownloadStreamOptions{AccessConditions: conditions(cond)}
	if span.Offset > 0 || span.Length > 0 {
		in.Range = blob.HTTPRange{Offset: span.Offset, Count: max(span.Length, 0)}
	}
	var out []byte
	var info store.Info
	err = s.client.Do(ctx, "GET "+key, func(ctx context.Context) error {
		resp, err := b.DownloadStream(ctx, in)
		if err != nil {
			return mapErr(key, err)
		}
		if resp.Body == nil { // the SDK's way of saying 304
			return fmt.Errorf("%w: %s", store.ErrNotModified, key)
		}
		defer resp.Body.Close()
		info = describe(resp.ETag, resp.LastModified, resp.ContentLength, resp.ContentRange)
		if cond.IfMatch != "" && info.Generation != cond.IfMatch {
			return fmt.Errorf("%w: %s changed: asked for generation %s, the server answered with %s", store.ErrPrecondition, key, cond.IfMatch, info.Generation)
		}
		declared := int64(-1)
		if resp.ContentLength != nil {
			declared = *resp.ContentLength
		}
		contentRange := ""
		if resp.ContentRange != nil {
			contentRange = *resp.ContentRange
		}
		if out, err = requests.ReadSelection(span, resp.Body, declared, contentRange); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, info, err
	}
	return out, info, nil
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

// Stat describes the value with a HEAD request (Get Blob Properties).
func (s *Store) Stat(ctx context.Context, key string) (store.Info, error) {
	b, err := s.blob(key)
	if err != nil {
		return store.Info{}, err
	}
	var info store.Info
	err = s.client.Do(ctx, "HEAD "+key, func(ctx context.Context) error {
		out, err := b.GetProperties(ctx, nil)
		if err != nil {
			return mapErr(key, err)
		}
		info = describe(out.ETag, out.LastModified, out.ContentLength, nil)
		return nil
	})
	return info, err
}

// Put uploads the value with one Put Blob, conditional as cond says and
// with the MD5 of the body, which the server checks; Azure replaces blobs
// atomically. A retry refused for the value an earlier attempt stored
// succeeded (requests.Client.Put).
func (s *Store) Put(ctx context.Context, key string, parts [][]byte, cond store.Cond) (store.Info, error) {
	if err := s.writable(key); err != nil {
		return store.Info{}, err
	}
	// A retried request rewinds its body: join the parts.
	body := bytes.Join(parts, nil)
	sum := md5.Sum(body)
	bb := s.c.NewBlockBlobClient(s.prefix + key)
	return s.client.Put(ctx, s, key, [][]byte{body}, func(ctx context.Context) (store.Info, error) {
		out, err := bb.Upload(ctx, streaming.NopCloser(bytes.NewReader(body)), &blockblob.UploadOptions{
			AccessConditions:        conditions(cond),
			TransactionalValidation: blob.TransferValidationTypeMD5(sum[:]),
		})
		if err != nil {
			return store.Info{}, mapErr(key, err)
		}
		info := store.Info{Size: int64(len(body)), ModTime: time.Now()}
		if out.ETag != nil {
			info.Generation = store.Generation(*out.ETag)
		}
		return info, nil
	})
}

// Delete removes the blob, with If-Match when cond names a generation; a
// retry refused after an earlier attempt deleted it succeeded
// (requests.Client.Delete).
func (s *Store) Delete(ctx context.Context, key string, cond store.Cond) error {
	if err := s.writable(key); err != nil {
		return err
	}
	if cond.IfNoneMatch != "" {
		return fmt.Errorf("%s: a delete cannot require that the value does not exist", key)
	}
	b := s.c.NewBlobClient(s.prefix + key)
	return s.client.Delete(ctx, s, key, cond, func(ctx context.Context) error {
		_, err := b.Delete(ctx, &blob.DeleteOptions{AccessConditions: conditions(cond)})
		return mapErr(key, err)
	})
}

func (s *Store) writable(key string) error {
	if s.readOnly {
		return fmt.Errorf("%w: %s", store.ErrReadOnly, key)
	}
	return store.ValidateKey(key)
}

// List yields every key below prefix, up to 5000 per request.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for l, err := range s.ListInfo(ctx, prefix) {
			if !yield(l.Key, err) || err != nil {
				return
			}
		}
	}
}

// ListInfo yields every blob below prefix with its ETag, size and time,
// 5000 per request: a listing's ETag is the one reads return and
// condition on.
func (s *Store) ListInfo(ctx context.Context, prefix string) iter.Seq2[store.Listed, error] {
	return func(yield func(store.Listed, error) bool) {
		full, what, err := s.listPrefix(prefix)
		if err != nil {
			yield(store.Listed{}, err)
			return
		}
		for page, err := range pages(ctx, s.client, what, func(ctx context.Context, marker *string) (container.ListBlobsFlatResponse, *string, error) {
			p := s.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &full, Marker: marker})
			page, err := p.NextPage(ctx)
			return page, page.NextMarker, err
		}) {
			if err != nil {
				yield(store.Listed{}, err)
				return
			}
			if page.Segment == nil {
				continue
			}
			for _, b := range page.Segment.BlobItems {
				if b.Name == nil {
					continue
				}
				l := store.Listed{Key: strings.TrimPrefix(*b.Name, s.prefix)}
				if p := b.Properties; p != nil {
					l.Info = describe(quoted(p.ETag), p.LastModified, p.ContentLength, nil)
				}
				if !yield(l, nil) {
					return
				}
			}
		}
	}
}

// quoted is a blob's ETag as reads return it and conditions name it:
// quoted, where listings give it bare.
func quoted(tag *azcore.ETag) *azcore.ETag {
	if tag == nil || strings.HasPrefix(string(*tag), `"`) {
		return tag
	}
	q := azcore.ETag(`"` + string(*tag) + `"`)
	return &q
}

// ListDir yields the children of prefix, with '/' as the delimiter.
func (s *Store) ListDir(ctx context.Context, prefix string) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		full, what, err := s.listPrefix(prefix)
		if err != nil {
			yield(store.Entry{}, err)
			return
		}
		for page, err := range pages(ctx, s.client, what, func(ctx context.Context, marker *string) (container.ListBlobsHierarchyResponse, *string, error) {
			p := s.c.NewListBlobsHierarchyPager("/", &container.ListBlobsHierarchyOptions{Prefix: &full, Marker: marker})
			page, err := p.NextPage(ctx)
			return page, page.NextMarker, err
		}) {
			if err != nil {
				yield(store.Entry{}, err)
				return
			}
			if page.Segment == nil {
				continue
			}
			for _, e := range mergeEntries(full, page.Segment.BlobPrefixes, page.Segment.BlobItems) {
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}

// listPrefix is the blob name prefix of a listing below prefix, and how
// errors name it.
func (s *Store) listPrefix(prefix string) (full, what string, err error) {
	if err := store.ValidatePrefix(prefix); err != nil {
		return "", "", err
	}
	full = s.prefix + strings.TrimSuffix(prefix, "/")
	if prefix != "" {
		full += "/"
	}
	what = "LIST " + full
	if full == "" {
		what = "LIST of the container's root"
	}
	return full, what, nil
}

// mergeEntries returns the directories and blobs of one listing page in
// name order; both come sorted.
func mergeEntries(dir string, prefixes []*container.BlobPrefix, blobs []*container.BlobItem) []store.Entry {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	out := make([]store.Entry, 0, len(prefixes)+len(blobs))
	i, j := 0, 0
	for i < len(prefixes) || j < len(blobs) {
		var e store.Entry
		if j == len(blobs) || i < len(prefixes) && str(prefixes[i].Name) < str(blobs[j].Name) {
			e = store.Entry{Name: strings.TrimSuffix(strings.TrimPrefix(str(prefixes[i].Name), dir), "/"), Dir: true}
			i++
		} else {
			e = store.Entry{Name: strings.TrimPrefix(str(blobs[j].Name), dir)}
			j++
		}
		if e.Name != "" && !strings.Contains(e.Name, "/") {
			out = append(out, e)
		}
	}
	return out
}

// pages yields the pages of a listing, each fetched (and retried) by one
// request: the SDK's pager gives up for good after one failure, so each
// attempt starts a pager at the page's marker.
func pages[P any](ctx context.Context, c *requests.Client, what string, fetch func(context.Context, *string) (P, *string, error)) iter.Seq2[P, error] {
	return func(yield func(P, error) bool) {
		var marker *string
		for {
			var page P
			var next *string
			err := c.Do(ctx, what, func(ctx context.Context) (err error) {
				page, next, err = fetch(ctx, marker)
				return mapErr(what, err)
			})
			if err != nil {
				yield(page, err)
				return
			}
			if !yield(page, nil) || next == nil || *next == "" {
				return
			}
			if marker != nil && *next == *marker {
				yield(page, fmt.Errorf("%s: the server repeats its continuation marker", what))
				return
			}
			marker = next
		}
	}
}

// conditions are a condition's generations as request headers.
func conditions(cond store.Cond) *blob.AccessConditions {
	if cond.IfMatch == "" && cond.IfNoneMatch == "" {
		return nil
	}
	m := &blob.ModifiedAccessConditions{}
	if cond.IfMatch != "" {
		m.IfMatch = (*azcore.ETag)(&cond.IfMatch)
	}
	if cond.IfNoneMatch != "" {
		m.IfNoneMatch = (*azcore.ETag)(&cond.IfNoneMatch)
	}
	return &blob.AccessConditions{ModifiedAccessConditions: m}
}

// describe builds the Info of a response; for a ranged response the size
// is the blob's, from Content-Range.
func describe(tag *azcore.ETag, modTime *time.Time, length *int64, contentRange *string) store.Info {
	var info store.Info
	if tag != nil {
		info.Generation = store.Generation(*tag)
	}
	if modTime != nil {
		info.ModTime = *modTime
	}
	if length != nil {
		info.Size = *length
	}
	if contentRange != nil {
		if _, _, size, ok := requests.ContentRange(*contentRange); ok && size >= 0 {
			info.Size = size
		}
	}
	return info
}

// mapErr turns Azure's answers into store errors naming the key (or what
// was listed), the HTTP status and the server's code and message; failures
// worth another attempt are marked Retryable. No URL in them carries its
// query, which may hold a SAS signature.
func mapErr(key string, err error) error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.RawResponse == nil {
		// No answer: the request failed (the transport marked it), or
		// the SDK refused it.
		var ue *url.Error
		if errors.As(err, &ue) {
			where := ue.URL
			if u, perr := url.Parse(ue.URL); perr == nil {
				u.RawQuery, u.User = "", nil
				where = u.String()
			}
			return &cause{fmt.Sprintf("%s: %s %q: %v", key, ue.Op, where, ue.Err), err}
		}
		said := requests.Printable(strings.SplitN(err.Error(), "\n", 2)[0])
		if strings.HasPrefix(said, "DefaultAzureCredential") {
			said += " (no credentials found: set AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING, sign in with az login, or --az-anonymous for a public container)"
		}
		return &cause{fmt.Sprintf("%s: %s", key, said), err}
	}
	status := re.StatusCode
	code := requests.Printable(re.ErrorCode)
	// Azure's message is the response's reason phrase.
	message := requests.Printable(strings.TrimSpace(strings.TrimPrefix(re.RawResponse.Status, fmt.Sprint(status))))
	said := fmt.Sprintf("HTTP %d", status)
	for _, s := range []string{code, message} {
		if s != "" && !strings.Contains(said, s) {
			said += " " + s
		}
	}
	switch status {
	case http.StatusNotFound:
		if code == "" || code == "BlobNotFound" {
			return fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		// ContainerNotFound, or another refusal.
	case http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %s changed (%s)", store.ErrPrecondition, key, said)
	case http.StatusConflict:
		if code == "BlobAlreadyExists" || code == "" {
			// If-None-Match: * on a blob that exists.
			return fmt.Errorf("%w: %s exists (%s)", store.ErrPrecondition, key, said)
		}
	case http.StatusNotModified:
		return fmt.Errorf("%w: %s", store.ErrNotModified, key)
	case http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%s: %w (%s)", key, io.ErrUnexpectedEOF, said)
	}
	err = &cause{fmt.Sprintf("%s: %s", key, said), err}
	if requests.RetryableStatus(status) || code == "ServerBusy" || code == "OperationTimedOut" || code == "InternalError" {
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
