package integration_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// The tests here run, unchanged, the sequences real writers use to create
// data through a read-write mount of a local store (issue 29), and check
// the store after unmount without zarrfs: each array written is a sharded
// v3 array that zarrita reads exactly as written, and zarrfs check passes.

// digestPy defines digest(a): the sha256 of a zarr array's (or numpy
// array's) little-endian C-order bytes, as the zarrita oracle hashes them.
const digestPy = `
import hashlib, numpy as np
def digest(a):
    d = np.asarray(a[...])
    return hashlib.sha256(np.ascontiguousarray(d, dtype=d.dtype.newbyteorder("<")).tobytes()).hexdigest()
`

// written is what a writer script prints: the digest of each array it
// wrote by store path, and of each as read back through the mount.
type written struct {
	Want, Mount map[string]string
}

// runWriter runs a command writing through m and decodes the written
// JSON line it prints.
func runWriter(t *testing.T, m *integration.Mount, cmd *exec.Cmd) written {
	t.Helper()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s\nzarrfs log:\n%s", cmd.Args[0], err, stderrOf(err), m.Log())
	}
	var w written
	if err := json.Unmarshal(out, &w); err != nil || len(w.Want) == 0 {
		t.Fatalf("%s printed %q: %v", cmd.Args[0], out, err)
	}
	return w
}

// python runs a script with Debian's python3 and its arguments.
func python(script string, args ...string) *exec.Cmd {
	return exec.Command("/usr/bin/python3", append([]string{"-c", digestPy + script}, args...)...)
}

// checkWritten unmounts m and checks the store at dir: zarrfs refused
// nothing the writer did (no warning logged), each array of w read back
// through the mount as written, is stored sharded, and zarrita reads it
// from the store as written; zarrfs check passes.
func checkWritten(t *testing.T, o *zarrtest.Oracle, m *integration.Mount, dir string, w written) {
	t.Helper()
	stop(t, m, dir)
	for _, line := range strings.Split(m.Log(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("zarrfs logged while the writer ran: %s", line)
		}
	}
	results := o.ZarritaAll(t, dir)
	for path, want := range w.Want {
		if got, ok := w.Mount[path]; ok && got != want {
			t.Errorf("%s read back through the mount: digest %s; written %s", path, got, want)
		}
		checkSharded(t, dir, path)
		if z := results[path]; z.Error != "" || z.SHA256 != want {
			t.Errorf("zarrita reads %s from the store: %q, digest %s; written %s", path, z.Error, z.SHA256, want)
		}
	}
	checkStore(t, dir)
}

// growScript creates, with zarr-python 2 through MNT/v2, a group and a new
// Blosc-compressed array, writes it, grows it, appends along both axes and
// shrinks it, doing the same to a copy on local disk.
const growScript = `
import json, os, sys
import numcodecs, zarr
mnt, local = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(29)
first = rng.integers(0, 1000, size=(20, 30)).astype("<i4")
rows = rng.integers(0, 1000, size=(7, 30)).astype("<i4")
cols = rng.integers(0, 1000, size=(47, 5)).astype("<i4")
made = []
for root in (os.path.join(mnt, "v2"), local):
    g = zarr.open_group(os.path.join(root, "grp"), mode="w")
    z = g.create_dataset("grown", shape=(20, 30), chunks=(6, 7), dtype="<i4", fill_value=-1,
                         compressor=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
    z[...] = first
    z.resize(40, 30)          # grow: metadata only
    z[25:40, :] = 5
    z.append(rows, axis=0)    # 47 rows
    z.append(cols, axis=1)    # 35 columns
    z.resize(15, 23)          # shrink: chunks outside go
    z[12:15, 20:23] = 9       # into a partial edge chunk
    made.append(z)
back = zarr.open(os.path.join(mnt, "v2", "grp", "grown"), mode="r")
assert back.shape == (15, 23), back.shape
print(json.dumps({"want": {"grp/grown": digest(made[1])}, "mount": {"grp/grown": digest(back)}}))
`

// TestWriterGrowNew: zarr-python 2 creates a new array with a numcodecs
// compressor through MNT/v2, writes it, resizes, appends to and shrinks
// it, as one flow; the store then holds what a local copy holds.
func TestWriterGrowNew(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	w := runWriter(t, m, python(growScript, m.Dir, t.TempDir()))
	checkWritten(t, o, m, dir, w)
}

// copyScript writes a native v2 store (a group with attributes, a
// subgroup, Zstd and Blosc arrays, order F, a fill value) and copies it
// into MNT/v2 twice: with zarr.copy_store and with zarr.copy_all.
const copyScript = `
import json, os, sys
import numcodecs, zarr
mnt, src = sys.argv[1], sys.argv[2]
g = zarr.open_group(src, mode="w")
g.attrs["source"] = "native"
a = g.create_dataset("a", shape=(30, 20), chunks=(7, 6), dtype="<u2", compressor=numcodecs.Zstd(level=1))
a[...] = np.arange(600, dtype="<u2").reshape(30, 20)
b = g.create_group("sub").create_dataset("b", shape=(50, 3), chunks=(8, 2), dtype="<f8", order="F", fill_value=0.5,
                                         compressor=numcodecs.Blosc(cname="zstd"))
b[3:40] = np.linspace(-1, 1, 37 * 3).reshape(37, 3)
zarr.copy_store(zarr.DirectoryStore(src), zarr.DirectoryStore(os.path.join(mnt, "v2", "bystore")))
zarr.copy_all(zarr.open_group(src, mode="r"), zarr.open_group(os.path.join(mnt, "v2", "byall"), mode="w"))
out = {"want": {}, "mount": {}}
for dst in ("bystore", "byall"):
    assert zarr.open_group(os.path.join(mnt, "v2", dst), mode="r").attrs["source"] == "native", dst
    for name, arr in (("a", a), ("sub/b", b)):
        out["want"][dst + "/" + name] = digest(arr)
        out["mount"][dst + "/" + name] = digest(zarr.open(os.path.join(mnt, "v2", dst, name), mode="r"))
print(json.dumps(out))
`

// TestWriterCopyStore: zarr.copy_store and zarr.copy_all of a native v2
// store into MNT/v2/NAME.
func TestWriterCopyStore(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	w := runWriter(t, m, python(copyScript, m.Dir, filepath.Join(t.TempDir(), "src.zarr")))
	checkWritten(t, o, m, dir, w)
}

// regionScript creates a dataset with xarray's to_zarr(mode="w") through
// MNT/v2, then fills its data variable in three to_zarr(region=...)
// writes, as parallel pipelines do.
const regionScript = `
import json, sys
import xarray as xr
path = sys.argv[1]
full = np.arange(6 * 4, dtype="<f4").reshape(6, 4) / 8
ds = xr.Dataset({"temperature": (("time", "lat"), np.zeros_like(full))},
                coords={"time": np.arange(6), "lat": np.linspace(-30.0, 30.0, 4)})
ds["temperature"].encoding["chunks"] = (2, 4)
ds.to_zarr(path, mode="w")
for lo, hi in ((0, 2), (2, 5), (5, 6)):
    xr.Dataset({"temperature": (("time", "lat"), full[lo:hi])}).to_zarr(path, region={"time": slice(lo, hi)})
back = xr.open_zarr(path).temperature.values
print(json.dumps({"want": {"ds/temperature": digest(full)}, "mount": {"ds/temperature": digest(back)}}))
`

// TestWriterXarrayRegion: xarray's to_zarr(region=...) into an array
// created through the mount.
func TestWriterXarrayRegion(t *testing.T) {
	zarrtest.RequirePython(t, "zarr", "xarray")
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	w := runWriter(t, m, python(regionScript, filepath.Join(m.Dir, "v2", "ds")))
	checkWritten(t, o, m, dir, w)
}

// TestWriterRsync: rsync -a of a native v2 store ("/" keys, order F,
// zstd) into MNT/v2/NAME: rsync writes each file as a hidden temporary
// and renames it, then sets modes and times.
func TestWriterRsync(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	if _, err := exec.LookPath("rsync"); err != nil {
		zarrtest.Missing(t, "rsync is not installed")
	}
	o := zarrtest.NewOracle(t)
	native := filepath.Join(t.TempDir(), "native.zarr")
	out, err := exec.Command("/usr/bin/python3", "-c", nativeScript, native).Output()
	if err != nil {
		t.Fatalf("zarr-python: %v\n%s", err, stderrOf(err))
	}
	var src struct{ SHA256 string }
	if err := json.Unmarshal(out, &src); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	if out, err := exec.Command("rsync", "-a", native+"/", filepath.Join(m.Dir, "v2", "synced")+"/").CombinedOutput(); err != nil {
		t.Fatalf("rsync -a: %v\n%s\nzarrfs log:\n%s", err, out, m.Log())
	}
	checkWritten(t, o, m, dir, written{Want: map[string]string{"synced/temp": src.SHA256}})
}

// gdalSourceScript writes a two-band Int16 GeoTIFF (no georeferencing) and
// prints the digest of each band under the name of the array GDAL's Zarr
// driver makes of it in MNT/v2/raster.
const gdalSourceScript = `
import json, sys
from osgeo import gdal
gdal.UseExceptions()
data = (np.arange(2 * 45 * 70, dtype="<i2").reshape(2, 45, 70) * 3 - 900)
ds = gdal.GetDriverByName("GTiff").Create(sys.argv[1], 70, 45, 2, gdal.GDT_Int16)
for i in range(2):
    ds.GetRasterBand(i + 1).WriteArray(data[i])
ds = None
print(json.dumps({"want": {"raster/Band%d" % (i + 1): digest(data[i]) for i in range(2)}}))
`

// TestWriterGDAL: gdal_translate -of ZARR of a GeoTIFF into MNT/v2/NAME
// (a group with one zstd array per band, fill_value null, .zmetadata).
func TestWriterGDAL(t *testing.T) {
	zarrtest.RequirePython(t, "osgeo")
	if _, err := exec.LookPath("gdal_translate"); err != nil {
		zarrtest.Missing(t, "gdal_translate is not installed")
	}
	o := zarrtest.NewOracle(t)
	tif := filepath.Join(t.TempDir(), "src.tif")
	out, err := exec.Command("/usr/bin/python3", "-c", digestPy+gdalSourceScript, tif).Output()
	if err != nil {
		t.Fatalf("gdal: %v\n%s", err, stderrOf(err))
	}
	var src written
	if err := json.Unmarshal(out, &src); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	cmd := exec.Command("gdal_translate", "-q", "-of", "ZARR", "-co", "BLOCKSIZE=16,16", "-co", "COMPRESS=ZSTD",
		tif, filepath.Join(m.Dir, "v2", "raster"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gdal_translate: %v\n%s\nzarrfs log:\n%s", err, out, m.Log())
	}
	checkWritten(t, o, m, dir, src)
}

// TestWriterZarrita: zarrita (zarr.create, then zarr.set in two parts)
// writes a group and an unsharded array through MNT/v3.
func TestWriterZarrita(t *testing.T) {
	o := zarrtest.NewOracle(t)
	modules := o.ZarritaModules(t)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	cmd := exec.Command("node", filepath.Join("testdata", "zarrita_create.mjs"), modules, filepath.Join(m.Dir, "v3"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zarrita: %v\n%s\nzarrfs log:\n%s", err, stderrOf(err), m.Log())
	}
	var got struct {
		SHA256 string
		Same   bool
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !got.Same {
		t.Errorf("zarrita reads back through the mount other data than it wrote")
	}
	checkWritten(t, o, m, dir, written{Want: map[string]string{"zgrp/arr": got.SHA256}})
	if b, err := os.ReadFile(filepath.Join(dir, "zgrp", "zarr.json")); err != nil || !strings.Contains(string(b), `"zarrita"`) {
		t.Errorf("the store's zgrp/zarr.json: %s, %v; want a group with zarrita's attributes", b, err)
	}
}
