// Package s3test starts a real S3 server for tests: versitygw with its
// posix backend, on 127.0.0.1, in a temporary directory.
package s3test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/s3store"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
)

// Version is the versitygw release the tests run against; .ci/run
// installs it (go install github.com/versity/versitygw/cmd/versitygw@Version).
const Version = "v1.8.0"

// Credentials of the server's root account.
const (
	AccessKey = "zarrfs-test"
	SecretKey = "zarrfs-test-secret"
)

// Server is a running S3 server.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Dir      string // where the posix backend keeps buckets
}

// emulator is versitygw with its posix backend.
var emulator = storetest.Emulator{
	Name: "versitygw", EnvVar: "ZARRFS_VERSITYGW", GoBin: true,
	Install: "go install github.com/versity/versitygw/cmd/versitygw@" + Version + " (.ci/run does this)",
	Args:    func(addr, dir string) []string { return []string{"--port", addr, "--quiet", "posix", dir} },
	Env:     []string{"ROOT_ACCESS_KEY=" + AccessKey, "ROOT_SECRET_KEY=" + SecretKey},
}

// Start starts a server for the test and stops it in cleanup. Without
// versitygw the test is skipped, or fails when CI is set.
func Start(t testing.TB) *Server {
	t.Helper()
	addr, dir := emulator.Start(t)
	return &Server{Endpoint: "http://" + addr, Dir: dir}
}

// StartServer starts versitygw on a free port of 127.0.0.1 with its
// buckets under dir and its output to log, and returns it with the
// function that stops it.
func StartServer(dir string, log io.Writer) (*Server, func(), error) {
	addr, stop, err := emulator.StartProcess(dir, log)
	if err != nil {
		return nil, nil, err
	}
	return &Server{Endpoint: "http://" + addr, Dir: dir}, stop, nil
}

// Env is the AWS environment that reaches the server, for processes and
// for this one (SetEnv).
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=us-east-1", "AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	}
}

// SetEnv sets Env in this process for the test.
func (s *Server) SetEnv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Options are the store options that reach the server.
func (s *Server) Options() s3store.Options {
	return s3store.Options{Endpoint: s.Endpoint, PathStyle: true, Limits: requests.Limits{MaxAttempts: 3, MaxBackoff: 100 * time.Millisecond}}
}

// Client returns an S3 client of the server, independent of the store.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: AccessKey, SecretAccessKey: SecretKey}, nil
		}),
	})
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
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

// Open opens s3://bucket/prefix as a store, with credentials set in the
// environment of this process.
func (s *Server) Open(t testing.TB, bucket, prefix string, readOnly bool) *s3store.Store {
	t.Helper()
	s.SetEnv(t)
	opts := s.Options()
	opts.ReadOnly = readOnly
	st, err := s3store.Open(context.Background(), bucket, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Upload copies every file under dir into the bucket below prefix with
// the independent client.
func (s *Server) Upload(t testing.TB, dir, bucket, prefix string) {
	t.Helper()
	if err := s.UploadDir(context.Background(), dir, bucket, prefix); err != nil {
		t.Fatal(err)
	}
}

// UploadDir copies every file under dir (but zarrfs's state) into the
// bucket below prefix with the independent client.
func (s *Server) UploadDir(ctx context.Context, dir, bucket, prefix string) error {
	c := s.Client()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, ".zarrfs") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		key := strings.TrimPrefix(prefix+"/"+filepath.ToSlash(rel), "/")
		_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: f})
		return err
	})
	if err != nil {
		return fmt.Errorf("upload %s: %w", dir, err)
	}
	return nil
}

// Download copies every object of the bucket below prefix into dir with
// the independent client.
func (s *Server) Download(t testing.TB, bucket, prefix, dir string) {
	t.Helper()
	ctx := context.Background()
	c := s.Client()
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list %s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			if err != nil {
				t.Fatalf("get %s: %v", key, err)
			}
			b, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil {
				t.Fatalf("get %s: %v", key, err)
			}
			dst := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(key, prefix+"/")))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
