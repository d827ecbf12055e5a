package integration_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// gdalLayouts add numcodecs filters, whose configurations GDAL reads
// literally, to the arrays GDAL is given.
var gdalLayouts = []writeLayout{
	{"int32_delta_zlib", dtype.TypeInt32, []int{12, 10}, []int{6, 10}, []int{3, 5},
		[]meta.Codec{zarrtest.C("numcodecs.delta", `{"dtype":"int32"}`), zarrtest.BytesLE, zarrtest.C("numcodecs.zlib", `{"level":1}`)}},
	{"float64_scaleoffset", dtype.TypeFloat64, []int{16}, []int{8}, []int{4},
		[]meta.Codec{zarrtest.C("numcodecs.fixedscaleoffset", `{"dtype":"float64","scale":1,"offset":0,"astype":"int32"}`), zarrtest.BytesLE, zarrtest.Gzip}},
}

// TestGDAL: GDAL 3.6 (Debian's python3-gdal) reads every array of the v2
// view that it reads from a copy zarr-python 2 writes of the same data,
// with the same values, and those the array's digest unless GDAL converts
// the type or shape (float16 to float32, a 0-d array to 1-d). An array
// GDAL cannot read from zarr-python's own copy either (a type or codec
// GDAL lacks) is reported, not failed.
func TestGDAL(t *testing.T) {
	zarrtest.RequirePython(t, "zarr", "osgeo.gdal")
	t.Run("generated", func(t *testing.T) {
		dir, arrays := writeStore(t)
		arrays = append(arrays, addLayouts(t, dir, gdalLayouts)...)
		want := map[string]string{}
		for _, a := range arrays {
			want[a.Path] = a.Digest
		}
		checkGDAL(t, mount(t, dir, "--ro").Dir, want)
	})
	t.Run("fixtures", func(t *testing.T) {
		fixtures := zarrtest.Fixtures(t)
		checkGDAL(t, mount(t, fixtures, "--ro").Dir, fixtureDigests(t, fixtures))
	})
}

// checkGDAL has GDAL read every array of want (digests by path) that the
// v2 view of the mount at mnt shows.
func checkGDAL(t *testing.T, mnt string, want map[string]string) {
	t.Helper()
	paths := filterListed(t, filepath.Join(mnt, "v2"), slices.Sorted(maps.Keys(want)))
	script, _ := filepath.Abs(filepath.Join("testdata", "gdal_read.py"))
	cmd := exec.Command("/usr/bin/python3", append([]string{script, filepath.Join(mnt, "v2"), t.TempDir()}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gdal_read.py: %v\n%s", err, stderr.String())
	}
	read, unsupported := 0, []string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r struct{ Path, Copy, Mount, Converted string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		switch {
		case strings.HasPrefix(r.Copy, "error"):
			unsupported = append(unsupported, r.Path+" ("+r.Copy+")")
		case r.Mount != r.Copy:
			t.Errorf("%s: GDAL reads %s through the mount and %s from zarr-python's copy", r.Path, r.Mount, r.Copy)
		case r.Converted == "" && r.Copy != want[r.Path]:
			t.Errorf("%s: GDAL reads digest %s; the array's is %s", r.Path, r.Copy, want[r.Path])
		default:
			read++
		}
	}
	if read == 0 || read+len(unsupported) != len(paths) {
		t.Fatalf("GDAL read %d arrays, %d unsupported, of %d\n%s", read, len(unsupported), len(paths), out)
	}
	t.Logf("GDAL read %d arrays through v2/ as from zarr-python's copies; %d it reads from neither:\n%s", read, len(unsupported), strings.Join(unsupported, "\n"))
}

// filterListed keeps the paths that exist below root.
func filterListed(t *testing.T, root string, paths []string) []string {
	t.Helper()
	var kept []string
	for _, p := range paths {
		if readOrMissing(t, filepath.Join(root, p, ".zarray")) != nil {
			kept = append(kept, p)
		}
	}
	return kept
}
