package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/azstore"
	"github.com/zarrfs/zarrfs/zarr/store/gcsstore"
	"github.com/zarrfs/zarrfs/zarr/store/httpstore"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/s3store"
	"github.com/zarrfs/zarrfs/zarr/store/zipstore"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// storeFlags are the flags that say how to reach a remote store.
type storeFlags struct {
	journalDir   *string
	attempts     *int
	timeout      *time.Duration
	deadline     *time.Duration
	s3Endpoint   *string
	s3PathStyle  *bool
	s3Anonymous  *bool
	gcsAnonymous *bool
	azEndpoint   *string
	azAnonymous  *bool
	logger       *slog.Logger // of retries (default: to the flags' output)
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		attempts:     fs.Int("remote-attempts", 8, "tries of one request to a remote store on 5xx, throttling, dropped connections, cut bodies and timeouts, with backoff and jitter"),
		timeout:      fs.Duration("remote-timeout", 5*time.Second, "how long one try of a request to a remote store waits for the connection and the first byte, and a body may pause; doubles with each try"),
		deadline:     fs.Duration("remote-deadline", 20*time.Second, "how long the tries of one request to a remote store may take together (a body is given time for its size besides)"),
		journalDir:   fs.String("journal-dir", "", "where mounts of remote stores journal writes (default: $XDG_STATE_HOME/zarrfs/journals, one directory per store URL)"),
		s3Endpoint:   fs.String("s3-endpoint", "", "S3 endpoint URL for s3:// stores (default: AWS_ENDPOINT_URL, else AWS)"),
		s3PathStyle:  fs.Bool("s3-path-style", false, "address S3 buckets in the path (most servers other than AWS need it)"),
		s3Anonymous:  fs.Bool("s3-anonymous", false, "send unsigned S3 requests (public buckets)"),
		gcsAnonymous: fs.Bool("gcs-anonymous", false, "send gs:// requests without credentials (public buckets)"),
		azEndpoint:   fs.String("az-endpoint", "", "blob service URL for az:// stores, for emulators and other clouds (default: the connection string's, else https://ACCOUNT.blob.core.windows.net)"),
		azAnonymous:  fs.Bool("az-anonymous", false, "send az:// requests without credentials (public containers)"),
		logger:       newLogger(fs.Output()),
	}
}

// limits are the bounds of a remote store's requests.
func (sf storeFlags) limits() (requests.Limits, error) {
	if *sf.timeout <= 0 || *sf.deadline <= 0 {
		return requests.Limits{}, fmt.Errorf("--remote-timeout and --remote-deadline must be positive")
	}
	return requests.Limits{MaxAttempts: *sf.attempts, Timeout: *sf.timeout, Deadline: *sf.deadline, Logger: sf.logger}, nil
}

// storeLocation is a parsed STORE argument: a local directory or zip file,
// or a remote store's URL.
type storeLocation struct {
	dir            string // local directory
	zip            string // local zip file (zarr-python's ZipStore, .ozx)
	bucket, prefix string // s3://bucket/prefix, or gs:// with gcs
	gcs            bool
	web            string // http:// or https:// URL
	az             *azLocation
}

// azLocation is an Azure Blob Storage container and prefix, from az://,
// abfs:// or https://ACCOUNT.blob.core.windows.net/ URLs.
type azLocation struct {
	container, prefix string
	account           string // "" when the URL names none
	sas               string // a SAS token in the https:// URL
	anonymous         bool   // an https:// URL and no credentials: a public container
}

func parseStore(arg string) (storeLocation, error) {
	u, err := url.Parse(arg)
	if err != nil || u.Scheme == "" || len(u.Scheme) == 1 {
		return localStore(arg), nil // a path (a one-letter scheme is not one)
	}
	switch u.Scheme {
	case "file":
		return localStore(u.Path), nil
	case "s3", "gs":
		if u.Host == "" {
			return storeLocation{}, fmt.Errorf("%s: no bucket (%s://BUCKET/PREFIX)", store.Redacted(arg), u.Scheme)
		}
		return storeLocation{bucket: u.Host, prefix: strings.Trim(u.Path, "/"), gcs: u.Scheme == "gs"}, nil
	case "az", "abfs", "abfss":
		return parseAz(arg, u)
	case "http", "https":
		if _, ok := azAccount(u.Host, ".blob.core.windows.net"); ok && u.Scheme == "https" {
			return parseAz(arg, u)
		}
		return storeLocation{web: arg}, nil
	}
	return storeLocation{}, fmt.Errorf("%s: unsupported store URL scheme %q (a path, file://, s3://, gs://, az://, http://, https://)", store.Redacted(arg), u.Scheme)
}

// parseAz reads the URL forms of an Azure container and prefix:
// az://CONTAINER/PREFIX (the account from the environment),
// abfs[s]://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX and
// https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX[?SAS]. The last
// is the form public data is published in: without credentials in the
// URL or the environment its requests go anonymous, as they did when
// such URLs were read as plain web servers.
func parseAz(arg string, u *url.URL) (storeLocation, error) {
	l := azLocation{prefix: strings.Trim(u.Path, "/")}
	switch u.Scheme {
	case "az":
		l.container = u.Host
		if u.User != nil { // az://CONTAINER@ACCOUNT.dfs.core.windows.net/, as adlfs reads it
			l.container = u.User.Username()
			l.account, _ = azAccount(u.Host, ".dfs.core.windows.net", ".blob.core.windows.net")
		}
	case "abfs", "abfss":
		if u.User == nil {
			return storeLocation{}, fmt.Errorf("%s: no container (abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX)", store.Redacted(arg))
		}
		account, ok := azAccount(u.Host, ".dfs.core.windows.net", ".blob.core.windows.net")
		if !ok {
			return storeLocation{}, fmt.Errorf("%s: not an Azure storage host (abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX)", store.Redacted(arg))
		}
		l.container, l.account = u.User.Username(), account
	default: // https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX
		l.account, _ = azAccount(u.Host, ".blob.core.windows.net")
		l.container, l.prefix, _ = strings.Cut(l.prefix, "/")
		l.sas = u.RawQuery
		l.anonymous = l.sas == "" && os.Getenv("AZURE_STORAGE_CONNECTION_STRING") == "" &&
			os.Getenv("AZURE_STORAGE_KEY") == "" && os.Getenv("AZURE_STORAGE_SAS_TOKEN") == ""
	}
	if l.container == "" {
		return storeLocation{}, fmt.Errorf("%s: no container (az://CONTAINER/PREFIX)", store.Redacted(arg))
	}
	return storeLocation{az: &l}, nil
}

// azAccount is the account of an Azure storage host name ACCOUNT.SUFFIX.
func azAccount(host string, suffixes ...string) (string, bool) {
	for _, suffix := range suffixes {
		if a, ok := strings.CutSuffix(strings.ToLower(host), suffix); ok && a != "" && !strings.Contains(a, ".") {
			return a, true
		}
	}
	return "", false
}

// localStore is a directory, or a regular file (a zip).
func localStore(p string) storeLocation {
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return storeLocation{zip: p}
	}
	return storeLocation{dir: p}
}

func (l storeLocation) remote() bool { return l.dir == "" && l.zip == "" }

// writable reports whether the store may take writes: web servers, zip
// files and public containers read anonymously do not, local directories
// when the process may write them.
func (l storeLocation) writable() bool {
	switch {
	case l.web != "", l.zip != "", l.az != nil && l.az.anonymous:
		return false
	case l.remote():
		return true
	}
	return syscall.Access(l.dir, unix.W_OK) == nil
}

// open opens the store.
func (l storeLocation) open(ctx context.Context, sf storeFlags, readOnly bool) (store.Store, error) {
	switch {
	case l.zip != "":
		return zipstore.Open(l.zip)
	case !l.remote():
		return store.OpenDir(l.dir, readOnly)
	}
	limits, err := sf.limits()
	if err != nil {
		return nil, err
	}
	if l.web != "" {
		return httpstore.Open(l.web, httpstore.Options{Limits: limits})
	}
	if l.gcs {
		return gcsstore.Open(ctx, l.bucket, l.prefix, gcsstore.Options{Anonymous: *sf.gcsAnonymous, ReadOnly: readOnly, Limits: limits})
	}
	if l.az != nil {
		return azstore.Open(ctx, l.az.container, l.az.prefix, azstore.Options{
			Account: l.az.account, Endpoint: *sf.azEndpoint, SAS: l.az.sas,
			Anonymous: *sf.azAnonymous || l.az.anonymous, ReadOnly: readOnly, Limits: limits,
		})
	}
	return s3store.Open(ctx, l.bucket, l.prefix, s3store.Options{
		Endpoint: *sf.s3Endpoint, PathStyle: *sf.s3PathStyle, Anonymous: *sf.s3Anonymous, ReadOnly: readOnly,
		Limits: limits,
	})
}

// openJournals opens the directory a mount of the store journals its
// writes in: inside a local store (so any mount of it replays them), as
// STORE/.zarrfs/journal, and for a remote store under dir (default: the
// user's state directory), one directory per store identity (its URL with
// the endpoint). Every directory zarrfs makes there is 0700; an existing
// one must be a plain directory of this user that others cannot write
// (writeback.ErrUntrusted otherwise). With create (read-write mounts) what
// is missing is made; without, nil means there are no journals.
func openJournals(l storeLocation, s store.Store, dir string, create bool) (*writeback.JournalRoot, error) {
	if l.zip != "" {
		return nil, nil // never written: no journals
	}
	if !l.remote() {
		return writeback.LocalJournalRoot(l.dir, create)
	}
	if dir == "" {
		state := os.Getenv("XDG_STATE_HOME")
		if state == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, fmt.Errorf("no --journal-dir and no home directory: %w", err)
			}
			state = filepath.Join(home, ".local", "state")
		}
		dir = filepath.Join(state, "zarrfs", "journals")
	}
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("journal directory: %w", err)
		}
	}
	sum := sha256.Sum256([]byte(s.String()))
	return writeback.OpenJournalRoot(dir, create, hex.EncodeToString(sum[:8]))
}
