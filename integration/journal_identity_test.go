package integration_test

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store/azstore/aztest"
	"github.com/zarrfs/zarrfs/zarr/store/gcsstore/gcstest"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// journaledWrite mounts a remote store read-write with args, writes one
// inner chunk of int32_raw_3d while proxy refuses every upload, and kills
// the mount: the acknowledged write is left in the journal under the
// journal directory the args name. It returns the array, the chunk and
// what was written.
func journaledWrite(t *testing.T, dir, url string, proxy *faultproxy.Proxy, args ...string) (a *zarr.Array, coords []int, content []byte) {
	t.Helper()
	proxy.SetRule(func(r *http.Request) faultproxy.Fault {
		if uploads(r) {
			return faultproxy.Fault{Status: http.StatusForbidden}
		}
		return faultproxy.Fault{}
	})
	defer proxy.SetRule(nil)
	m := mount(t, url, args...)
	a, coords, path, content := rawChunk(t, dir, m.Dir, 0x6b)
	if err := writeTrunc(path, content); err != nil {
		t.Fatalf("%v\n%s", err, m.Log())
	}
	m.Kill()
	return a, coords, content
}

// zarrfsIn runs a zarrfs command with env added to this process's.
func zarrfsIn(env []string, args ...string) (string, int) {
	cmd := exec.Command(zarrfsBin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), exitCode(err)
}

// TestJournalsUnderOtherEndpoints: a mount through one spelling of the
// server's endpoint is killed with a write in its journal, on S3, GCS and
// Azure. `zarrfs check` and `zarrfs recover` through another host name for
// the same server (localhost for 127.0.0.1, which zarrfs does not take for
// the same store) name that journal and exit 1 instead of reporting
// nothing to do; `zarrfs recover` through a spelling of the same URL (the
// scheme in capitals, a trailing slash) publishes it.
func TestJournalsUnderOtherEndpoints(t *testing.T) {
	kinds := []struct {
		name string
		// start serves the store at dir and returns its URL, the proxy in
		// front of the server, and how a command reaches the server at
		// endpoint (http://HOST:PORT): flags and environment.
		start func(t *testing.T, dir string) (url string, proxy *faultproxy.Proxy, reach func(endpoint string) (args, env []string), download func(t *testing.T) string)
	}{
		{"s3", func(t *testing.T, dir string) (string, *faultproxy.Proxy, func(string) ([]string, []string), func(*testing.T) string) {
			srv := s3test.Start(t)
			srv.Bucket(t, "zarr")
			srv.Upload(t, dir, "zarr", "p")
			srv.SetEnv(t)
			return "s3://zarr/p", faultproxy.Start(t, srv.Endpoint), func(endpoint string) ([]string, []string) {
				return []string{"--s3-endpoint", endpoint, "--s3-path-style"}, nil
			}, downloadTo(srv.Download, "zarr", "p")
		}},
		{"gcs", func(t *testing.T, dir string) (string, *faultproxy.Proxy, func(string) ([]string, []string), func(*testing.T) string) {
			srv := gcstest.Start(t)
			srv.Bucket(t, "zarr")
			srv.Upload(t, dir, "zarr", "p")
			return "gs://zarr/p", faultproxy.Start(t, srv.Endpoint), func(endpoint string) ([]string, []string) {
				return nil, []string{"STORAGE_EMULATOR_HOST=" + endpoint}
			}, downloadTo(srv.Download, "zarr", "p")
		}},
		{"az", func(t *testing.T, dir string) (string, *faultproxy.Proxy, func(string) ([]string, []string), func(*testing.T) string) {
			srv := aztest.Start(t)
			srv.Container(t, "zarr")
			srv.Upload(t, dir, "zarr", "p")
			for k, v := range map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "", "AZURE_STORAGE_SAS_TOKEN": "", "AZURE_STORAGE_ACCOUNT": aztest.Account, "AZURE_STORAGE_KEY": aztest.Key} {
				t.Setenv(k, v)
			}
			return "az://zarr/p", faultproxy.Start(t, strings.TrimSuffix(srv.Endpoint, "/"+aztest.Account)), func(endpoint string) ([]string, []string) {
				return []string{"--az-endpoint", strings.TrimSuffix(endpoint, "/") + "/" + aztest.Account}, nil
			}, downloadTo(srv.Download, "zarr", "p")
		}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			dir := t.TempDir()
			v3Root(t, dir)
			addLayouts(t, dir, writeLayouts[1:2])
			url, proxy, reach, download := kind.start(t, dir)
			journals := t.TempDir()
			port := strings.TrimPrefix(proxy.URL, "http://127.0.0.1:")
			command := func(endpoint string, args ...string) (string, int) {
				flags, env := reach(endpoint)
				return zarrfsIn(env, append(append(append(args[:1:1], flags...), "--journal-dir", journals), append(args[1:], url)...)...)
			}
			flags, env := reach("http://127.0.0.1:" + port)
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			a, coords, content := journaledWrite(t, dir, url, proxy, append(flags, "--journal-dir", journals)...)

			other := "http://localhost:" + port
			for _, cmd := range []string{"check", "recover"} {
				out, code := command(other, cmd)
				if code != 1 || !strings.Contains(out, "ELSEWHERE") || !strings.Contains(out, "endpoint=http://127.0.0.1:"+port) {
					t.Errorf("zarrfs %s through %s: exit %d; want exit 1 naming the journal of the mount through 127.0.0.1\n%s", cmd, other, code, out)
				}
			}
			if b, ok := storedInner(t, download(t), a, coords); ok && bytes.Equal(b, content) {
				t.Errorf("zarrfs recover through %s published the write of the mount through another endpoint", other)
			}
			spelled := "HTTP://127.0.0.1:" + port + "/"
			if out, code := command(spelled, "recover"); code != 0 || !strings.Contains(out, "published 1 updates") {
				t.Errorf("zarrfs recover through %s: exit %d; want the journal published\n%s", spelled, code, out)
			}
			if b, ok := storedInner(t, download(t), a, coords); !ok || !bytes.Equal(b, content) {
				t.Errorf("the store does not hold the journaled write after zarrfs recover through %s", spelled)
			}
			if out, code := command(other, "check"); code != 0 {
				t.Errorf("zarrfs check through %s once the journal is published: exit %d\n%s", other, code, out)
			}
		})
	}
}

// TestJournalBaseOfAnotherUser: root's --journal-dir belongs to user
// nobody, who renames the journal root left for store A (a mount killed
// with a write in it) to the name of store B's journal directory. zarrfs
// must refuse that journal directory (recover and a read-write mount of B
// exit 1 saying who owns it; check says why it read no journal), leaving B
// unchanged. Once the directory is root's again, the journal names store
// A: recover of B leaves it alone and names it, recover of A publishes it
// from where it was moved.
func TestJournalBaseOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		zarrtest.Missing(t, "root: the test gives the journal directory to nobody")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		zarrtest.Missing(t, "setpriv (util-linux) to act as nobody")
	}
	dir := t.TempDir()
	v3Root(t, dir)
	addLayouts(t, dir, writeLayouts[1:2])
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	srv.Upload(t, dir, "zarr", "a")
	srv.Upload(t, dir, "zarr", "b")
	srv.SetEnv(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	base := filepath.Join(t.TempDir(), "journals") // as in /tmp
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(base); d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil { // for nobody to reach it
			t.Fatal(err)
		}
	}
	flags := []string{"--s3-endpoint", proxy.URL, "--s3-path-style", "--journal-dir", base}
	a, coords, content := journaledWrite(t, dir, "s3://zarr/a", proxy, flags...)
	download := func(prefix string) string { return downloadTo(srv.Download, "zarr", prefix)(t) }
	before := tree(t, download("b"))

	// nobody's directory, as another user's under /tmp; nobody renames
	// A's journal directory to B's name (a mount of B makes it first).
	if err := os.Chown(base, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(base)
	if len(entries) != 1 {
		t.Fatalf("the journal directory holds %d entries, want store A's", len(entries))
	}
	nameB := journalDirName(t, flags, "s3://zarr/b")
	if out, err := asNobody("mv", filepath.Join(base, entries[0].Name()), filepath.Join(base, nameB)); err != nil {
		t.Fatalf("nobody renames the journal: %v\n%s", err, out)
	}
	run := func(args ...string) (string, int) {
		return zarrfsIn(nil, append(append(args[:1:1], flags...), args[1:]...)...)
	}
	if out, code := run("recover", "s3://zarr/b"); code != 1 || !strings.Contains(out, "owned by uid 65534") {
		t.Errorf("zarrfs recover of B with the journal directory nobody's: exit %d; want exit 1 saying who owns it\n%s", code, out)
	}
	if out, _ := run("check", "s3://zarr/b"); !strings.Contains(out, "journals not read") || !strings.Contains(out, "owned by uid 65534") {
		t.Errorf("zarrfs check of B does not say why it read no journal:\n%s", out)
	}
	m, err := integration.Start(zarrfsBin, "s3://zarr/b", filepath.Join(t.TempDir()), flags...)
	if err == nil {
		m.Stop()
		t.Errorf("a read-write mount of B with the journal directory nobody's was not refused")
	} else if !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("the read-write mount of B was refused without saying who owns the journal directory: %v", err)
	}
	sameTree(t, "store B", before, tree(t, download("b")))

	if err := os.Chown(base, 0, 0); err != nil {
		t.Fatal(err)
	}
	if out, code := run("recover", "s3://zarr/b"); code != 1 || !strings.Contains(out, "ELSEWHERE") || !strings.Contains(out, "s3://zarr/a?") {
		t.Errorf("zarrfs recover of B with A's journal in B's directory: exit %d; want exit 1 naming A's journal\n%s", code, out)
	}
	sameTree(t, "store B", before, tree(t, download("b")))
	if out, code := run("recover", "s3://zarr/a"); code != 0 || !strings.Contains(out, "published 1 updates") {
		t.Errorf("zarrfs recover of A with its journal moved: exit %d; want it published\n%s", code, out)
	}
	if b, ok := storedInner(t, download("a"), a, coords); !ok || !bytes.Equal(b, content) {
		t.Error("store A does not hold the write its mount journaled")
	}
}

// journalDirName is the name of the journal directory of the store at
// url under the journal directory flags name: made by a read-write mount,
// which leaves it empty.
func journalDirName(t *testing.T, flags []string, url string) string {
	t.Helper()
	scratch := t.TempDir()
	args := append([]string{}, flags...)
	for i := range args {
		if args[i] == "--journal-dir" {
			args[i+1] = scratch
		}
	}
	m := mount(t, url, args...)
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(scratch)
	if err != nil || len(entries) != 1 {
		t.Fatalf("a mount of %s made %v in its journal directory (%v), want one directory", url, entries, err)
	}
	return entries[0].Name()
}
