package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// newStoreScript starts a store through MNT/v2 with zarr-python 2: it
// opens the root group, gives it an attribute and creates and writes an
// array; it prints the array's digest.
const newStoreScript = `
import json, sys
import numpy as np, zarr
g = zarr.open_group(sys.argv[1], mode="a")
g.attrs["title"] = "started through the mount"
a = g.create_dataset("first", shape=(6, 5), chunks=(3, 5), dtype="<i2")
a[...] = np.arange(30, dtype="<i2").reshape(6, 5)
print(json.dumps({"first": digest(a)}))
`

// startStore mounts the empty store at storeArg (with args), checks the
// log says it is a new store, writes newStoreScript through it and
// unmounts; it returns the digest written.
func startStore(t *testing.T, storeArg string, args ...string) string {
	t.Helper()
	m := mount(t, storeArg, args...)
	if !strings.Contains(m.Log(), "the store is empty: mounted as a new Zarr v3 store") {
		t.Errorf("the log does not say the store is new:\n%s", m.Log())
	}
	out, err := python(newStoreScript, filepath.Join(m.Dir, "v2")).Output()
	if err != nil {
		t.Fatalf("zarr-python: %v\n%s\nzarrfs log:\n%s", err, stderrOf(err), m.Log())
	}
	var want map[string]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	return want["first"]
}

// checkStarted checks, without zarrfs, the store startStore wrote into the
// directory dir: a v3 root group with the attribute, and the array as
// written, which zarrita reads.
func checkStarted(t *testing.T, o *zarrtest.Oracle, dir, digest string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(dir, "zarr.json")); err != nil || !strings.Contains(string(b), `"started through the mount"`) {
		t.Errorf("the store's root zarr.json: %s, %v; want a group with the title", b, err)
	}
	checkSharded(t, dir, "first")
	if z := o.Zarrita(t, dir, "first"); z.Error != "" || z.SHA256 != digest {
		t.Errorf("zarrita reads first from the store: %q, digest %s; written %s", z.Error, z.SHA256, digest)
	}
}

// TestNewStore: an empty directory mounts read-write as a new store (an
// empty root group, saying so in the log), and stays empty until written:
// unmounted without a write, it holds no Zarr key and mounts again. Then
// zarr-python 2 starts a store in it through MNT/v2: the root group and
// the array are in the store as Zarr v3, which zarrita reads. A directory
// holding files but no Zarr node is refused, naming one; an empty store
// mounted read-only is refused, saying how to start one.
func TestNewStore(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	m := mount(t, dir)
	if b, err := os.ReadFile(filepath.Join(m.Dir, "v2", ".zgroup")); err != nil || !strings.Contains(string(b), `"zarr_format": 2`) {
		t.Errorf("the new store's v2/.zgroup: %s, %v", b, err)
	}
	stop(t, m, dir)
	if left := storeKeys(t, dir, ""); len(left) != 0 {
		t.Errorf("a mount of an empty store that wrote nothing left %v in it", left)
	}
	digest := startStore(t, dir)
	checkStarted(t, o, dir, digest)
	checkStore(t, dir)

	junk := t.TempDir()
	if err := os.WriteFile(filepath.Join(junk, "notes.txt"), []byte("not zarr"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ store, flag, message string }{
		{junk, "--rw", `no Zarr group or array found in the store: it is not empty (it holds "notes.txt")`},
		{t.TempDir(), "--ro", "the store is empty: mount it read-write to start a Zarr store in it"},
	} {
		mnt := t.TempDir()
		args := []string{"mount", c.store, mnt}
		if c.flag == "--ro" {
			args = []string{"mount", "--ro", c.store, mnt}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a mount that wrongly works runs until killed
		out, err := exec.CommandContext(ctx, zarrfsBin, args...).CombinedOutput()
		cancel()
		integration.ForceUnmount(mnt)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), c.message) {
			t.Errorf("zarrfs mount %s %s: %v, printed %q; want exit 1 saying %q", c.flag, c.store, err, out, c.message)
		}
	}
}

// TestNewStoreS3: an empty bucket prefix mounts as a new store, which
// zarr-python 2 starts through the mount; the bucket then holds the root
// group and the array, which zarrita reads from a download.
func TestNewStoreS3(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	useS3(t, srv, srv.Endpoint)
	digest := startStore(t, "s3://zarr/fresh", "--s3-path-style", "--journal-dir", t.TempDir())
	got := t.TempDir()
	srv.Download(t, "zarr", "fresh", got)
	checkStarted(t, o, got, digest)
}

// createInV2Script tries to create an array in the root group of a native
// v2 store through MNT/v2 with zarr-python 2, and prints the error.
const createInV2Script = `
import sys, zarr
g = zarr.open_group(sys.argv[1], mode="a")
try:
    g.create_dataset("new", shape=(4,), chunks=(2,), dtype="<i2")
    print("created")
except Exception as e:
    print(type(e).__name__, e)
`

// TestCreateInV2Hierarchy: a group or array created in a group of a Zarr
// v2 hierarchy (zarrfs creates Zarr v3 nodes only) is refused with EPERM,
// and the log names the key and says what the user can do instead; the
// store is unchanged.
func TestCreateInV2Hierarchy(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	dir := smallStore(t)
	before := storeFiles(t, dir)
	m := mount(t, dir)
	out, err := python(createInV2Script, filepath.Join(m.Dir, "v2")).Output()
	if err != nil || strings.HasPrefix(string(out), "created") {
		t.Errorf("zarr-python creating an array in the v2 hierarchy: %v, %s", err, out)
	}
	if err := os.Mkdir(filepath.Join(m.Dir, "v2", "made"), 0o755); !errors.Is(err, syscall.EPERM) {
		t.Errorf("mkdir in the root group of a v2 hierarchy: %v, want EPERM", err)
	}
	for _, key := range []string{"key=new", "key=made"} {
		if !strings.Contains(m.Log(), key) {
			t.Errorf("the log does not name %s:\n%s", key, m.Log())
		}
	}
	if !strings.Contains(m.Log(), "write the new node to the store itself, not through the mount, or into a Zarr v3 store") {
		t.Errorf("the log does not say what to do instead:\n%s", m.Log())
	}
	stop(t, m, dir)
	requireSameFiles(t, before, storeFiles(t, dir))
}
