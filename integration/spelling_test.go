package integration_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// The tests here write through MNT/v2 with real tools whose metadata is
// spelled otherwise than zarr-python 2 spells it (issue 40): GDAL's Blosc
// shuffle names and LZMA delta streams, numcodecs' LZMA filter chains and
// Python numbers, fill values as GDAL and zarr-python write them,
// consolidated metadata below the root. Each array must read back as
// written after a remount, and the store must hold it for readers without
// zarrfs.

// gdalSourcesScript writes, in the directory it is given, src.tif (a
// float32 raster) and src.nc (a netCDF file whose float32 variable t has
// the _FillValue -1e20 and whose float64 variable d has 0.0, with a value
// equal to each), and prints their digests.
const gdalSourcesScript = `
import json, os, sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
out = sys.argv[1]
r = (np.arange(48 * 64, dtype="<f4").reshape(48, 64) % 251) / 4
ds = gdal.GetDriverByName("GTiff").Create(os.path.join(out, "src.tif"), 64, 48, 1, gdal.GDT_Float32)
ds.GetRasterBand(1).WriteArray(r)
ds = None
nc = gdal.GetDriverByName("netCDF").CreateMultiDimensional(os.path.join(out, "src.nc"))
root = nc.GetRootGroup()
y, x = root.CreateDimension("y", None, None, 3), root.CreateDimension("x", None, None, 4)
t = np.arange(12, dtype="<f4").reshape(3, 4); t[0, 0] = -1e20
d = np.arange(12, dtype="<f8").reshape(3, 4)
for name, data, gtype, fill in [("t", t, gdal.GDT_Float32, -1e20), ("d", d, gdal.GDT_Float64, 0.0)]:
    a = root.CreateMDArray(name, [y, x], gdal.ExtendedDataType.Create(gtype))
    a.SetNoDataValueDouble(fill)
    a.Write(data)
nc = None
print(json.dumps({"raster": digest(r), "t": digest(t), "d": digest(d)}))
`

// gdalReadScript reads, with GDAL, the rasters and the netCDF copy it is
// given (paths under a v2 view) and prints their digests, the nodata value
// GDAL reads for t and d, and the values zarr-python 2 reads (or the
// error of each read).
const gdalReadScript = `
import json, os, sys
import numpy as np, zarr
from osgeo import gdal
gdal.UseExceptions()
v2, rasters = sys.argv[1], sys.argv[2:]
out = {}
def read(key, f):
    try:
        out[key] = f()
    except Exception as e:
        out[key] = "error: %s" % e
for r in rasters:
    read(r, lambda: digest(gdal.Open(os.path.join(v2, r)).ReadAsArray()))
    read(r + " zarr", lambda: digest(zarr.open(os.path.join(v2, r), mode="r")[r[:-5]]))
for name in ["t", "d"]:
    mdarray = lambda: gdal.OpenEx(os.path.join(v2, "nc.zarr"), gdal.OF_MULTIDIM_RASTER).GetRootGroup().OpenMDArray(name)
    read("nc/" + name, lambda: digest(mdarray().ReadAsArray()))
    read("nc/" + name + " nodata", lambda: mdarray().GetNoDataValueAsDouble())
    read("nc/" + name + " zarr", lambda: digest(zarr.open(os.path.join(v2, "nc.zarr", name), mode="r")))
    read("nc/" + name + " zarr fill", lambda: float(zarr.open(os.path.join(v2, "nc.zarr", name), mode="r").fill_value))
print(json.dumps(out))
`

// TestGDALSpellings: gdal_translate -of Zarr with Blosc bit and no shuffle
// (which GDAL writes as "shuffle": "BIT" and "NONE") and with LZMA (xz
// streams of a delta filter before LZMA2, under {"id": "lzma", "delta":
// 1}), and gdalmdimtranslate of a netCDF file with the fill values -1e20
// and 0.0, into MNT/v2. Each exits 0 with nothing refused; after a
// remount GDAL reads every array as the source and reads the fill values
// as nodata, zarr-python 2 reads the same, the stored zarr.json holds the
// fill values as JSON floats, and zarrita (or, for numcodecs.lzma, which
// it lacks, zarrfs's reader on the store without FUSE) reads the store as
// the source.
func TestGDALSpellings(t *testing.T) {
	zarrtest.RequirePython(t, "zarr", "osgeo.gdal", "numpy")
	for _, tool := range []string{"gdal_translate", "gdalmdimtranslate"} {
		if _, err := exec.LookPath(tool); err != nil {
			zarrtest.Missing(t, "%s (apt-get install gdal-bin) is not available: %v", tool, err)
		}
	}
	o := zarrtest.NewOracle(t)
	src := t.TempDir()
	out, err := python(gdalSourcesScript, src).Output()
	if err != nil {
		t.Fatalf("writing the sources: %v\n%s", err, stderrOf(err))
	}
	var want map[string]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	v2 := filepath.Join(m.Dir, "v2")
	rasters := map[string][]string{
		"bloscbit.zarr":  {"-co", "COMPRESS=BLOSC", "-co", "BLOSC_SHUFFLE=BIT"},
		"bloscnone.zarr": {"-co", "COMPRESS=BLOSC", "-co", "BLOSC_SHUFFLE=NONE", "-co", "BLOSC_CNAME=zstd"},
		"lzma.zarr":      {"-co", "COMPRESS=LZMA"},
		"lzmadelta.zarr": {"-co", "COMPRESS=LZMA", "-co", "LZMA_DELTA=4", "-co", "LZMA_PRESET=1"},
	}
	var names []string
	for name, opts := range rasters {
		names = append(names, name)
		cmd := exec.Command("gdal_translate", append(append([]string{"-q", "-of", "Zarr"}, opts...), filepath.Join(src, "src.tif"), filepath.Join(v2, name))...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gdal_translate %s: %v\n%s\nzarrfs log:\n%s", name, err, out, m.Log())
		}
	}
	if out, err := exec.Command("gdalmdimtranslate", "-q", "-of", "Zarr", filepath.Join(src, "src.nc"), filepath.Join(v2, "nc.zarr")).CombinedOutput(); err != nil {
		t.Fatalf("gdalmdimtranslate: %v\n%s\nzarrfs log:\n%s", err, out, m.Log())
	}
	stop(t, m, dir)
	if log := m.Log(); strings.Contains(log, "refused") || strings.Contains(log, "dropped") {
		t.Errorf("zarrfs refused or dropped what GDAL wrote:\n%s", log)
	}

	ro := mount(t, dir, "--ro")
	out, err = python(gdalReadScript, append([]string{filepath.Join(ro.Dir, "v2")}, names...)...).Output()
	if err != nil {
		t.Fatalf("reading back: %v\n%s\nzarrfs log:\n%s", err, stderrOf(err), ro.Log())
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, name := range names {
		if got[name] != want["raster"] {
			t.Errorf("GDAL reads %s after a remount with digest %v; the source's is %s", name, got[name], want["raster"])
		}
		if z := got[name+" zarr"]; !strings.HasPrefix(name, "lzma") && z != want["raster"] {
			// zarr-python 2 cannot read GDAL's LZMA arrays from GDAL's own
			// copies either: numcodecs refuses the "delta" key.
			t.Errorf("zarr-python 2 reads %s after a remount: %v; the source's digest is %s", name, z, want["raster"])
		}
	}
	for name, fill := range map[string]float64{"t": float64(float32(-1e20)), "d": 0} {
		if got["nc/"+name] != want[name] || got["nc/"+name+" zarr"] != want[name] {
			t.Errorf("nc/%s after a remount: GDAL reads digest %v, zarr-python %v; the source's is %s", name, got["nc/"+name], got["nc/"+name+" zarr"], want[name])
		}
		if got["nc/"+name+" nodata"] != fill || got["nc/"+name+" zarr fill"] != fill {
			t.Errorf("nc/%s after a remount: GDAL reads nodata %v, zarr-python fill %v; the source's is %g", name, got["nc/"+name+" nodata"], got["nc/"+name+" zarr fill"], fill)
		}
		text := fillText(t, filepath.Join(ro.Dir, "v2", "nc.zarr", name, ".zarray"))
		if !regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?$`).MatchString(text) || !strings.ContainsAny(text, ".e") {
			t.Errorf("nc/%s/.zarray through the mount: fill_value %s; want a JSON float", name, text)
		}
	}
	if err := ro.Stop(); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"t": "-1e+20", "d": "0.0"} {
		if got := fillText(t, filepath.Join(dir, "nc.zarr", name, "zarr.json")); got != text {
			t.Errorf("the store's nc.zarr/%s/zarr.json: fill_value %s, want %s", name, got, text)
		}
	}
	results := o.ZarritaAll(t, dir)
	own := openView(t, dir)
	for _, name := range append(names, "nc.zarr/t", "nc.zarr/d") {
		p, digest := name, want["raster"]
		if !strings.HasPrefix(name, "nc.zarr") {
			p = name + "/" + strings.TrimSuffix(name, ".zarr")
		} else {
			digest = want[strings.TrimPrefix(name, "nc.zarr/")]
		}
		checkSharded(t, dir, p)
		if strings.HasPrefix(name, "lzma") {
			if d := ownDigest(t, own, p); d != digest {
				t.Errorf("zarrfs's reader reads %s from the store with digest %s; the source's is %s", p, d, digest)
			}
			continue
		}
		if z := results[p]; z.Error != "" || z.SHA256 != digest {
			t.Errorf("zarrita reads %s from the store: %q, digest %s; the source's is %s", p, z.Error, z.SHA256, digest)
		}
	}
	checkStore(t, dir)
}

// fillText returns the fill_value member of a metadata document as written.
func fillText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(doc["fill_value"])
}

// numcodecsScript, with "write", creates through MNT/v2 with zarr-python
// 2 arrays whose compressors numcodecs configures in ways zarr-python's
// defaults never do: LZMA with a delta filter before LZMA2 in an xz
// stream (numcodecs' documented example), raw LZMA data of a delta and an
// x86 filter before LZMA1 and of a BCJ filter before LZMA2, and Blosc with
// Python's True and 3.0 for its shuffle and level; it prints the digest of
// each. Without "write" it prints the digests zarr-python 2 reads back,
// and, for the xz array, which numcodecs 0.11 cannot decode (it passes its
// filters to Python's lzma for an xz stream, which refuses them), the
// digest of the chunk files decoded with Python's lzma module.
const numcodecsScript = `
import json, lzma, os, sys
import numpy as np, numcodecs, zarr
v2, write = sys.argv[1], len(sys.argv) > 2
F = lzma
compressors = {
    "xz_delta": numcodecs.LZMA(filters=[dict(id=F.FILTER_DELTA, dist=4), dict(id=F.FILTER_LZMA2, preset=1)]),
    "raw_delta_x86_lzma1": numcodecs.LZMA(format=F.FORMAT_RAW, filters=[dict(id=F.FILTER_DELTA, dist=2), dict(id=F.FILTER_X86), dict(id=F.FILTER_LZMA1, preset=1, lc=0, lp=2, pb=0)]),
    "raw_sparc_lzma2": numcodecs.LZMA(format=F.FORMAT_RAW, filters=[dict(id=F.FILTER_SPARC, start_offset=64), dict(id=F.FILTER_LZMA2, dict_size=1 << 16)]),
    "blosc_python_numbers": numcodecs.Blosc(cname="zstd", clevel=3.0, shuffle=True),
}
data = (np.arange(40 * 30, dtype="<i4").reshape(40, 30) * 7919) % 100003
out = {}
if write:
    group = zarr.open_group(os.path.join(v2, "nc"), mode="w")
for name, compressor in compressors.items():
    path = os.path.join(v2, "nc", name)
    if write:
        a = group.create_dataset(name, shape=data.shape, chunks=(16, 10), dtype="<i4", compressor=compressor)
        a[...] = data
        out[name] = digest(data)
    elif name == "xz_delta":
        got = np.zeros(data.shape, dtype="<i4")
        for r in range(3):
            for c in range(3):
                chunk = lzma.decompress(open(os.path.join(path, "%d.%d" % (r, c)), "rb").read())
                chunk = np.frombuffer(chunk, dtype="<i4").reshape(16, 10)
                got[r * 16:(r + 1) * 16, c * 10:(c + 1) * 10] = chunk[:min(16, 40 - r * 16), :10]
        out[name] = digest(got)
    else:
        out[name] = digest(zarr.open(path, mode="r"))
print(json.dumps(out))
`

// TestNumcodecsSpellings: zarr-python 2 creates arrays through MNT/v2 with
// LZMA filter chains (xz and raw, delta and BCJ filters, LZMA1 and LZMA2)
// and with Blosc configured by Python numbers (True, 3.0). After a
// remount each reads back as written; the store holds them for readers
// without zarrfs. A chain no reader can decode (an ARM64 filter, which
// Python's lzma cannot write either) is refused at create: close fails
// with EINVAL and the store gets nothing, where before any chunk of it
// could have been refused.
func TestNumcodecsSpellings(t *testing.T) {
	zarrtest.RequirePython(t, "zarr", "numcodecs")
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	v2 := filepath.Join(m.Dir, "v2")
	out, err := python(numcodecsScript, v2, "write").Output()
	if err != nil {
		t.Fatalf("zarr-python: %v\n%s\nzarrfs log:\n%s", err, stderrOf(err), m.Log())
	}
	var want map[string]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := os.Mkdir(filepath.Join(v2, "arm64"), 0o755); err != nil {
		t.Fatal(err)
	}
	arm64 := `{"zarr_format":2,"shape":[8],"chunks":[4],"dtype":"<i4","compressor":{"id":"lzma","format":1,"check":-1,"preset":null,"filters":[{"id":10},{"id":33}]},"fill_value":0,"order":"C","filters":null}`
	if err := writeRename(filepath.Join(v2, "arm64", ".zarray"), []byte(arm64)); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a .zarray whose LZMA chain holds an ARM64 filter: %v, want EINVAL", err)
	}
	stop(t, m, dir)
	if _, err := os.Stat(filepath.Join(dir, "arm64", "zarr.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store holds an array whose codecs cannot be decoded: %v", err)
	}

	m = mount(t, dir)
	out, err = python(numcodecsScript, filepath.Join(m.Dir, "v2")).Output()
	if err != nil {
		t.Fatalf("reading back: %v\n%s\nzarrfs log:\n%s", err, stderrOf(err), m.Log())
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	stop(t, m, dir)
	results := o.ZarritaAll(t, dir)
	own := openView(t, dir)
	for name, digest := range want {
		if got[name] != digest {
			t.Errorf("%s after a remount: read with digest %s, written %s", name, got[name], digest)
		}
		p := "nc/" + name
		a := checkSharded(t, dir, p)
		if strings.HasPrefix(name, "blosc") {
			if z := results[p]; z.Error != "" || z.SHA256 != digest {
				t.Errorf("zarrita reads %s from the store: %q, digest %s; written %s", p, z.Error, z.SHA256, digest)
			}
			continue
		}
		// zarrita has no numcodecs.lzma.
		if d := ownDigest(t, own, p); d != digest {
			t.Errorf("zarrfs's reader reads %s from the store (codecs %s) with digest %s; written %s", p, meta.ChainString(a.Codecs), d, digest)
		}
	}
	checkStore(t, dir)
}

// subgroupScript, with "write", creates through MNT/v2 a dataset with
// xarray's to_zarr(consolidated=True) in ds (a group below the root) and,
// with zarr-python 2, a group g holding a group sub with an array, and
// consolidates g with zarr.consolidate_metadata; without it, it opens
// both through their consolidated metadata, as readers that require it
// do, and prints what they read.
const subgroupScript = `
import json, os, sys
import numpy as np, xarray as xr, zarr
v2, write = sys.argv[1], len(sys.argv) > 2
data = np.arange(24, dtype="<f8").reshape(4, 6) / 8
if write:
    xr.Dataset({"v": (("y", "x"), data)}, attrs={"title": "ds"}).to_zarr(os.path.join(v2, "ds"), mode="w", consolidated=True)
    g = zarr.open_group(os.path.join(v2, "g"), mode="w")
    g.create_group("sub").create_dataset("arr", data=data, chunks=(2, 3))
    zarr.consolidate_metadata(os.path.join(v2, "g"))
ds = xr.open_zarr(os.path.join(v2, "ds"), consolidated=True)
g = zarr.open_consolidated(os.path.join(v2, "g"), mode="r")
print(json.dumps({
    "ds": digest(ds["v"].values), "title": ds.attrs.get("title"),
    "g": digest(g["sub/arr"]), "want": digest(data),
    "keys": sorted(json.load(open(os.path.join(v2, "g", ".zmetadata")))["metadata"]),
}))
`

// TestConsolidatedBelowRoot: consolidated metadata written below the root
// of MNT/v2, by xarray's to_zarr(consolidated=True) into a group path and
// by zarr.consolidate_metadata of a subgroup, is there after a remount,
// so that xarray's open_zarr(consolidated=True) and zarr.open_consolidated,
// which require it, read the data; it holds the documents below its group,
// keyed from there.
func TestConsolidatedBelowRoot(t *testing.T) {
	zarrtest.RequirePython(t, "zarr", "xarray")
	dir := t.TempDir()
	v3Root(t, dir)
	type read struct {
		DS, Title, G, Want string
		Keys               []string
	}
	run := func(args ...string) read {
		t.Helper()
		m := mount(t, dir)
		out, err := python(subgroupScript, append([]string{filepath.Join(m.Dir, "v2")}, args...)...).Output()
		if err != nil {
			t.Fatalf("%v\n%s\nzarrfs log:\n%s", err, stderrOf(err), m.Log())
		}
		stop(t, m, dir)
		var r read
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return r
	}
	for when, r := range map[string]read{"written": run("write"), "after a remount": run()} {
		if r.DS != r.Want || r.Title != "ds" || r.G != r.Want {
			t.Errorf("%s: read through consolidated metadata: ds %s (title %q), g/sub/arr %s; written %s", when, r.DS, r.Title, r.G, r.Want)
		}
		want := []string{".zattrs", ".zgroup", "sub/.zattrs", "sub/.zgroup", "sub/arr/.zarray"}
		for _, k := range want {
			if !strings.Contains(strings.Join(r.Keys, " "), k) {
				t.Errorf("%s: g/.zmetadata holds %v; want %v", when, r.Keys, want)
				break
			}
		}
	}
	checkStore(t, dir)
}

// objectFillScript, with "write", creates through MNT/v2 with zarr-python
// 2 an array of strings of dtype object (fill_value 0, as zarr-python
// writes it) and |S10 and <U5 arrays, and writes part of each; without
// it, it prints what zarr-python reads: every element (the unwritten ones
// hold the fill value), and the fill_value of the .zarray.
const objectFillScript = `
import json, os, sys
import numcodecs, numpy as np, zarr
v2, write = sys.argv[1], len(sys.argv) > 2
arrays = {"obj": dict(dtype=object, object_codec=numcodecs.VLenUTF8()), "s10": dict(dtype="S10"), "u5": dict(dtype="U5")}
values = {"obj": ["zarr", "fs"], "s10": [b"zarr", b"fs"], "u5": ["zarr", "fs"]}
out = {}
if write:
    group = zarr.open_group(os.path.join(v2, "strings"), mode="w")
for name, kw in arrays.items():
    path = os.path.join(v2, "strings", name)
    if write:
        a = group.create_dataset(name, shape=(6,), chunks=(2,), **kw)
        a[:2] = values[name]
    a = zarr.open(path, mode="r")
    out[name] = {"values": [v.decode() if isinstance(v, bytes) else v for v in a[...].tolist()],
                 "fill": json.load(open(os.path.join(path, ".zarray")))["fill_value"]}
print(json.dumps(out))
`

// TestObjectFillZero: an object array of strings that zarr-python 2
// creates through MNT/v2 with fill_value 0 (its default) reads its
// unwritten elements back as 0, and its .zarray says 0, also after a
// remount, as from a copy on disk; |S10 and <U5 arrays read back as
// written, and the store holds them with the data types zarr-python 3
// writes for them (null_terminated_bytes, fixed_length_utf32).
func TestObjectFillZero(t *testing.T) {
	zarrtest.RequirePython(t, "zarr", "numcodecs")
	dir := t.TempDir()
	v3Root(t, dir)
	local := t.TempDir()
	type read map[string]struct {
		Values []any
		Fill   any
	}
	run := func(v2 string, args ...string) read {
		t.Helper()
		out, err := exec.Command("/usr/bin/python3", append([]string{"-c", objectFillScript, v2}, args...)...).Output()
		if err != nil {
			t.Fatalf("%v\n%s", err, stderrOf(err))
		}
		var r read
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return r
	}
	onDisk := run(local, "write")
	m := mount(t, dir)
	written := run(filepath.Join(m.Dir, "v2"), "write")
	stop(t, m, dir)
	m = mount(t, dir, "--ro")
	remounted := run(filepath.Join(m.Dir, "v2"))
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(onDisk)
	for when, r := range map[string]read{"written": written, "after a remount": remounted} {
		if got, _ := json.Marshal(r); string(got) != string(want) {
			t.Errorf("%s, zarr-python reads through the mount\n%s\nand from a copy on disk\n%s", when, got, want)
		}
	}
	for name, dataType := range map[string]string{
		"s10": `{"name":"null_terminated_bytes","configuration":{"length_bytes":10}}`,
		"u5":  `{"name":"fixed_length_utf32","configuration":{"length_bytes":20}}`,
	} {
		b, err := os.ReadFile(filepath.Join(dir, "strings", name, "zarr.json"))
		var doc map[string]json.RawMessage
		if err == nil {
			err = json.Unmarshal(b, &doc)
		}
		var got, w any
		json.Unmarshal(doc["data_type"], &got)
		json.Unmarshal([]byte(dataType), &w)
		if g, _ := json.Marshal(got); err != nil || string(g) != string(mustMarshal(w)) {
			t.Errorf("the store's strings/%s/zarr.json: data_type %s (%v), want zarr-python 3's %s", name, doc["data_type"], err, dataType)
		}
	}
	checkStore(t, dir)
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
