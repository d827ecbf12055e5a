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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/zarrfs/zarrfs/zarr/store/azstore"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
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

// emulator is Azurite's blob service, keeping blobs in memory.
// --skipApiVersionCheck: the SDK may speak a newer service version than
// this Azurite knows; the operations zarrfs uses are older than both.
var emulator = storetest.Emulator{
	Name: "azurite-blob", EnvVar: "ZARRFS_AZURITE", Path: "/tmp/zarrfs-azurite/node_modules/.bin/azurite-blob",
	Install: "npm install --prefix /tmp/zarrfs-azurite azurite@" + Version + " (.ci/run does this)",
	Args: func(addr, _ string) []string {
		_, port, _ := net.SplitHostPort(addr)
		return []string{"--blobHost", "127.0.0.1", "--blobPort", port,
			"--inMemoryPersistence", "--skipApiVersionCheck", "--disableProductStyleUrl", "--disableTelemetry"}
	},
	InDir: true,
	Wait:  time.Minute, // node starts slowly on a loaded machine
}

// Start starts an emulator for the test and stops it in cleanup. Without
// Azurite the test is skipped, or fails when CI is set.
func Start(t testing.TB) *Server {
	t.Helper()
	addr, _ := emulator.Start(t)
	return &Server{Endpoint: "http://" + addr + "/" + Account}
}

// StartServer starts Azurite's blob service on a free port of 127.0.0.1,
// keeping blobs in memory, running in dir with its output to log, and
// returns it with the function that stops it.
func StartServer(dir string, log io.Writer) (*Server, func(), error) {
	addr, stop, err := emulator.StartProcess(dir, log)
	if err != nil {
		return nil, nil, err
	}
	return &Server{Endpoint: "http://" + addr + "/" + Account}, stop, nil
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
