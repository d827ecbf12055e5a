package integration_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
zarr.consolidate_metadata(os.path.join(mnt, "v2"))  # writes the root's .zmetadata
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

// TestCreateZarrPython: zarr-python 2.13 creates a group and two arrays
// (Zstd; Blosc with order F and a fill value) through MNT/v2, writes
// them and consolidates the metadata. Each .zarray reads back as zarr-python wrote it; after unmount the
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
	checkStore(t, dir)
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
	checkStore(t, dir)
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

// TestCreateV3View: a group zarr.json and an unsharded array zarr.json
// written into directories made in MNT/v3, one chunk of the array written
// before its zarr.json (held by the pending directory) and one after.
// After unmount the array is stored sharded, the chunks hold what was
// written and the rest the fill value, as zarrita reads the store.
func TestCreateV3View(t *testing.T) {
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	grp := filepath.Join(m.Dir, "v3", "grp")
	arr := filepath.Join(grp, "arr")
	const arrayJSON = `{"zarr_format":3,"node_type":"array","shape":[4,4],"data_type":"uint16",
		"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2,1]}},
		"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
		"fill_value":7,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}],"attributes":{"a":1}}`
	steps := []struct {
		what string
		err  error
	}{
		{"mkdir grp", os.Mkdir(grp, 0o755)},
		{"mkdir grp/arr", os.Mkdir(arr, 0o755)},
		{"mkdir grp/arr/c/0", os.MkdirAll(filepath.Join(arr, "c", "0"), 0o755)},
		{"write chunk c/0/1 before the metadata", writeTrunc(filepath.Join(arr, "c", "0", "1"), []byte{1, 0, 2, 0})},
		{"write arr/zarr.json before the group's", writeTrunc(filepath.Join(arr, "zarr.json"), []byte(arrayJSON))},
		{"write grp/zarr.json", writeTrunc(filepath.Join(grp, "zarr.json"), []byte(`{"zarr_format":3,"node_type":"group","attributes":{"g":2}}`))},
		{"mkdir grp/arr/c/1", os.MkdirAll(filepath.Join(arr, "c", "1"), 0o755)},
		{"write chunk c/1/3 after the metadata", writeTrunc(filepath.Join(arr, "c", "1", "3"), []byte{3, 0, 4, 0})},
	}
	for _, s := range steps {
		if s.err != nil {
			t.Fatalf("%s: %v\nzarrfs log:\n%s", s.what, s.err, m.Log())
		}
	}
	if b, err := os.ReadFile(filepath.Join(arr, "c", "0", "1")); err != nil || !slices.Equal(b, []byte{1, 0, 2, 0}) {
		t.Errorf("chunk c/0/1 through the mount: %v, %v", b, err)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	a := checkSharded(t, dir, "grp/arr")
	if !slices.Equal(a.ChunkShape, []int{4, 4}) || string(a.Attributes) != `{"a":1}` {
		t.Errorf("the stored array: shard shape %v, attributes %s; want [4 4] (the whole array fits in one shard), {\"a\":1}", a.ChunkShape, a.Attributes)
	}
	want := make([]byte, 32)
	for i := range 16 {
		want[2*i] = 7
	}
	// Element (r, c) is at 2*(4r+c); chunk (i, j) covers rows 2i, 2i+1 of column j.
	copy(want[2*1:], []byte{1, 0})
	copy(want[2*5:], []byte{2, 0})
	copy(want[2*11:], []byte{3, 0})
	copy(want[2*15:], []byte{4, 0})
	if z := o.Zarrita(t, dir, "grp/arr"); z.Error != "" || z.SHA256 != sha256Hex(want) {
		t.Errorf("zarrita reads grp/arr from the store: %q, digest %s; want %s", z.Error, z.SHA256, sha256Hex(want))
	}
	checkStore(t, dir)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestCreateRefused: metadata that cannot create a node fails the
// writer's close with EINVAL, logs the key and the reason, and leaves the
// store unchanged; mkdir of a name the store keeps for its own files
// (its state directory, lock and temporary files) is EPERM; a directory
// whose metadata never arrives is dropped at unmount, the log says so and
// the mount exits 1.
func TestCreateRefused(t *testing.T) {
	dir := t.TempDir()
	v3Root(t, dir)
	before := storeFiles(t, dir)
	m := mount(t, dir)
	v2 := filepath.Join(m.Dir, "v2")
	for _, d := range []string{"codec", "limits", "garbage", "v3garbage", "orphan"} {
		if err := os.Mkdir(filepath.Join(v2, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(m.Dir, "v3", "v3garbage"), 0o755)
	cases := []struct {
		name, path, doc string
		want            syscall.Errno
	}{
		{"a codec with no v3 equivalent", "v2/codec/.zarray",
			`{"zarr_format":2,"shape":[10],"chunks":[5],"dtype":"<i4","compressor":{"id":"nosuchcodec"},"fill_value":0,"order":"C","filters":null}`, syscall.EINVAL},
		{"a chunk beyond the limits", "v2/limits/.zarray",
			`{"zarr_format":2,"shape":[1000000000000],"chunks":[1000000000000],"dtype":"<f8","compressor":null,"fill_value":0,"order":"C","filters":null}`, syscall.EINVAL},
		{"not v2 metadata", "v2/garbage/.zarray", `{"zarr_format":2,"shape":"big"}`, syscall.EINVAL},
		{"not v3 metadata", "v3/v3garbage/zarr.json", `{"zarr_format":3,"node_type":"array"}`, syscall.EINVAL},
	}
	for _, c := range cases {
		if err := writeTrunc(filepath.Join(m.Dir, c.path), []byte(c.doc)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		key := strings.TrimPrefix(strings.TrimPrefix(c.path, "v2/"), "v3/")
		if !strings.Contains(m.Log(), "key="+key) {
			t.Errorf("%s: the log does not name %s:\n%s", c.name, key, m.Log())
		}
	}
	for _, name := range []string{".zarrfs", "x.__lock", "y.zarrfs-tmp-1"} {
		if err := os.Mkdir(filepath.Join(v2, name), 0o755); !errors.Is(err, syscall.EPERM) {
			t.Errorf("mkdir %s, a name the store keeps for its own files: %v, want EPERM", name, err)
		}
	}
	if err := os.Mkdir(filepath.Join(v2, "orphan", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeTrunc(filepath.Join(v2, "orphan", "sub", "0.0"), []byte("chunk")); err != nil {
		t.Fatal(err)
	}
	// What was written into them is not in the store: the unmount says
	// so and exits 1.
	if err := m.Stop(); err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("unmounting with directories whose metadata never arrived: %v; want exit status 1", err)
	}
	requireSameFiles(t, before, storeFiles(t, dir))
	if !strings.Contains(m.Log(), "directory dropped at unmount") || !strings.Contains(m.Log(), "path=orphan files=1") {
		t.Errorf("the log does not name the directory dropped at unmount:\n%s", m.Log())
	}
	if !strings.Contains(m.Log(), "directories made in the mount, holding") || strings.Contains(m.Log(), "every acknowledged write is in the store") {
		t.Errorf("the unmount's summary does not say what it dropped:\n%s", m.Log())
	}
}

// TestCreateUnsharded: with --new-shards unsharded, an array created
// through the v2 view is stored as written (v3, unsharded).
func TestCreateUnsharded(t *testing.T) {
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir, "--new-shards", "unsharded")
	a := filepath.Join(m.Dir, "v2", "a")
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeRename(filepath.Join(a, ".zarray"), []byte(`{"zarr_format":2,"shape":[6],"chunks":[3],"dtype":"<u1","compressor":null,"fill_value":0,"order":"C","filters":null}`)); err != nil {
		t.Fatalf("%v\n%s", err, m.Log())
	}
	if err := writeRename(filepath.Join(a, "1"), []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	stop(t, m, dir)
	stored := createdArray(t, dir, "a")
	if !slices.Equal(stored.ChunkShape, []int{3}) || meta.ChainString(stored.Codecs) != "bytes" {
		t.Errorf("stored with chunks %v, codecs %s; want [3], bytes (unsharded)", stored.ChunkShape, meta.ChainString(stored.Codecs))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a", "1")); err != nil || !slices.Equal(b, []byte{1, 2, 3}) {
		t.Errorf("chunk 1 in the store: %v, %v", b, err)
	}
	checkStore(t, dir)
}

// xarrayCreateScript writes a small dataset with xarray's to_zarr
// (mode="w", consolidated) into a new path of MNT/v2, reads it back
// through the mount, and prints the digest of its data variable.
const xarrayCreateScript = `
import hashlib, json, sys
import numpy as np, pandas as pd, xarray as xr
path = sys.argv[1]
t = np.arange(24, dtype="<f4").reshape(4, 6) / 4
ds = xr.Dataset({"temperature": (("time", "lat"), t)},
                coords={"time": pd.date_range("2000-01-01", periods=4), "lat": np.linspace(-50.0, 50.0, 6)},
                attrs={"title": "xarray"})
ds.to_zarr(path, mode="w")
back = xr.open_zarr(path)
print(json.dumps({
    "same": bool(back.temperature.equals(ds.temperature)) and bool(back.time.equals(ds.time)) and back.attrs.get("title") == "xarray",
    "sha256": hashlib.sha256(t.tobytes()).hexdigest(),
}))
`

// TestCreateXarray: xarray's to_zarr(mode="w") of a small dataset into a
// new path of MNT/v2 reads back the same through the mount; after unmount
// the store holds sharded v3 arrays with dimension names, which zarrita
// reads as written.
func TestCreateXarray(t *testing.T) {
	zarrtest.RequirePython(t, "zarr", "xarray", "pandas")
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	out, err := exec.Command("/usr/bin/python3", "-c", xarrayCreateScript, filepath.Join(m.Dir, "v2", "ds")).Output()
	if err != nil {
		t.Fatalf("xarray: %v\n%s\nzarrfs log:\n%s", err, stderrOf(err), m.Log())
	}
	var got struct {
		Same   bool
		SHA256 string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !got.Same {
		t.Errorf("the dataset xarray reads back through the mount differs from the one it wrote")
	}
	stop(t, m, dir)
	a := checkSharded(t, dir, "ds/temperature")
	if names := a.DimensionNames; len(names) != 2 || *names[0] != "time" || *names[1] != "lat" {
		t.Errorf("dimension_names of ds/temperature: %v; want time, lat", names)
	}
	if z := o.Zarrita(t, dir, "ds/temperature"); z.Error != "" || z.SHA256 != got.SHA256 {
		t.Errorf("zarrita reads ds/temperature from the store: %q, digest %s; xarray wrote %s", z.Error, z.SHA256, got.SHA256)
	}
	checkStore(t, dir)
}

// TestCreateKilled: zarrfs is killed with SIGKILL right after a writer
// created an array through MNT/v2 (.zarray by rename, as zarr-python 2
// writes it, some chunks written before it into the pending directory and
// some after) and its closes returned. A read-only mount then shows the
// array with every chunk; after `zarrfs recover` zarrita reads the store
// (no zarrfs) as written and zarrfs check passes.
func TestCreateKilled(t *testing.T) {
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	arr := filepath.Join(m.Dir, "v2", "new")
	chunk := func(i int) []byte { return []byte{byte(i), byte(i + 1), byte(i + 2), byte(i + 3)} }
	want := make([]byte, 0, 24)
	for i := range 6 {
		want = append(want, chunk(i)...)
	}
	steps := []func() error{
		func() error { return os.Mkdir(arr, 0o755) },
		func() error { return writeTrunc(filepath.Join(arr, "0"), chunk(0)) },
		func() error { return writeTrunc(filepath.Join(arr, "1"), chunk(1)) },
		func() error {
			return writeRename(filepath.Join(arr, ".zarray"), []byte(`{"zarr_format":2,"shape":[24],"chunks":[4],"dtype":"|u1","compressor":null,"fill_value":0,"order":"C","filters":null}`))
		},
	}
	for i := 2; i < 6; i++ {
		steps = append(steps, func() error { return writeRename(filepath.Join(arr, strconv.Itoa(i)), chunk(i)) })
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v\nzarrfs log:\n%s", i, err, m.Log())
		}
	}
	syscall.Kill(m.Pid(), syscall.SIGKILL)
	m.Kill()
	t.Logf("the kill left writes in the journal: %v", checkAfterCrash(t, dir))
	ro := mount(t, dir, "--ro")
	var got []byte
	for i := range 6 {
		b, err := os.ReadFile(filepath.Join(ro.Dir, "v2", "new", strconv.Itoa(i)))
		if err != nil {
			t.Errorf("chunk %d through a read-only mount after the kill: %v", i, err)
		}
		got = append(got, b...)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the read-only mount after the kill shows %v; want %v", got, want)
	}
	if err := ro.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(zarrfsBin, "recover", dir).CombinedOutput(); err != nil {
		t.Fatalf("zarrfs recover: %v\n%s", err, out)
	}
	checkSharded(t, dir, "new")
	if z := o.Zarrita(t, dir, "new"); z.Error != "" || z.SHA256 != sha256Hex(want) {
		t.Errorf("zarrita reads the new array from the store: %q, digest %s; want %s", z.Error, z.SHA256, sha256Hex(want))
	}
	checkStore(t, dir)
}

// nullFillScript, with "write", creates through MNT/v2 with zarr-python 2
// a group holding an array with fill_value None and "/" keys whose data
// holds zeros, and writes it; then (as without "write") it prints what
// readers see: the .zarray read back, the digest of the values xarray
// reads (it masks elements equal to the fill value), how many are NaN,
// and whether the reserved attribute shows in .zattrs or the v3 view.
const nullFillScript = `
import json, os, sys
import numpy as np, zarr, xarray as xr
mnt, write = sys.argv[1], len(sys.argv) > 2
path = os.path.join(mnt, "v2", "ds")
data = np.arange(24, dtype="<f8").reshape(6, 4) % 3  # a third are zeros
if write:
    g = zarr.open_group(path, mode="w")
    a = g.create_dataset("v", shape=(6, 4), chunks=(3, 2), dtype="<f8", fill_value=None,
                         dimension_separator="/", compressor=None)
    a.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    a[...] = data
seen = xr.open_zarr(path, consolidated=False)["v"].values
shown = open(os.path.join(path, "v", ".zattrs")).read() + open(os.path.join(mnt, "v3", "ds", "v", "zarr.json")).read()
print(json.dumps({
    "zarray": json.load(open(os.path.join(path, "v", ".zarray"))),
    "xarray": digest(seen), "nans": int(np.isnan(seen).sum()), "want": digest(data),
    "leaked": "_zarrfs" in shown,
}))
`

// TestCreateNullFillRemount: an array zarr-python 2 creates through MNT/v2
// with fill_value None (which v3 cannot hold) and "/" keys keeps both
// across a remount: its .zarray reads back null and "/", so xarray, which
// masks elements equal to the fill value, reads the same values (its
// zeros, not NaN) before and after; the reserved attribute that records
// them shows in neither view, and zarrita reads the store directly.
func TestCreateNullFillRemount(t *testing.T) {
	zarrtest.RequirePython(t, "zarr", "xarray")
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	v3Root(t, dir)
	type seen struct {
		Zarray struct {
			FillValue          any    `json:"fill_value"`
			DimensionSeparator string `json:"dimension_separator"`
		}
		Xarray, Want string
		Nans         int
		Leaked       bool
	}
	read := func(args ...string) seen {
		t.Helper()
		m := mount(t, dir)
		out, err := python(nullFillScript, append([]string{m.Dir}, args...)...).Output()
		if err != nil {
			t.Fatalf("zarr-python: %v\n%s\nzarrfs log:\n%s", err, stderrOf(err), m.Log())
		}
		stop(t, m, dir)
		var s seen
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return s
	}
	before := read("write")
	after := read()
	for when, s := range map[string]seen{"before the remount": before, "after the remount": after} {
		if s.Zarray.FillValue != nil || s.Zarray.DimensionSeparator != "/" {
			t.Errorf("%s the .zarray reads back fill_value %v, dimension_separator %q; written null, \"/\"", when, s.Zarray.FillValue, s.Zarray.DimensionSeparator)
		}
		if s.Nans != 0 || s.Xarray != s.Want {
			t.Errorf("%s xarray reads %d NaN (digest %s); written no NaN (digest %s)", when, s.Nans, s.Xarray, s.Want)
		}
		if s.Leaked {
			t.Errorf("%s the attribute recording the v2 fields shows in the views' attributes", when)
		}
	}
	checkSharded(t, dir, "ds/v")
	if z := o.Zarrita(t, dir, "ds/v"); z.Error != "" || z.SHA256 != before.Want {
		t.Errorf("zarrita reads ds/v from the store: %q, digest %s; written %s", z.Error, z.SHA256, before.Want)
	}
	checkStore(t, dir)
}

// TestCreateKilledChunksFirst: a native v2 store (a group holding an array
// with "/" keys) is copied into MNT/v2 in the order cp -r and rsync may
// take, every chunk before the metadata, the group's .zgroup last: the
// array's .zarray waits in its pending directory for its parent, and the
// .zgroup creates both and makes the held files their chunks. zarrfs is
// killed with SIGKILL once that close returned; a read-only mount then
// shows every chunk as the source holds it, and after `zarrfs recover`
// zarrita reads the store (no zarrfs) as the source.
func TestCreateKilledChunksFirst(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	native := filepath.Join(t.TempDir(), "native.zarr")
	out, err := exec.Command("/usr/bin/python3", "-c", nativeScript, native).Output()
	if err != nil {
		t.Fatalf("zarr-python: %v\n%s", err, stderrOf(err))
	}
	var want struct{ SHA256 string }
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	var dirs, chunks, docs []string
	filepath.WalkDir(native, func(p string, e os.DirEntry, err error) error {
		rel, _ := filepath.Rel(native, p)
		switch {
		case err != nil || rel == ".":
		case e.IsDir():
			dirs = append(dirs, rel)
		case strings.HasPrefix(e.Name(), ".z"):
			docs = append(docs, rel)
		default:
			chunks = append(chunks, rel)
		}
		return nil
	})
	// Deepest documents first, so the top group's come last.
	slices.SortStableFunc(docs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	if len(chunks) == 0 || docs[len(docs)-1] != ".zgroup" {
		t.Fatalf("the native store: chunks %v, documents %v", chunks, docs)
	}
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	copied := filepath.Join(m.Dir, "v2", "copied")
	if err := os.Mkdir(copied, 0o755); err != nil {
		t.Fatalf("mkdir: %v\n%s", err, m.Log())
	}
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(copied, d), 0o755); err != nil {
			t.Fatalf("mkdir %s: %v\n%s", d, err, m.Log())
		}
	}
	for _, f := range append(chunks, docs...) {
		b, err := os.ReadFile(filepath.Join(native, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := writeTrunc(filepath.Join(copied, f), b); err != nil {
			t.Fatalf("writing %s: %v\nzarrfs log:\n%s", f, err, m.Log())
		}
	}
	syscall.Kill(m.Pid(), syscall.SIGKILL)
	m.Kill()
	t.Logf("the kill left writes in the journal: %v", checkAfterCrash(t, dir))
	ro := mount(t, dir, "--ro")
	for _, f := range chunks {
		src, _ := os.ReadFile(filepath.Join(native, f))
		got, err := os.ReadFile(filepath.Join(ro.Dir, "v2", "copied", f))
		if err != nil || !slices.Equal(got, src) {
			t.Errorf("chunk %s through a read-only mount after the kill: %d bytes, %v; the source holds %d bytes", f, len(got), err, len(src))
		}
	}
	if err := ro.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(zarrfsBin, "recover", dir).CombinedOutput(); err != nil {
		t.Fatalf("zarrfs recover: %v\n%s", err, out)
	}
	checkSharded(t, dir, "copied/temp")
	if z := o.Zarrita(t, dir, "copied/temp"); z.Error != "" || z.SHA256 != want.SHA256 {
		t.Errorf("zarrita reads copied/temp from the store: %q, digest %s; the source's %s", z.Error, z.SHA256, want.SHA256)
	}
	checkStore(t, dir)
}
