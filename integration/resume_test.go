package integration_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// resumeSource writes, with zarr-python 2, a native v2 store: a group with
// attributes holding an array compressed by Blosc with AUTOSHUFFLE (-1), a
// scalar array, an array with "/" keys and a subgroup with an array. It
// prints the digest of each array by path.
const resumeSource = `
import json, sys
import numpy as np, numcodecs, zarr
g = zarr.open_group(sys.argv[1], mode="w")
g.attrs["title"] = "resumed"
a = g.create_dataset("auto", shape=(40, 30), chunks=(10, 10), dtype="<i4", compressor=numcodecs.Blosc(cname="lz4", shuffle=-1))
a[...] = np.arange(1200, dtype="<i4").reshape(40, 30)
s = g.create_dataset("scalar", shape=(), dtype="<f8")
s[...] = 4.5
n = g.create_dataset("nested", shape=(6, 4), chunks=(3, 2), dtype="|u1", dimension_separator="/")
n[...] = np.arange(24, dtype="|u1").reshape(6, 4)
x = g.create_group("sub").create_dataset("x", shape=(5,), chunks=(2,), dtype="<u2")
x[...] = [1, 2, 3, 4, 5]
print(json.dumps({p: digest(g[p]) for p in ["auto", "scalar", "nested", "sub/x"]}))
`

// writeResumeSource writes resumeSource's store and returns its path and
// the digest of each array by path.
func writeResumeSource(t *testing.T) (string, map[string]string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src.zarr")
	out, err := python(resumeSource, src).Output()
	if err != nil {
		t.Fatalf("zarr-python: %v\n%s", err, stderrOf(err))
	}
	var want map[string]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	return src, want
}

// resumeRead prints the digest of each array below the group arguments
// through the mount, by path relative to the v2 view given first.
const resumeRead = `
import json, os, sys
import zarr
v2 = sys.argv[1]
out = {}
for top in sys.argv[2:]:
    g = zarr.open_group(os.path.join(v2, top), mode="r")
    g.visititems(lambda name, node: out.__setitem__(top + "/" + name, digest(node)) if isinstance(node, zarr.Array) else None)
print(json.dumps(out))
`

// TestResumeCopy: copies into the mount run again and tidied, as users
// run them. rsync -a a second time over its copy (renaming each metadata
// document onto the identical one, the .zarray of a Blosc AUTOSHUFFLE
// array included) and rsync --inplace (which stats each chunk right after
// writing it, a scalar array's too) exit 0; tar -x, which sets times and
// modes on each file before closing it, exits 0 with chunks that follow
// their .zarray; the .zarray shows "shuffle": -1 as written. mv of a group
// and of an array renames the node in the store (its directory keeps its
// inode) without copying. After a remount rsync finds nothing to refuse,
// and every array reads as the source, through the mount and with zarrita
// from the store.
func TestResumeCopy(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	src, want := writeResumeSource(t)
	archive := tarMetadataFirst(t, src)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	v2 := filepath.Join(m.Dir, "v2")
	run := func(what string, args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s\nzarrfs log:\n%s", what, err, out, m.Log())
		}
	}
	run("rsync -a", "rsync", "-a", src+"/", v2+"/r/")
	run("rsync -a again", "rsync", "-a", src+"/", v2+"/r/")
	run("rsync -a --inplace", "rsync", "-a", "--inplace", src+"/", v2+"/ri/")
	if err := os.Mkdir(filepath.Join(v2, "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	run("tar -x", "tar", "-C", filepath.Join(v2, "t"), "-xf", archive)
	if b, err := os.ReadFile(filepath.Join(v2, "r", "auto", ".zarray")); err != nil || !strings.Contains(string(b), `"shuffle": -1`) {
		t.Errorf("r/auto/.zarray through the mount: %s, %v; written with \"shuffle\": -1", b, err)
	}
	inode := func(p string) uint64 {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	group, array := inode("r"), inode("ri/nested")
	run("mv of a group", "mv", filepath.Join(v2, "r"), filepath.Join(v2, "moved"))
	run("mv of an array into a subgroup, in the v3 view", "mv", filepath.Join(m.Dir, "v3", "ri", "nested"), filepath.Join(m.Dir, "v3", "ri", "sub", "nested"))
	if inode("moved") != group || inode("ri/sub/nested") != array {
		t.Errorf("mv copied the nodes instead of renaming them:\n%s", m.Log())
	}
	for _, gone := range []string{"v2/r", "v3/r", "v2/ri/nested", "v3/ri/nested"} {
		if _, err := os.Stat(filepath.Join(m.Dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s after mv: %v, want gone", gone, err)
		}
	}
	stop(t, m, dir)

	m = mount(t, dir)
	v2 = filepath.Join(m.Dir, "v2")
	run("rsync -a after a remount", "rsync", "-a", src+"/", v2+"/moved/")
	out, err := python(resumeRead, v2, "moved", "ri", "t").Output()
	if err != nil {
		t.Fatalf("reading back: %v\n%s\nzarrfs log:\n%s", err, stderrOf(err), m.Log())
	}
	var mounted map[string]string
	if err := json.Unmarshal(out, &mounted); err != nil {
		t.Fatal(err)
	}
	stop(t, m, dir)
	for _, line := range strings.Split(m.Log(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("zarrfs refused something after the remount: %s", line)
		}
	}
	stored := o.ZarritaAll(t, dir)
	for _, copied := range []string{"moved", "ri", "t"} {
		for p, digest := range want {
			at := copied + "/" + p
			if copied == "ri" && p == "nested" {
				at = "ri/sub/nested"
			}
			if mounted[at] != digest {
				t.Errorf("%s through the mount after a remount: digest %s; the source's %s", at, mounted[at], digest)
			}
			if p == "scalar" {
				continue // the zarrita oracle reads no 0-d array (its get returns a number)
			}
			if z := stored[at]; z.Error != "" || z.SHA256 != digest {
				t.Errorf("zarrita reads %s from the store: %q, digest %s; the source's %s", at, z.Error, z.SHA256, digest)
			}
		}
	}
	checkStore(t, dir)
}

// tarMetadataFirst archives the store at src with each directory's
// metadata documents before its chunks, as tar lists them when the
// documents happen to come first, and returns the archive's path.
func tarMetadataFirst(t *testing.T, src string) string {
	t.Helper()
	var names []string
	filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(src, p)
			names = append(names, rel)
		}
		return nil
	})
	// Per directory, documents (dot files) sort before chunks already;
	// directories before what they hold.
	slices.Sort(names)
	archive := filepath.Join(t.TempDir(), "src.tar")
	args := append([]string{"-C", src, "--no-recursion", "-cf", archive}, names...)
	if out, err := exec.Command("tar", args...).CombinedOutput(); err != nil {
		t.Fatalf("tar -c: %v\n%s", err, out)
	}
	return archive
}

// TestMoveS3: mv of a group within an s3:// mount, where the store has
// no rename (EXDEV), copies it through the mount and deletes the source:
// mv exits 0, and the bucket then holds the group under its new name only,
// every array as the source, as zarrita reads a download.
func TestMoveS3(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	src, want := writeResumeSource(t)
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	root := t.TempDir()
	v3Root(t, root)
	srv.Upload(t, root, "zarr", "moving")
	useS3(t, srv, srv.Endpoint)
	m := mount(t, "s3://zarr/moving", "--s3-path-style", "--journal-dir", t.TempDir())
	v2 := filepath.Join(m.Dir, "v2")
	for _, args := range [][]string{{"cp", "-r", src, v2 + "/r"}, {"mv", v2 + "/r", v2 + "/moved"}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s\nzarrfs log:\n%s", args[0], err, out, m.Log())
		}
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	got := t.TempDir()
	srv.Download(t, "zarr", "moving", got)
	if left := storeKeys(t, got, "r"); len(left) != 0 {
		t.Errorf("left of the source in the bucket: %v", left)
	}
	stored := o.ZarritaAll(t, got)
	for p, digest := range want {
		if p == "scalar" {
			continue // the zarrita oracle reads no 0-d array
		}
		if z := stored["moved/"+p]; z.Error != "" || z.SHA256 != digest {
			t.Errorf("zarrita reads moved/%s from the bucket: %q, digest %s; the source's %s", p, z.Error, z.SHA256, digest)
		}
	}
}
