package integration_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// resizeLayout is the sharded array the resize tests change: shards of
// 2x3 inner chunks.
var resizeLayout = writeLayout{"resizable", dtype.TypeUint16, []int{20, 24}, []int{10, 12}, []int{5, 4},
	[]meta.Codec{zarrtest.BytesLE, zarrtest.Zstd}}

// resizeStore returns a new v3 store with a root group and the resizable
// array, written by zarrfs's own writer.
func resizeStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := zarrtest.OpenStore(t, dir)
	if err := zarr.CreateGroup(context.Background(), s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	addLayouts(t, dir, []writeLayout{resizeLayout})
	return dir
}

// TestZarrPythonResize: zarr-python 2.13 grows, appends to (along both
// axes) and shrinks a sharded array through the v2 view, doing the same to
// a plain v2 copy; edits of dtype, chunks and fill_value are refused with
// EPERM and a log line naming the field. After unmounting, zarrita reads
// exactly the copy's content from the store, the shards wholly outside the
// shrunk shape are gone (and the inner chunks outside it from the shards
// that stay), and `zarrfs check` passes.
func TestZarrPythonResize(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	dir := resizeStore(t)
	m := mount(t, dir)
	copies := zarrPythonResize(t, m)
	stop(t, m, dir)
	checkStore(t, dir)
	checkResized(t, o, dir, copies)
}

// zarrPythonResize runs testdata/zarr_resize.py on the resizable array
// through m's v2 view and returns the directory of its plain v2 copy.
func zarrPythonResize(t *testing.T, m *integration.Mount) string {
	t.Helper()
	copies := filepath.Join(t.TempDir(), "copy")
	cfg, _ := json.Marshal(map[string]any{"view": filepath.Join(m.Dir, "v2"), "copy": copies, "array": resizeLayout.path})
	cmd := exec.Command("/usr/bin/python3", filepath.Join("testdata", "zarr_resize.py"))
	cmd.Stdin = bytes.NewReader(cfg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("zarr-python: %v\n%s\nzarrfs log:\n%s", err, out, m.Log())
	}
	var r struct {
		Shape, Reread []int
		Refused       map[string]string
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("zarr-python printed %q: %v", out, err)
	}
	if want := []int{12, 17}; !slices.Equal(r.Shape, want) || !slices.Equal(r.Reread, want) {
		t.Errorf("shape after the resizes %v, reopened %v; want %v", r.Shape, r.Reread, want)
	}
	for _, field := range []string{"dtype", "chunks", "fill_value"} {
		if r.Refused[field] != "PermissionError" {
			t.Errorf("a .zarray changing %s: %s, want PermissionError", field, r.Refused[field])
		}
		if !strings.Contains(m.Log(), field+" differs from the array's") {
			t.Errorf("no log line names the refused field %s:\n%s", field, m.Log())
		}
	}
	return copies
}

// checkResized checks the resizable array in the store at dir after
// zarrPythonResize: zarrita reads what zarr-python made of its copy, and
// only the shards and inner chunks within the shrunk shape are stored.
func checkResized(t *testing.T, o *zarrtest.Oracle, dir, copies string) {
	t.Helper()
	got := o.Zarrita(t, dir, resizeLayout.path)
	want := o.ZarrPython(t, copies, "")
	if want.Error != "" || got.Error != "" {
		t.Fatalf("zarrita reads the store: %+v; zarr-python reads the copy: %+v", got, want)
	}
	if !slices.Equal(got.Shape, []int{12, 17}) || got.SHA256 != want.SHA256 {
		t.Errorf("the store holds shape %v digest %s; zarr-python wrote shape %v digest %s", got.Shape, got.SHA256, want.Shape, want.SHA256)
	}
	a := storeArray(t, dir, resizeLayout.path)
	var shards []string
	for _, k := range storeKeys(t, dir, resizeLayout.path) {
		if rel := strings.TrimPrefix(k, resizeLayout.path+"/"); strings.HasPrefix(rel, "c/") {
			shards = append(shards, rel)
		}
	}
	// Shards of rows 0-19 and columns 0-23 overlap the new shape; those of
	// rows 20-39 and columns 24-28, written by the appends, do not.
	if want := []string{"c/0/0", "c/0/1", "c/1/0", "c/1/1"}; !slices.Equal(shards, want) {
		t.Errorf("shards left in the store: %v, want %v", shards, want)
	}
	for _, c := range [][]int{{3, 0}, {0, 5}, {3, 5}} { // rows 15-19, columns 20-23
		if _, ok := storedInner(t, dir, a, c); ok {
			t.Errorf("inner chunk %v, wholly outside the shape, is still stored", c)
		}
	}
	if _, ok := storedInner(t, dir, a, []int{2, 4}); !ok {
		t.Errorf("inner chunk [2 4], partly inside the shape and written, is not stored")
	}
}

// TestV3ViewResize: rewriting an array's zarr.json in the v3 view with
// another shape resizes the array in the store (shrinking drops the
// shards and inner chunks outside), with new attributes stored too; a
// zarr.json changing the data type is refused with EPERM and a log line
// naming data_type. zarrita then reads the store: the shrunk array holds
// exactly the original's region.
func TestV3ViewResize(t *testing.T) {
	o := zarrtest.NewOracle(t)
	dir := resizeStore(t)
	kept, err := storeArray(t, dir, resizeLayout.path).ReadRegion(context.Background(), []int{0, 0}, []int{20, 8})
	if err != nil {
		t.Fatal(err)
	}
	m := mount(t, dir)
	doc := filepath.Join(m.Dir, "v3", resizeLayout.path, zarr.ZarrJSON)
	edit := func(change func(map[string]any)) error {
		t.Helper()
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		change(d)
		b, _ = json.Marshal(d)
		return os.WriteFile(doc, b, 0o644)
	}
	requireErrno(t, "a zarr.json changing data_type", edit(func(d map[string]any) { d["data_type"] = "int32" }), syscall.EPERM)
	if !strings.Contains(m.Log(), "data_type differs from the array's") {
		t.Errorf("no log line names data_type:\n%s", m.Log())
	}
	if err := edit(func(d map[string]any) { d["shape"] = []int{20, 8} }); err != nil {
		t.Fatalf("shrinking through zarr.json: %v\n%s", err, m.Log())
	}
	if err := edit(func(d map[string]any) { d["shape"] = []int{20, 8}; d["attributes"] = map[string]any{"resized": true} }); err != nil {
		t.Fatalf("setting attributes: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(m.Dir, "v2", resizeLayout.path, zarr.ZArray))
	if err != nil || !strings.Contains(string(bytes.Join(bytes.Fields(b), nil)), `"shape":[20,8]`) {
		t.Errorf("the v2 view's .zarray after the resize: %s (%v)", b, err)
	}
	stop(t, m, dir)
	checkStore(t, dir)
	got := o.Zarrita(t, dir, resizeLayout.path)
	if got.Error != "" || !slices.Equal(got.Shape, []int{20, 8}) || got.SHA256 != zarrtest.Digest(kept) {
		t.Errorf("zarrita reads %+v; want shape [20 8], digest %s", got, zarrtest.Digest(kept))
	}
	for _, gone := range []string{"c/0/1", "c/1/1"} {
		if _, err := os.Stat(filepath.Join(dir, resizeLayout.path, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("shard %s, wholly outside the shape, is still in the store (%v)", gone, err)
		}
	}
	if a := storeArray(t, dir, resizeLayout.path); !strings.Contains(string(a.V3.Attributes), `"resized":true`) {
		t.Errorf("stored attributes %s", a.V3.Attributes)
	}
}

// TestXarrayAppend: xarray appends a dataset along time to a sharded v3
// dataset (written by zarrfs's own writer, dimension_names set) through
// the v2 view with to_zarr(mode="a", append_dim="time"), which resizes
// every variable along time and writes the new region. After
// unmounting, zarrita reads the grown arrays from the store.
func TestXarrayAppend(t *testing.T) {
	zarrtest.RequirePython(t, "xarray", "zarr")
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	name := func(s string) *string { return &s }
	for _, v := range []struct {
		path         string
		typ          dtype.DataType
		shape, inner []int
		dims         []*string
	}{
		{"time", dtype.TypeInt64, []int{4}, []int{2}, []*string{name("time")}},
		{"temp", dtype.TypeFloat32, []int{4, 3}, []int{2, 3}, []*string{name("time"), name("x")}},
	} {
		m := &meta.ArrayV3{Shape: v.shape, DataType: v.typ, ChunkShape: v.shape, FillValue: make([]byte, v.typ.Size),
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, DimensionNames: v.dims,
			Codecs: []meta.Codec{zarrtest.Sharding(v.inner, []meta.Codec{zarrtest.BytesLE, zarrtest.Zstd}, []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}, "end")}}
		a, err := zarr.CreateArrayV3(ctx, s, v.path, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Write(ctx, zarrtest.Pattern(a, 1)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	m := mount(t, dir)
	script := `import json, sys
import numpy as np
import xarray as xr
import zarr
root = sys.argv[1]
new = xr.Dataset({"temp": (("time", "x"), np.arange(9, dtype="f4").reshape(3, 3) + 100)}, coords={"time": np.array([40, 50, 60], dtype="i8")})
new.to_zarr(root, mode="a", append_dim="time", consolidated=False)
out = xr.open_zarr(root, consolidated=False).load()
# zarrtest.Pattern leaves some chunks empty: the fill value 0, which xarray masks.
print(json.dumps({"time": zarr.open(root + "/time", mode="r")[:].tolist(), "temp": out.temp.values[4:].tolist(), "shape": list(out.temp.shape)}))`
	out, err := exec.Command("/usr/bin/python3", "-c", script, filepath.Join(m.Dir, "v2")).CombinedOutput()
	if err != nil {
		t.Fatalf("xarray append: %v\n%s\nzarrfs log:\n%s", err, out, m.Log())
	}
	var r struct {
		Time  []int
		Temp  [][]float32
		Shape []int
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("xarray printed %q: %v", out, err)
	}
	if len(r.Time) != 7 || r.Time[4] != 40 || r.Time[6] != 60 || !slices.Equal(r.Shape, []int{7, 3}) || len(r.Temp) != 3 || r.Temp[2][2] != 108 {
		t.Errorf("xarray reads back %+v after the append", r)
	}
	stop(t, m, dir)
	checkStore(t, dir)
	for path, shape := range map[string][]int{"time": {7}, "temp": {7, 3}} {
		if got := o.Zarrita(t, dir, path); got.Error != "" || !slices.Equal(got.Shape, shape) {
			t.Errorf("zarrita reads %s from the store: %+v, want shape %v", path, got, shape)
		}
	}
	a := storeArray(t, dir, "temp")
	got, err := a.ReadRegion(ctx, []int{4, 0}, []int{3, 3})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 0, 36)
	for i := range 9 {
		want = binary.LittleEndian.AppendUint32(want, math.Float32bits(float32(100+i)))
	}
	if !bytes.Equal(got.Data, want) {
		t.Errorf("the store holds the appended rows % x, want % x", got.Data, want)
	}
}

// TestUnlinkAfterShrink: a shrink deletes the chunks outside the new
// shape while the kernel may still hold their names (zarr-python 2 stats
// each old chunk, then removes it). Removing such a name succeeds, since
// the file is gone either way, instead of failing with ENOENT as it did
// under load in TestZarrPythonResize.
func TestUnlinkAfterShrink(t *testing.T) {
	dir := resizeStore(t)
	m := mount(t, dir, "--revalidate", "1m") // the kernel keeps names for a minute
	arr := filepath.Join(m.Dir, "v2", resizeLayout.path)
	victim := filepath.Join(arr, "3.0") // rows 15-19: outside a shape of 10 rows
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("before the shrink: %v", err)
	}
	var doc map[string]any
	b, err := os.ReadFile(filepath.Join(arr, ".zarray"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["shape"] = []int{10, 24}
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(filepath.Join(arr, ".zarray.partial"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(arr, ".zarray.partial"), filepath.Join(arr, ".zarray")); err != nil {
		t.Fatalf("shrink: %v\n%s", err, m.Log())
	}
	if err := os.Remove(victim); err != nil {
		t.Errorf("removing a chunk the shrink deleted: %v", err)
	}
	if _, err := os.Stat(victim); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after the shrink and the remove: %v, want no such file", err)
	}
}
