package integration_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// The trust tests attack zarrfs with what a store's author, another local
// user or a store URL can bring along: zarrfs must never delete, create or
// rename anything outside what it made, never keep its journal where
// others can change it, never mix the journals of two stores, and never
// show a URL's secrets.

// tree describes every file, directory and link under dir, without
// following links: what it is, and a file's content hash.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "symlink to " + target
			return err
		case d.IsDir():
			out[rel] = "directory"
		default:
			b, err := os.ReadFile(p)
			sum := sha256.Sum256(b)
			out[rel] = hex.EncodeToString(sum[:])
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails the test naming what changed between two trees.
func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	n := 0
	for p, was := range before {
		if now, ok := after[p]; !ok || now != was {
			if n++; n <= 5 {
				t.Errorf("%s: %s was %s, now %q", what, p, was, now)
			}
		}
	}
	for p, now := range after {
		if _, ok := before[p]; !ok {
			if n++; n <= 5 {
				t.Errorf("%s: %s appeared (%s)", what, p, now)
			}
		}
	}
	if n > 5 {
		t.Errorf("%s: %d changes in all", what, n)
	}
}

// hostileStore makes parent/precious (files of the user) and parent/store
// (a store with writeable layouts) and returns the store's directory.
func hostileStore(t *testing.T) (parent, dir string) {
	t.Helper()
	parent = t.TempDir()
	for name, content := range map[string]string{"precious/thesis.tex": "years of work", "precious/data/run1.csv": "1,2,3\n"} {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, _ := writeStore(t)
	dir = filepath.Join(parent, "store")
	if err := os.Rename(src, dir); err != nil {
		t.Fatal(err)
	}
	return parent, dir
}

// rawChunk is content for the inner chunk of int32_raw_3d at coords, and
// that chunk's file in a mount's v3 view.
func rawChunk(t *testing.T, dir, mnt string, fill byte) (a *zarr.Array, coords []int, path string, content []byte) {
	t.Helper()
	a = storeArray(t, dir, "int32_raw_3d")
	coords = make([]int, len(a.Shape))
	content = bytes.Repeat([]byte{fill}, 4*nd.Size(a.Sharding().ChunkShape()))
	return a, coords, filepath.Join(mnt, "v3", a.Path, keyIn(a, "v3", coords)), content
}

// mountFails starts a mount that must be refused, and returns why.
func mountFails(t *testing.T, dir string, args ...string) string {
	t.Helper()
	m, err := integration.Start(zarrfsBin, dir, t.TempDir(), args...)
	if err == nil {
		m.Stop()
		t.Fatalf("mount %s %v: mounted, want a refusal", dir, args)
	}
	return err.Error()
}

// TestTrustJournalLinkOut: a store whose .zarrfs/journal is a link to its
// parent's parent, as a tar or zip archive can carry, beside a directory of
// the user's files. `zarrfs recover` and a read-write mount refuse it with
// the reason and change nothing; a read-only mount works without it.
func TestTrustJournalLinkOut(t *testing.T) {
	parent, dir := hostileStore(t)
	if err := os.Mkdir(filepath.Join(dir, store.StateDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(dir, store.StateDir, "journal")); err != nil {
		t.Fatal(err)
	}
	before := tree(t, parent)
	out, err := exec.Command(zarrfsBin, "recover", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "symbolic link") {
		t.Errorf("zarrfs recover of a store whose journal is a link: %v, want a refusal naming the link\n%s", err, out)
	}
	sameTree(t, "after zarrfs recover", before, tree(t, parent))
	if why := mountFails(t, dir); !strings.Contains(why, "symbolic link") {
		t.Errorf("the read-write mount was refused without naming the link: %s", why)
	}
	sameTree(t, "after a read-write mount", before, tree(t, parent))
	ro := mount(t, dir, "--ro")
	if _, err := os.ReadFile(filepath.Join(ro.Dir, "v2", zarr.ZMetadata)); err != nil {
		t.Errorf("the read-only mount does not work: %v", err)
	}
	if err := ro.Stop(); err != nil {
		t.Error(err)
	}
	sameTree(t, "after a read-only mount", before, tree(t, parent))
}

// TestTrustForeignJournalEntries: the store's journal directory holds a
// directory zarrfs did not make (the user's files in it) and a link out of
// the store. A read-write mount writes, publishes and unmounts, and
// `zarrfs recover` runs: both leave them, and everything outside the
// store, as they were, and say that they left them alone.
func TestTrustForeignJournalEntries(t *testing.T) {
	parent, dir := hostileStore(t)
	journals := filepath.Join(dir, store.StateDir, "journal")
	if err := os.MkdirAll(filepath.Join(journals, "foreign"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(journals, "foreign", "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../precious", filepath.Join(journals, "out")); err != nil {
		t.Fatal(err)
	}
	outside := func() map[string]string {
		m := tree(t, parent)
		for p := range m {
			if p == "store" || strings.HasPrefix(p, "store/") && !strings.HasPrefix(p, "store/.zarrfs") {
				delete(m, p) // the store's content: the write changes it
			}
		}
		return m
	}
	before := outside()
	m := mount(t, dir)
	a, coords, path, content := rawChunk(t, dir, m.Dir, 0x5a)
	if err := writeTrunc(path, content); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Log(), "not a zarrfs journal: left alone") {
		t.Errorf("the mount did not say it left the foreign entries alone:\n%s", m.Log())
	}
	if b, ok := storedInner(t, dir, a, coords); !ok || !bytes.Equal(b, content) {
		t.Error("the write is not in the store")
	}
	sameTree(t, "after a read-write mount", before, outside())
	if out, err := exec.Command(zarrfsBin, "recover", dir).CombinedOutput(); err != nil {
		t.Errorf("zarrfs recover: %v\n%s", err, out)
	}
	sameTree(t, "after zarrfs recover", before, outside())
}

// TestTrustStateDirRefused: a store whose .zarrfs is a link, belongs to
// another user or is writable by everyone cannot hold a journal that
// zarrfs can trust: read-write mounts and `zarrfs recover` are refused
// with the reason, read-only mounts work, and nothing changes.
func TestTrustStateDirRefused(t *testing.T) {
	cases := []struct {
		name, reason string
		prepare      func(t *testing.T, parent, state string)
	}{
		{"symlink", "symbolic link", func(t *testing.T, parent, state string) {
			elsewhere := filepath.Join(parent, "precious", "state")
			if err := os.MkdirAll(filepath.Join(elsewhere, "journal"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, state); err != nil {
				t.Fatal(err)
			}
		}},
		{"other-owner", "owned by uid 65534", func(t *testing.T, parent, state string) {
			if os.Geteuid() != 0 {
				zarrtest.Missing(t, "root: the test chowns to nobody")
			}
			if err := os.MkdirAll(filepath.Join(state, "journal"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(state, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
		{"world-writable", "writable by group or others", func(t *testing.T, parent, state string) {
			if err := os.MkdirAll(filepath.Join(state, "journal"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(state, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent, dir := hostileStore(t)
			c.prepare(t, parent, filepath.Join(dir, store.StateDir))
			before := tree(t, parent)
			if why := mountFails(t, dir); !strings.Contains(why, "read-write mount refused") || !strings.Contains(why, c.reason) {
				t.Errorf("the read-write mount was refused without saying why (%s): %s", c.reason, why)
			}
			out, err := exec.Command(zarrfsBin, "recover", dir).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.reason) {
				t.Errorf("zarrfs recover: %v, want a refusal saying %s\n%s", err, c.reason, out)
			}
			ro := mount(t, dir, "--ro")
			if _, err := os.ReadFile(filepath.Join(ro.Dir, "v2", zarr.ZMetadata)); err != nil {
				t.Errorf("the read-only mount does not work: %v", err)
			}
			if err := ro.Stop(); err != nil {
				t.Error(err)
			}
			if !strings.Contains(ro.Log(), c.reason) {
				t.Errorf("the read-only mount did not say why it left the journals out:\n%s", ro.Log())
			}
			sameTree(t, "after the mounts", before, tree(t, parent))
		})
	}
}

// TestTrustJournalModes: the journal a read-write mount keeps in the store
// is readable by its user only: directories 0700, files 0600.
func TestTrustJournalModes(t *testing.T) {
	dir, _ := writeStore(t)
	m := mount(t, dir)
	_, _, path, content := rawChunk(t, dir, m.Dir, 0x11)
	if err := writeTrunc(path, content); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, store.StateDir)
	modes := map[string]os.FileMode{}
	err := filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			modes[p] = fi.Mode()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for p, mode := range modes {
		want := os.FileMode(0o600)
		if mode.IsDir() {
			want = 0o700 | fs.ModeDir
		} else {
			files++
		}
		if mode != want {
			t.Errorf("%s: mode %v, want %v", p, mode, want)
		}
	}
	if files < 2 { // the owner file and a segment
		t.Errorf("the mount's journal holds %d files: %v", files, modes)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestTrustS3EndpointJournals: one bucket and prefix on two S3 servers
// are two stores. A mount of the first dies with a write it could not
// publish (the server refused its PUTs); `zarrfs recover` of the same
// s3:// URL on the second server must not publish that write there (it
// names the first server's journal and exits 1), and the journal of the
// first is replayed into the first only.
func TestTrustS3EndpointJournals(t *testing.T) {
	one, two := s3test.Start(t), s3test.Start(t)
	dir, _ := writeStore(t)
	for _, srv := range []*s3test.Server{one, two} {
		srv.Bucket(t, "zarr")
		srv.Upload(t, dir, "zarr", "p")
	}
	one.SetEnv(t) // the credentials, the same on both; --s3-endpoint chooses
	// A proxy in front of the first server refuses PUTs while refuse is set.
	target, err := url.Parse(one.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var refuse atomic.Bool
	refuse.Store(true)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && refuse.Load() {
			http.Error(w, "refused by the test", http.StatusForbidden)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	journals := t.TempDir()
	flags := func(endpoint string) []string {
		return []string{"--s3-endpoint", endpoint, "--s3-path-style", "--journal-dir", journals}
	}

	m := mount(t, "s3://zarr/p", flags(proxy.URL)...)
	a, coords, path, content := rawChunk(t, dir, m.Dir, 0x77)
	if err := writeTrunc(path, content); err != nil {
		t.Fatal(err)
	}
	m.Kill() // the write stays in its journal
	before := t.TempDir()
	two.Download(t, "zarr", "p", before)

	// The first server's journal is named (the same bucket and prefix
	// through another endpoint), not published: exit 1.
	out, err := exec.Command(zarrfsBin, append([]string{"recover"}, append(flags(two.Endpoint), "s3://zarr/p")...)...).CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "published 0 updates") || !strings.Contains(string(out), "ELSEWHERE") {
		t.Errorf("zarrfs recover of s3://zarr/p on the second server: %v, want nothing published and the first server's journal named\n%s", err, out)
	}
	after := t.TempDir()
	two.Download(t, "zarr", "p", after)
	sameTree(t, "the second server's bucket", tree(t, before), tree(t, after))
	if dirs, _ := os.ReadDir(journals); len(dirs) < 1 {
		t.Fatalf("no journal under %s", journals)
	}

	refuse.Store(false)
	out, err = exec.Command(zarrfsBin, append([]string{"recover"}, append(flags(proxy.URL), "s3://zarr/p")...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "published 1 updates") {
		t.Errorf("zarrfs recover of s3://zarr/p on the first server: %v, want the write published\n%s", err, out)
	}
	got := t.TempDir()
	one.Download(t, "zarr", "p", got)
	if b, ok := storedInner(t, got, a, coords); !ok || !bytes.Equal(b, content) {
		t.Error("the first server does not hold the write its mount journaled")
	}
}

// TestTrustURLPassword: a password in an http:// store URL reaches the
// server (the mount reads through basic authentication) but neither the
// mount table, which every user can read, nor the log, nor what
// `zarrfs info` prints.
func TestTrustURLPassword(t *testing.T) {
	const user, password = "reader", "pw-Secret-42"
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	consolidate(t, dir)
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword(user, password)
	storeURL := u.String() + "/"

	m := mount(t, storeURL, "--ro")
	if _, err := os.ReadFile(filepath.Join(m.Dir, "v2", zarr.ZMetadata)); err != nil {
		t.Fatalf("reading through the mount: %v\n%s", err, m.Log())
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, m.Dir) {
			if strings.Contains(line, password) {
				t.Errorf("the mount table shows the password: %s", line)
			}
			if !strings.Contains(line, user+":***@") {
				t.Errorf("the mount table does not name the store with its password hidden: %s", line)
			}
		}
	}
	info, _ := exec.Command(zarrfsBin, "info", storeURL).CombinedOutput()
	missing, _ := exec.Command(zarrfsBin, "info", storeURL+"missing/").CombinedOutput()
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"the mount's log": m.Log(), "zarrfs info": string(info), "zarrfs info of a missing path": string(missing)} {
		if strings.Contains(text, password) {
			t.Errorf("%s shows the password:\n%s", what, text)
		}
	}
	if !strings.Contains(m.Log(), user+":***@") {
		t.Errorf("the mount's log does not name the store:\n%s", m.Log())
	}
}

// TestTrustStoreRemoved: the store directory, and the journal in it, is
// deleted under a read-write mount. Writes are no longer acknowledged
// (EIO, said once in the log), and unmounting says the updates it could
// not publish are lost instead of promising a replay.
func TestTrustStoreRemoved(t *testing.T) {
	dir, _ := writeStore(t)
	m := mount(t, dir)
	a, coords, path, content := rawChunk(t, dir, m.Dir, 0x21)
	if err := writeTrunc(path, content); err != nil {
		t.Fatal(err)
	}
	// The mount may be publishing the write meanwhile, creating the
	// shard's directories behind RemoveAll's walk (ENOTEMPTY), as it
	// would behind an rm -rf: remove until the store is gone.
	err := os.RemoveAll(dir)
	for i := 0; err != nil && i < 100; i++ {
		err = os.RemoveAll(dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", append(coords[:len(coords)-1:len(coords)-1], 1)))
	for i, p := range []string{path, other, path} {
		if err := writeTrunc(p, content); !errors.Is(err, syscall.EIO) {
			t.Errorf("write %d after the store was deleted: %v, want EIO", i, err)
		}
	}
	f, err := os.OpenFile(other, os.O_WRONLY, 0)
	if err == nil {
		if _, err := f.Write(content); err == nil {
			if err := f.Sync(); !errors.Is(err, syscall.EIO) {
				t.Errorf("fsync after the store was deleted: %v, want EIO", err)
			}
		}
		f.Close()
	}
	err = m.Stop()
	log := m.Log()
	if n := strings.Count(log, `msg="the journal was removed`); n != 1 {
		t.Errorf("the log says %d times that the journal was removed, want once:\n%s", n, log)
	}
	if strings.Contains(log, "replays them") {
		t.Errorf("unmounting promises a replay of a journal that was deleted: %v", err)
	}
}
