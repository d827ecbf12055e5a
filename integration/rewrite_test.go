package integration_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// rewriteScript, with "write", writes through MNT/v2 what a user running a
// notebook twice writes: zarr-python 2 creates the array arr and writes it,
// the user removes it (shutil.rmtree) and creates it again with another
// fill value, writing a quarter of it, then zarr.open(mode="w") replaces it
// once more (zarr-python removes the directory itself); xarray's
// to_zarr(mode="w") writes the dataset ds twice, the second time with
// other values. It prints the digests of what was last written and of
// what the mount reads back (without "write": only the latter).
const rewriteScript = `
import json, os, shutil, sys
import numpy as np, xarray as xr, zarr
v2, write = sys.argv[1], len(sys.argv) > 2
arr, ds = os.path.join(v2, "arr"), os.path.join(v2, "ds")
want = {}
if write:
    a = zarr.open(arr, mode="w", shape=(20, 6), chunks=(5, 3), dtype="<i4")
    a[...] = np.arange(120, dtype="<i4").reshape(20, 6)
    shutil.rmtree(arr)
    b = zarr.open(arr, mode="w", shape=(20, 6), chunks=(5, 3), dtype="<i4", fill_value=3)
    b[:5] = 1  # the old chunks of the other rows must not show through
    c = zarr.open(arr, mode="w", shape=(20, 6), chunks=(5, 3), dtype="<i4", fill_value=3)
    c[5:10] = 2
    want["arr"] = digest(c)
    for values in (np.zeros((4, 6), "<f4"), np.arange(24, dtype="<f4").reshape(4, 6) / 4):
        xr.Dataset({"temperature": (("time", "lat"), values)}).to_zarr(ds, mode="w")
    want["ds/temperature"] = digest(values)
mount = {"arr": digest(zarr.open(arr, mode="r")), "ds/temperature": digest(xr.open_zarr(ds).temperature.values)}
print(json.dumps({"want": want, "mount": mount}))
`

// TestWriteAgain: a path deleted and written again in the same mount
// (zarr-python's mode="w" after shutil.rmtree, mode="w" over an array,
// xarray's to_zarr(mode="w") run twice) gets the new node: every call
// succeeds, the mount reads what was last written (no chunk of the
// deleted array shows), and so do a remount and zarrita reading the store.
func TestWriteAgain(t *testing.T) {
	zarrtest.RequirePython(t, "zarr", "xarray")
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	w := runWriter(t, m, python(rewriteScript, filepath.Join(m.Dir, "v2"), "write"))
	stop(t, m, dir)
	m = mount(t, dir)
	out, err := python(rewriteScript, filepath.Join(m.Dir, "v2")).Output()
	var after written
	if err != nil || json.Unmarshal(out, &after) != nil {
		t.Fatalf("reading back after a remount: %v\n%s%s\nzarrfs log:\n%s", err, out, stderrOf(err), m.Log())
	}
	stop(t, m, dir)
	for path, want := range w.Want {
		if w.Mount[path] != want || after.Mount[path] != want {
			t.Errorf("%s reads back %s through the mount, %s after a remount; written %s", path, w.Mount[path], after.Mount[path], want)
		}
		if z := o.Zarrita(t, dir, path); z.Error != "" || z.SHA256 != want {
			t.Errorf("zarrita reads %s from the store: %q, digest %s; written %s", path, z.Error, z.SHA256, want)
		}
	}
	checkStore(t, dir)
}

// TestCreateOverDeleted: an array created where the delete of another was
// cut short (its tombstone and shards left in the store, as after a
// crash) shows none of the old array's chunks: the old delete is finished
// first, and nothing of the new array is deleted for it, also by a later
// zarrfs compact. In the mount, a .zarray written into the directory of an
// array whose .zarray was just unlinked (rm, then a new one) creates the
// new array instead of a temporary file dropped at unmount.
func TestCreateOverDeleted(t *testing.T) {
	o := zarrtest.NewOracle(t)
	dir := deleteStore(t)
	deleteCutShort(t, dir, "victim")
	if left := storeKeys(t, dir, "victim"); len(left) < 3 {
		t.Fatalf("the delete cut short left %v; want the tombstone and shards", left)
	}
	// The new victim is the old one with another fill value: the old
	// shards lie at its chunk keys.
	var doc map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "victim", "zarr.json.deleted"))
	if err != nil || json.Unmarshal(b, &doc) != nil {
		t.Fatalf("the tombstone: %v", err)
	}
	doc["fill_value"] = 9
	victim, _ := json.Marshal(doc)
	m := mount(t, dir)
	if err := os.Mkdir(filepath.Join(m.Dir, "v3", "victim"), 0o755); err != nil {
		t.Fatalf("mkdir victim: %v\n%s", err, m.Log())
	}
	if err := writeTrunc(filepath.Join(m.Dir, "v3", "victim", "zarr.json"), victim); err != nil {
		t.Fatalf("creating victim again: %v\n%s", err, m.Log())
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "v3", "victim", "c", "0", "0")); !os.IsNotExist(err) {
		t.Errorf("victim/c/0/0 of the new array, never written: %v; want no file (the old array's chunks are gone)", err)
	}
	zarray := []byte(`{"zarr_format":2,"shape":[8],"chunks":[4],"dtype":"|u1","compressor":null,"fill_value":9,"order":"C","filters":null}`)
	again := filepath.Join(m.Dir, "v2", "again")
	if err := os.Mkdir(again, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeRename(filepath.Join(again, ".zarray"), zarray); err != nil {
		t.Fatalf("creating again: %v\n%s", err, m.Log())
	}
	// Unlinked and written again: the new .zarray creates a new array.
	if err := writeRename(filepath.Join(again, "0"), []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(again, ".zarray")); err != nil {
		t.Fatal(err)
	}
	if err := writeRename(filepath.Join(again, ".zarray"), []byte(strings.Replace(string(zarray), `"fill_value":9`, `"fill_value":7`, 1))); err != nil {
		t.Fatalf("writing .zarray again: %v\n%s", err, m.Log())
	}
	if err := writeRename(filepath.Join(again, "1"), []byte{5, 6, 7, 8}); err != nil {
		t.Fatalf("a chunk of the array created again: %v\n%s", err, m.Log())
	}
	for i, want := range [][]byte{nil, {5, 6, 7, 8}} {
		b, err := os.ReadFile(filepath.Join(again, []string{"0", "1"}[i]))
		if string(b) != string(want) || (want == nil) != os.IsNotExist(err) {
			t.Errorf("again/%d through the mount: %v, %v; want %v", i, b, err, want)
		}
	}
	stop(t, m, dir)
	if _, err := os.Stat(filepath.Join(dir, "victim", "zarr.json.deleted")); !os.IsNotExist(err) {
		t.Errorf("the old delete's tombstone is left: %v", err)
	}
	if out, err := exec.Command(zarrfsBin, "compact", dir).CombinedOutput(); err != nil {
		t.Fatalf("zarrfs compact: %v\n%s", err, out)
	}
	fill := make([]byte, 2*20*24) // victim: uint16 9 everywhere
	for i := 0; i < len(fill); i += 2 {
		fill[i] = 9
	}
	for path, want := range map[string][]byte{"victim": fill, "again": {7, 7, 7, 7, 5, 6, 7, 8}} {
		if z := o.Zarrita(t, dir, path); z.Error != "" || z.SHA256 != sha256Hex(want) {
			t.Errorf("zarrita reads %s from the store: %q, digest %s; want %s", path, z.Error, z.SHA256, sha256Hex(want))
		}
	}
	checkStore(t, dir)
}
