// Package aztest starts a real Azure Blob Storage emulator for tests:
// Azurite's blob service, on 127.0.0.1, in memory.
package aztest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/zarrfs/zarrfs/zarr/store/azstore"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
)

// Version is the Azurite release the tests run against; .ci/run installs
// it (npm install --prefix /tmp/zarrfs-azurite azurite@Version).
const Version = "3.37.0"

// Azurite's well-known development account.
const (
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Server is a running emulator.
type Server struct {
	Endpoint string // the blob service: http://127.0.0.1:PORT/devstoreaccount1
}

// binary finds azurite-blob: $ZARRFS_AZURITE, $PATH, then where .ci/run
// installs it.
func binary() (string, error) {
	if p := os.Getenv("ZARRFS_AZURITE"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("azurite-blob"); err == nil {
		return p, nil
	}
	p := "/tmp/zarrfs-azurite/node_modules/.bin/azurite-blob"
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("azurite-blob not found: npm install --prefix /tmp/zarrfs-azurite azurite@%s (.ci/run does this), or set ZARRFS_AZURITE", Version)
}

// Start starts an emulator for the test and stops it in cleanup. Without
// Azurite the test is skipped, or fails when CI is set.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := binary(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip("SKIP: ", err)
	}
	logPath := filepath.Join(t.TempDir(), "azurite.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	s, stop, err := StartServer(t.TempDir(), logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("azurite output:\n%s", b)
		}
	})
	return s
}

// StartServer starts Azurite's blob service on a free port of 127.0.0.1,
// keeping blobs in memory, running in dir with its output to log, and
// returns it with the function that stops it. --skipApiVersionCheck: the
// SDK may speak a newer service version than this Azurite knows; the
// operations zarrfs uses are older than both.
func StartServer(dir string, log io.Writer) (*Server, func(), error) {
	bin, err := binary()
	if err != nil {
		return nil, nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	addr := l.Addr().(*net.TCPAddr)
	l.Close()
	cmd := exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(addr.Port),
		"--inMemoryPersistence", "--skipApiVersionCheck", "--disableProductStyleUrl", "--disableTelemetry")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr.String(), 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			return nil, nil, fmt.Errorf("azurite exited: %v", err)
		default:
		}
		if i == 1200 { // node starts slowly on a loaded machine
			stop()
			return nil, nil, fmt.Errorf("azurite does not listen on %s after 60s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &Server{Endpoint: "http://" + addr.String() + "/" + Account}, stop, nil
}

// ConnectionString reaches the account at endpoint (the server's, or a
// proxy's in front of it).
func ConnectionString(endpoint string) string {
	return "DefaultEndpointsProtocol=http;AccountName=" + Account + ";AccountKey=" + Key + ";BlobEndpoint=" + endpoint + ";"
}

// Env is the Azure environment that reaches the account at endpoint with
// its connection string, for processes and for this one (SetEnv); the
// other credentials are cleared.
func Env(endpoint string) []string {
	return []string{
		"AZURE_STORAGE_CONNECTION_STRING=" + ConnectionString(endpoint),
		"AZURE_STORAGE_ACCOUNT=", "AZURE_STORAGE_KEY=", "AZURE_STORAGE_SAS_TOKEN=",
	}
}

// SetEnv sets Env(endpoint) in this process for the test.
func SetEnv(t testing.TB, endpoint string) {
	for _, kv := range Env(endpoint) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// Limits are short request limits for tests.
var Limits = requests.Limits{MaxAttempts: 3, MaxBackoff: 100 * time.Millisecond}

// Client returns an SDK client of the account, independent of the store.
func (s *Server) Client() *azblob.Client {
	c, err := azblob.NewClientFromConnectionString(ConnectionString(s.Endpoint), nil)
	if err != nil {
		panic(err) // a constant connection string
	}
	return c
}

// Container creates a container.
func (s *Server) Container(t testing.TB, name string) {
	t.Helper()
	if err := s.CreateContainer(context.Background(), name); err != nil {
		t.Fatal(err)
	}
}

// CreateContainer creates a container.
func (s *Server) CreateContainer(ctx context.Context, name string) error {
	if _, err := s.Client().CreateContainer(ctx, name, nil); err != nil {
		return fmt.Errorf("create container %s: %w", name, err)
	}
	return nil
}

// Open opens az://containerName/prefix as a store, with the connection
// string set in the environment of this process.
func (s *Server) Open(t testing.TB, containerName, prefix string, readOnly bool) *azstore.Store {
	t.Helper()
	SetEnv(t, s.Endpoint)
	st, err := azstore.Open(context.Background(), containerName, prefix, azstore.Options{ReadOnly: readOnly, Limits: Limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Put writes one blob with the independent client and returns its ETag.
func (s *Server) Put(ctx context.Context, containerName, name string, b []byte) (string, error) {
	out, err := s.Client().UploadBuffer(ctx, containerName, name, b, nil)
	if err != nil {
		return "", err
	}
	return string(*out.ETag), nil
}

// Upload copies every file under dir (but zarrfs's state) into the
// container below prefix with the independent client.
func (s *Server) Upload(t testing.TB, dir, containerName, prefix string) {
	t.Helper()
	if err := s.UploadDir(context.Background(), dir, containerName, prefix); err != nil {
		t.Fatal(err)
	}
}

// UploadDir copies every file under dir (but zarrfs's state) into the
// container below prefix with the independent client.
func (s *Server) UploadDir(ctx context.Context, dir, containerName, prefix string) error {
	c := s.Client()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, ".zarrfs") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(prefix+"/"+filepath.ToSlash(rel), "/")
		_, err = c.UploadBuffer(ctx, containerName, name, b, nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("upload %s: %w", dir, err)
	}
	return nil
}

// Download copies every blob of the container below prefix into dir with
// the independent client.
func (s *Server) Download(t testing.TB, containerName, prefix, dir string) {
	t.Helper()
	ctx := context.Background()
	c := s.Client()
	from := prefix + "/"
	p := c.NewListBlobsFlatPager(containerName, &azblob.ListBlobsFlatOptions{Prefix: &from})
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list %s/%s: %v", containerName, prefix, err)
		}
		for _, item := range page.Segment.BlobItems {
			name := *item.Name
			out, err := c.DownloadStream(ctx, containerName, name, nil)
			if err != nil {
				t.Fatalf("get %s: %v", name, err)
			}
			var buf bytes.Buffer
			_, err = io.Copy(&buf, out.Body)
			out.Body.Close()
			if err != nil {
				t.Fatalf("get %s: %v", name, err)
			}
			dst := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(name, from)))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// ContainerSAS is a SAS token (a URL query) that lets its holder read and
// list the container for an hour, signed with the account's key.
func ContainerSAS(containerName string) (string, error) {
	cred, err := azblob.NewSharedKeyCredential(Account, Key)
	if err != nil {
		return "", err
	}
	q, err := sas.BlobSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: time.Now().Add(time.Hour).UTC(),
		Permissions: (&sas.ContainerPermissions{Read: true, List: true}).String(), ContainerName: containerName,
	}.SignWithSharedKey(cred)
	if err != nil {
		return "", err
	}
	return q.Encode(), nil
}
