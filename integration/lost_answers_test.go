package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr/store/azstore/aztest"
	"github.com/zarrfs/zarrfs/zarr/store/gcsstore/gcstest"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// The lost-answer tests write through a fault proxy that lets a request
// reach the server, which carries it out, and drops the answer: the
// retry then meets the state the write itself made (a create finds the
// object there, an update finds it at a generation it did not ask for).

// faultyRemote is a store in a bucket that mounts reach through a fault
// proxy.
type faultyRemote struct {
	url   string   // the store's URL
	args  []string // the mount's flags for it
	proxy *faultproxy.Proxy
	// download copies the store as the server holds it into a new
	// directory.
	download func(t *testing.T) string
}

// faultyRemotes start a server of each kind holding the store at dir
// under prefix, with a fault proxy in front that this process's
// environment (which mounts inherit) points at.
var faultyRemotes = []struct {
	name  string
	start func(t *testing.T, dir, prefix string) faultyRemote
}{
	{"s3", func(t *testing.T, dir, prefix string) faultyRemote {
		srv := s3test.Start(t)
		srv.Bucket(t, "zarr")
		srv.Upload(t, dir, "zarr", prefix)
		p := faultproxy.Start(t, srv.Endpoint)
		useS3(t, srv, p.URL)
		return faultyRemote{url: "s3://zarr/" + prefix, args: []string{"--s3-path-style"}, proxy: p, download: downloadTo(srv.Download, "zarr", prefix)}
	}},
	{"gcs", func(t *testing.T, dir, prefix string) faultyRemote {
		srv := gcstest.Start(t)
		srv.Bucket(t, "zarr")
		srv.Upload(t, dir, "zarr", prefix)
		p := faultproxy.Start(t, srv.Endpoint)
		t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(p.URL, "http://"))
		return faultyRemote{url: "gs://zarr/" + prefix, proxy: p, download: downloadTo(srv.Download, "zarr", prefix)}
	}},
	{"az", func(t *testing.T, dir, prefix string) faultyRemote {
		srv := aztest.Start(t)
		srv.Container(t, "zarr")
		srv.Upload(t, dir, "zarr", prefix)
		p := faultproxy.Start(t, strings.TrimSuffix(srv.Endpoint, "/"+aztest.Account))
		aztest.SetEnv(t, p.URL+"/"+aztest.Account)
		return faultyRemote{url: "az://zarr/" + prefix, proxy: p, download: downloadTo(srv.Download, "zarr", prefix)}
	}},
}

// downloadTo returns a function that copies prefix of bucket into a new
// directory with download (a server's Download).
func downloadTo(download func(t testing.TB, bucket, prefix, dir string), bucket, prefix string) func(*testing.T) string {
	return func(t *testing.T) string {
		d := t.TempDir()
		download(t, bucket, prefix, d)
		return d
	}
}

// writes are the requests that change a bucket: S3's and Azure's PUT,
// GCS's upload (POST), and DELETE.
var writes = faultproxy.Methods(http.MethodPut, http.MethodPost, http.MethodDelete)

// uploads are S3's and Azure's PUT and GCS's POST.
var uploads = faultproxy.Methods(http.MethodPut, http.MethodPost)

// creates are the uploads on condition that nothing is there: S3's and
// Azure's If-None-Match: *, GCS's ifGenerationMatch=0.
func creates(r *http.Request) bool {
	return uploads(r) && (r.Header.Get("If-None-Match") == "*" || r.URL.Query().Get("ifGenerationMatch") == "0")
}

// lostAnswer stores the write and drops the answer.
var lostAnswer = faultproxy.Fault{DropAnswer: true}

// umountPublishes runs `zarrfs umount`, which must publish everything
// within limit, exit 0 and say that every acknowledged write is in the
// store; the mount process must then exit 0.
func umountPublishes(t *testing.T, m *integration.Mount, limit time.Duration) {
	t.Helper()
	waitControl(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, zarrfsBin, "umount", m.Dir).CombinedOutput()
	t.Logf("zarrfs umount took %s: %s", time.Since(start).Round(time.Millisecond), bytes.TrimSpace(out))
	if err != nil || !strings.Contains(string(out), "every acknowledged write is in the store") {
		t.Fatalf("zarrfs umount: %v, printed %q; want every write published within %s\n%s", err, out, limit, m.Log())
	}
	if err := m.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.Log(), "directory dropped") {
		t.Errorf("the mount dropped a directory:\n%s", m.Log())
	}
}

// createDatasetsScript creates six arrays with zarr-python 2's
// create_dataset in the v2 view of the mount ARGV[1], writes them, reads
// each back and prints their digests (little-endian C order).
const createDatasetsScript = `
import hashlib, json, os, sys
import numpy as np, zarr
v2 = os.path.join(sys.argv[1], "v2")
g = zarr.open_group(v2, mode="a")
out = {}
for i in range(6):
    name = "ds%d" % i
    a = g.create_dataset(name, shape=(20, 12), chunks=(5, 4), dtype="<i4")
    data = (np.arange(240, dtype="<i4").reshape(20, 12) + 1) * (i + 1)
    a[...] = data
    if not np.array_equal(zarr.open_array(os.path.join(v2, name), mode="r")[...], data):
        sys.exit(name + " reads back otherwise through the mount")
    out[name] = hashlib.sha256(data.tobytes()).hexdigest()
print(json.dumps(out))
`

// nativeArrayScript writes a native Zarr v2 array of 16 chunks at
// ARGV[1] and prints its digest.
const nativeArrayScript = `
import hashlib, sys
import numpy as np, zarr
a = zarr.open(sys.argv[1], mode="w", shape=(8, 8), chunks=(2, 2), dtype="<i4")
data = np.arange(64, dtype="<i4").reshape(8, 8) + 1
a[...] = data
print(hashlib.sha256(data.tobytes()).hexdigest())
`

// TestLostAnswers: writes whose answer is lost after the server stored
// them, on S3 (versitygw), GCS (fake-gcs-server) and Azure (Azurite):
//   - zarr-python's create_dataset, with every second create's and every
//     second other upload's answer lost: a
//     node's zarr.json is created only if nothing is there, and the retry
//     of a create whose answer was lost finds it there: that is the
//     create succeeding, not EEXIST;
//   - cp -r of a 16-chunk array with the first write's answer lost: cp
//     exits 0 and the store holds every chunk;
//   - publishes with every upload's first answer lost: the retry is
//     refused for the value its own first attempt stored, which ends the
//     publish instead of starting it over (20 times, then failing).
//
// Each time `zarrfs umount` says every acknowledged write is in the store,
// and the bucket, read by zarrita without zarrfs, holds them.
func TestLostAnswers(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	for _, kind := range faultyRemotes {
		t.Run(kind.name, func(t *testing.T) {
			t.Run("create_dataset", func(t *testing.T) {
				dir := t.TempDir()
				v3Root(t, dir)
				r := kind.start(t, dir, "created")
				m := mount(t, r.url, append(r.args, "--journal-dir", t.TempDir())...)
				// Of the creates (whose answer the mount never saw lost) and of
				// the other uploads apart, so that creates meet it too
				// whatever the publishes between them.
				lostCreate, lostUpdate := faultproxy.Every(2, creates, lostAnswer), faultproxy.Every(2, uploads, lostAnswer)
				r.proxy.SetRule(func(req *http.Request) faultproxy.Fault {
					if creates(req) {
						return lostCreate(req)
					}
					return lostUpdate(req)
				})
				out, err := exec.Command("/usr/bin/python3", "-c", createDatasetsScript, m.Dir).Output()
				if err != nil {
					t.Fatalf("zarr-python with every second upload's answer lost: %v\n%s\nzarrfs log:\n%s", err, stderrOf(err), m.Log())
				}
				var want map[string]string
				if err := json.Unmarshal(out, &want); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				r.proxy.SetRule(nil)
				umountPublishes(t, m, 2*time.Minute)
				got := o.ZarritaAll(t, r.download(t))
				for name, digest := range want {
					if z := got[name]; z.Error != "" || z.SHA256 != digest {
						t.Errorf("zarrita reads %s from the bucket: %q, digest %s; zarr-python wrote %s", name, z.Error, z.SHA256, digest)
					}
				}
			})
			t.Run("cp", func(t *testing.T) {
				native := filepath.Join(t.TempDir(), "native")
				out, err := exec.Command("/usr/bin/python3", "-c", nativeArrayScript, native).Output()
				if err != nil {
					t.Fatalf("zarr-python: %v\n%s", err, stderrOf(err))
				}
				want := strings.TrimSpace(string(out))
				dir := t.TempDir()
				v3Root(t, dir)
				r := kind.start(t, dir, "copied")
				m := mount(t, r.url, append(r.args, "--journal-dir", t.TempDir())...)
				r.proxy.SetRule(faultproxy.Once(1, writes, lostAnswer))
				if out, err := exec.Command("cp", "-r", native, filepath.Join(m.Dir, "v2", "arr")).CombinedOutput(); err != nil {
					t.Errorf("cp -r with the first write's answer lost: %v\n%s\nzarrfs log:\n%s", err, out, m.Log())
				}
				umountPublishes(t, m, 2*time.Minute)
				if z := o.Zarrita(t, r.download(t), "arr"); z.Error != "" || z.SHA256 != want {
					t.Errorf("zarrita reads the copy from the bucket: %q, digest %s; the source's %s", z.Error, z.SHA256, want)
				}
			})
			t.Run("publish", func(t *testing.T) {
				dir := t.TempDir()
				v3Root(t, dir)
				addLayouts(t, dir, writeLayouts[1:2])
				a := storeArray(t, dir, "int32_raw_3d") // 4 shards of 2x2x2 inner chunks, any 120 bytes a chunk
				r := kind.start(t, dir, "published")
				m := mount(t, r.url, append(r.args, "--journal-dir", t.TempDir())...)
				var sent atomic.Int64
				firstLost := faultproxy.FirstTries(writes, lostAnswer)
				r.proxy.SetRule(func(req *http.Request) faultproxy.Fault {
					if uploads(req) {
						sent.Add(1)
					}
					return firstLost(req)
				})
				// One inner chunk of each shard: one publish each.
				chunks := [][]int{{0, 0, 0}, {2, 0, 0}, {0, 2, 0}, {2, 2, 0}}
				content := func(i int) []byte { return bytes.Repeat([]byte{byte(0xa0 + i)}, 120) }
				for i, c := range chunks {
					if err := writeTrunc(filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", c)), content(i)); err != nil {
						t.Fatalf("writing chunk %v: %v\n%s", c, err, m.Log())
					}
				}
				umountPublishes(t, m, 2*time.Minute)
				t.Logf("%d uploads for %d shards", sent.Load(), len(chunks))
				// Each publish: the first attempt, stored and its answer lost,
				// and the retry, refused for that value, which settles it.
				if n := sent.Load(); n > int64(2*len(chunks)+2) {
					t.Errorf("%d uploads published %d shards; want 2 each: a publish whose retry meets its own value is done", n, len(chunks))
				}
				got := r.download(t)
				for i, c := range chunks {
					if b, ok := storedInner(t, got, a, c); !ok || !bytes.Equal(b, content(i)) {
						t.Errorf("chunk %v in the bucket: %v (stored %v); want what was written", c, b, ok)
					}
				}
			})
		})
	}
}
