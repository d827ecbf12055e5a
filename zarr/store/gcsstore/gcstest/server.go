// Package gcstest starts a real GCS emulator for tests: fake-gcs-server,
// on 127.0.0.1, in memory, and reaches it with Google's own storage SDK,
// a client independent of the store.
package gcstest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/zarrfs/zarrfs/zarr/store/gcsstore"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
)

// Version is the fake-gcs-server release the tests run against; .ci/run
// installs it (go install github.com/fsouza/fake-gcs-server@Version).
const Version = "v1.56.1"

// Server is a running emulator.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
}

// emulator is fake-gcs-server, keeping objects in memory.
var emulator = storetest.Emulator{
	Name: "fake-gcs-server", EnvVar: "ZARRFS_FAKE_GCS_SERVER", GoBin: true,
	Install: "go install github.com/fsouza/fake-gcs-server@" + Version + " (.ci/run does this)",
	Args: func(addr, _ string) []string {
		_, port, _ := net.SplitHostPort(addr)
		return []string{"-scheme", "http", "-host", "127.0.0.1", "-port", port, "-backend", "memory",
			"-public-host", addr, "-external-url", "http://" + addr, "-log-level", "warn"}
	},
}

// Start starts an emulator for the test and stops it in cleanup. Without
// fake-gcs-server the test is skipped, or fails when CI is set.
func Start(t testing.TB) *Server {
	t.Helper()
	addr, _ := emulator.Start(t)
	return &Server{Endpoint: "http://" + addr}
}

// StartServer starts fake-gcs-server on a free port of 127.0.0.1, keeping
// objects in memory, with its output to log, and returns it with the
// function that stops it.
func StartServer(log io.Writer) (*Server, func(), error) {
	addr, stop, err := emulator.StartProcess(os.TempDir(), log)
	if err != nil {
		return nil, nil, err
	}
	return &Server{Endpoint: "http://" + addr}, stop, nil
}

// Env is the environment that sends Google's clients (and zarrfs) to the
// emulator.
func (s *Server) Env() []string {
	return []string{"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(s.Endpoint, "http://")}
}

// Options are the store options that reach the server.
func (s *Server) Options() gcsstore.Options {
	return gcsstore.Options{Endpoint: s.Endpoint, Anonymous: true, Limits: requests.Limits{MaxAttempts: 3, MaxBackoff: 100 * time.Millisecond}}
}

// Client returns Google's storage client of the emulator, independent of
// the store; it is closed in cleanup.
func (s *Server) Client(t testing.TB) *storage.Client {
	t.Helper()
	c, err := s.NewClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// NewClient returns Google's storage client of the emulator.
func (s *Server) NewClient(ctx context.Context) (*storage.Client, error) {
	return storage.NewClient(ctx, option.WithEndpoint(s.Endpoint+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads())
}

// Bucket creates a bucket.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	if err := s.CreateBucket(context.Background(), name); err != nil {
		t.Fatal(err)
	}
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	c, err := s.NewClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Bucket(name).Create(ctx, "zarrfs-test", nil); err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

// Open opens gs://bucket/prefix on the emulator as a store.
func (s *Server) Open(t testing.TB, bucket, prefix string, readOnly bool) *gcsstore.Store {
	t.Helper()
	opts := s.Options()
	opts.ReadOnly = readOnly
	st, err := gcsstore.Open(context.Background(), bucket, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Upload copies every file under dir (but zarrfs's state) into the bucket
// below prefix with Google's client.
func (s *Server) Upload(t testing.TB, dir, bucket, prefix string) {
	t.Helper()
	if err := s.UploadDir(context.Background(), dir, bucket, prefix); err != nil {
		t.Fatal(err)
	}
}

// UploadDir copies every file under dir (but zarrfs's state) into the
// bucket below prefix with Google's client.
func (s *Server) UploadDir(ctx context.Context, dir, bucket, prefix string) error {
	c, err := s.NewClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	b := c.Bucket(bucket)
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, ".zarrfs") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w := b.Object(strings.TrimPrefix(prefix+"/"+filepath.ToSlash(rel), "/")).NewWriter(ctx)
		if _, err := w.Write(data); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	})
	if err != nil {
		return fmt.Errorf("upload %s: %w", dir, err)
	}
	return nil
}

// Download copies every object of the bucket below prefix into dir with
// Google's client.
func (s *Server) Download(t testing.TB, bucket, prefix, dir string) {
	t.Helper()
	ctx := context.Background()
	b := s.Client(t).Bucket(bucket)
	it := b.Objects(ctx, &storage.Query{Prefix: prefix + "/"})
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return
		}
		if err != nil {
			t.Fatalf("list %s/%s: %v", bucket, prefix, err)
		}
		data := s.Read(t, bucket, attrs.Name)
		dst := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(attrs.Name, prefix+"/")))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Read reads an object whole with Google's client.
func (s *Server) Read(t testing.TB, bucket, name string) []byte {
	t.Helper()
	r, err := s.Client(t).Bucket(bucket).Object(name).NewReader(context.Background())
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return data
}
