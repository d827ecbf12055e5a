package integration_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// createScript creates, through MNT/v2 of a read-write mount, what a
// zarr-python 2 user creates: a group with attributes, an array compressed
// with Zstd and one with Blosc (order F, a fill value), and writes them.
// It prints the digest (little-endian C order) of each array, and whether
// the .zarray each array reads back through the mount is the one
// zarr-python writes for the same array on local disk.
const createScript = `
import hashlib, json, os, sys, tempfile
import numpy as np, numcodecs, zarr

mnt = sys.argv[1]
out = {}
def create(root):
    g = zarr.open_group(os.path.join(root, "grp"), mode="w")
    g.attrs["title"] = "made by zarr-python 2"
    a = g.create_dataset("zstd", shape=(50, 40), chunks=(10, 8), dtype="<i4", compressor=numcodecs.Zstd(level=3))
    b = g.create_dataset("blosc", shape=(33, 7), chunks=(8, 4), dtype="<f8", order="F", fill_value=-2.5,
                         compressor=numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE))
    return a, b
a, b = create(os.path.join(mnt, "v2"))
a[:] = np.arange(2000, dtype="<i4").reshape(50, 40)
b[3:30, :5] = np.linspace(0, 1, 27 * 5).reshape(27, 5)
with tempfile.TemporaryDirectory() as local:
    create(local)
    for name, arr in [("grp/zstd", a), ("grp/blosc", b)]:
        back = zarr.open(os.path.join(mnt, "v2", name), mode="r")
        data = back[...]
        written = json.load(open(os.path.join(local, name, ".zarray")))
        shown = json.load(open(os.path.join(mnt, "v2", name, ".zarray")))
        out[name] = {
            "sha256": hashlib.sha256(np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<")).tobytes()).hexdigest(),
            "same": bool(np.array_equal(data, arr[...])),
            "zarray": "same" if all(shown.get(k) == v for k, v in written.items()) else "written %s, shown %s" % (written, shown),
        }
out["title"] = zarr.open_group(os.path.join(mnt, "v2", "grp"), mode="r").attrs.get("title")
print(json.dumps(out))
`

// v3Root makes dir a store holding only an empty root group.
func v3Root(t *testing.T, dir string) {
	t.Helper()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	if err := zarr.CreateGroup(context.Background(), s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
}

// createdArray returns the zarr.json of the array stored at
// path under dir, read without zarrfs.
func createdArray(t *testing.T, dir, path string) *meta.ArrayV3 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, path, "zarr.json"))
	if err != nil {
		t.Fatalf("the store has no zarr.json for %s: %v", path, err)
	}
	doc, err := meta.ParseV3(b)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := doc.(*meta.ArrayV3)
	if !ok {
		t.Fatalf("%s/zarr.json is not an array's", path)
	}
	return a
}

func checkSharded(t *testing.T, dir, path string) *meta.ArrayV3 {
	t.Helper()
	a := createdArray(t, dir, path)
	if len(a.Codecs) != 1 || a.Codecs[0].Name != "sharding_indexed" {
		t.Errorf("%s is stored with codecs %s; want sharding_indexed", path, meta.ChainString(a.Codecs))
	}
	return a
}

// zarrfsCheck runs zarrfs check on the store, which must pass.
func zarrfsCheck(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command(zarrfsBin, "check", dir).CombinedOutput(); err != nil {
		t.Errorf("zarrfs check: %v\n%s", err, out)
	}
}

// TestCreateZarrPython: zarr-python 2.13 creates a group and two arrays
// (Zstd; Blosc with order F and a fill value) through MNT/v2 and writes
// them. Each .zarray reads back as zarr-python wrote it; after unmount the
// store holds them as sharded v3 arrays, which zarrita reads (no zarrfs)
// as written, and zarrfs check passes.
func TestCreateZarrPython(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	out, err := exec.Command("/usr/bin/python3", "-c", createScript, m.Dir).Output()
	if err != nil {
		t.Fatalf("zarr-python: %v\n%s\nzarrfs log:\n%s", err, stderrOf(err), m.Log())
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if string(got["title"]) != `"made by zarr-python 2"` {
		t.Errorf("group attributes read back: title %s", got["title"])
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "grp", "zarr.json")); err != nil || !strings.Contains(string(b), `"made by zarr-python 2"`) {
		t.Errorf("the store's grp/zarr.json: %s, %v; want a group with the title", b, err)
	}
	results := o.ZarritaAll(t, dir)
	for _, name := range []string{"grp/zstd", "grp/blosc"} {
		var r struct {
			SHA256 string
			Same   bool
			Zarray string
		}
		if err := json.Unmarshal(got[name], &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !r.Same || r.Zarray != "same" {
			t.Errorf("%s through the mount: data read back as written %v; .zarray: %s", name, r.Same, r.Zarray)
		}
		checkSharded(t, dir, name)
		if z := results[name]; z.Error != "" || z.SHA256 != r.SHA256 {
			t.Errorf("zarrita reads %s from the store: %q, digest %s; zarr-python wrote %s", name, z.Error, z.SHA256, r.SHA256)
		}
	}
	zarrfsCheck(t, dir)
}

// nativeScript writes a native Zarr v2 store nobody has seen: a group and
// an array with "/" keys, order F, zstd, a fill value and xarray's
// dimension names, in many small chunks; it prints the array's digest.
const nativeScript = `
import hashlib, json, sys
import numpy as np, numcodecs, zarr
store = zarr.DirectoryStore(sys.argv[1], dimension_separator="/")
g = zarr.group(store=store, overwrite=True)
g.attrs["source"] = "native"
a = g.create_dataset("temp", shape=(40, 30, 20), chunks=(4, 5, 4), dtype="<f8", order="F",
                     compressor=numcodecs.Zstd(level=1), fill_value=-1.5)
data = np.arange(24000, dtype="<f8").reshape(40, 30, 20)
data[:8] = -1.5  # chunks of fill values only are not stored
a[...] = data
a.attrs["_ARRAY_DIMENSIONS"] = ["t", "y", "x"]
a.attrs["units"] = "K"
print(json.dumps({"sha256": hashlib.sha256(data.tobytes()).hexdigest(), "chunks": a.nchunks_initialized}))
`

// TestCreateCopyNativeV2: cp -r of a native v2 store nobody has seen ("/"
// keys, order F, zstd) into MNT/v2/NAME, which writes files in whatever
// order the source lists them, chunks before .zarray included. The copy's
// metadata reads back as the source's; after unmount the store holds a
// sharded v3 array with dimension names, in far fewer files than the
// source had chunks, which zarrita reads (no zarrfs) as written; zarrfs
// check passes.
func TestCreateCopyNativeV2(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	native := filepath.Join(t.TempDir(), "native.zarr")
	out, err := exec.Command("/usr/bin/python3", "-c", nativeScript, native).Output()
	if err != nil {
		t.Fatalf("zarr-python: %v\n%s", err, stderrOf(err))
	}
	var want struct {
		SHA256 string
		Chunks int
	}
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	copied := filepath.Join(m.Dir, "v2", "copied")
	if out, err := exec.Command("cp", "-r", native, copied).CombinedOutput(); err != nil {
		t.Fatalf("cp -r: %v\n%s\nzarrfs log:\n%s", err, out, m.Log())
	}
	for _, name := range []string{".zgroup", ".zattrs", "temp/.zarray", "temp/.zattrs"} {
		var src, shown any
		b, _ := os.ReadFile(filepath.Join(native, name))
		json.Unmarshal(b, &src)
		c, err := os.ReadFile(filepath.Join(copied, name))
		if err != nil || json.Unmarshal(c, &shown) != nil || !jsonHas(shown, src) {
			t.Errorf("%s through the mount: %s (%v); the copied store's: %s", name, c, err, b)
		}
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	a := checkSharded(t, dir, "copied/temp")
	if names := a.DimensionNames; len(names) != 3 || *names[0] != "t" || *names[1] != "y" || *names[2] != "x" {
		t.Errorf("dimension_names of the stored array: %v; want t, y, x", a.DimensionNames)
	}
	files := 0
	filepath.WalkDir(filepath.Join(dir, "copied"), func(_ string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			files++
		}
		return nil
	})
	if files*10 > want.Chunks {
		t.Errorf("the store holds %d files for the copy of %d chunks; want far fewer (shards)", files, want.Chunks)
	}
	if z := o.ZarritaAll(t, dir)["copied/temp"]; z.Error != "" || z.SHA256 != want.SHA256 {
		t.Errorf("zarrita reads copied/temp from the store: %q, digest %s; the source's %s", z.Error, z.SHA256, want.SHA256)
	}
	zarrfsCheck(t, dir)
	t.Logf("%d chunks copied into %d files", want.Chunks, files)
}

// jsonHas reports whether the JSON object shown has every member of
// written, with the same value.
func jsonHas(shown, written any) bool {
	s, ok1 := shown.(map[string]any)
	w, ok2 := written.(map[string]any)
	if !ok1 || !ok2 {
		return false
	}
	for k, v := range w {
		x, _ := json.Marshal(v)
		y, _ := json.Marshal(s[k])
		if string(x) != string(y) {
			return false
		}
	}
	return true
}
