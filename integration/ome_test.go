package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// omeReader returns the OME-Zarr 0.4 reader (testdata/omezarr/omezarr.mjs:
// ome-zarr.js plus the 0.4 JSON schemas) with its npm dependencies
// installed, or skips the test saying how to install it.
func omeReader(t *testing.T) string {
	t.Helper()
	wd, _ := os.Getwd()
	for _, c := range []string{os.Getenv("ZARRFS_OMEZARR"), "/tmp/zarrfs-omezarr/omezarr.mjs", filepath.Join(wd, "testdata", "omezarr", "omezarr.mjs")} {
		if c == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(c), "node_modules", "ome-zarr.js")); err == nil {
			if _, err := exec.LookPath("node"); err == nil {
				return c
			}
		}
	}
	msg := "the OME-Zarr reader is not installed: npm ci in a copy of integration/testdata/omezarr, then set ZARRFS_OMEZARR to its omezarr.mjs (.ci/run does this)"
	zarrtest.Missing(t, "%s", msg)
	return ""
}

// omeReport is what omezarr.mjs prints.
type omeReport struct {
	Groups map[string]struct {
		Kind    string   `json:"kind"`
		Schemas []string `json:"schemas"`
		Errors  []string `json:"errors"`
	} `json:"groups"`
	Images map[string]omeImage `json:"images"`
}

// omeImage is one image as an OME-Zarr reader sees it.
type omeImage struct {
	Version     string           `json:"version"`
	ZarrVersion int              `json:"zarr_version"`
	Axes        []map[string]any `json:"axes"`
	Paths       []string         `json:"paths"`
	Scales      [][]float64      `json:"scales"`
	Labels      []string         `json:"labels"`
	Levels      []omeLevel       `json:"levels"`
}

type omeLevel struct {
	Path   string `json:"path"`
	Shape  []int  `json:"shape"`
	Dtype  string `json:"dtype"`
	Sha256 string `json:"sha256"`
}

// readOME runs the OME-Zarr reader on groups of the hierarchy at root.
func readOME(t *testing.T, root string, groups ...string) omeReport {
	t.Helper()
	cmd := exec.Command("node", append([]string{omeReader(t), root}, groups...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the OME-Zarr reader failed on %s %v: %v\n%s", root, groups, err, stderrOf(err))
	}
	var r omeReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("the OME-Zarr reader printed %s: %v", out, err)
	}
	return r
}

// omeAxis is an axis of an image.
type omeAxis struct{ name, typ, unit string }

func (a omeAxis) json() map[string]any {
	m := map[string]any{"name": a.name, "type": a.typ}
	if a.unit != "" {
		m["unit"] = a.unit
	}
	return m
}

// omeImageSpec describes an OME-Zarr 0.5 image to write: a multiscale
// image whose levels have the given shapes, level i stored with the
// codecs of i mod 3 (sharded with transposed blosc inner chunks, which the
// v2 view transcodes; sharded zstd with a crc32c; unsharded gzip).
type omeImageSpec struct {
	path   string
	axes   []omeAxis
	shapes [][]int
	typ    dtype.DataType
	// unnamed leaves dimension_names out, so the v2 view names dimensions
	// after the axes.
	unnamed bool
	// extra are more members of "ome" (omero, image-label), as JSON.
	extra string
	seed  int
}

// writeOMEImage writes an image and returns it as an OME-Zarr 0.4 reader
// of the v2 view must see it.
func writeOMEImage(t *testing.T, s store.Store, spec omeImageSpec) omeImage {
	t.Helper()
	ctx := context.Background()
	want := omeImage{Version: "0.4", ZarrVersion: 2}
	var axes []string
	var names []*string
	for _, a := range spec.axes {
		axes = append(axes, mustJSON(t, a.json()))
		want.Axes = append(want.Axes, a.json())
		if !spec.unnamed {
			names = append(names, &a.name)
		}
	}
	var datasets []string
	for i, shape := range spec.shapes {
		path := fmt.Sprint(i)
		scale := make([]float64, len(shape))
		for d := range shape {
			scale[d] = 0.25 * float64(spec.shapes[0][d]) / float64(shape[d])
			if spec.axes[d].typ != "space" {
				scale[d] = 1
			}
		}
		datasets = append(datasets, fmt.Sprintf(`{"path":%q,"coordinateTransformations":[{"type":"scale","scale":%s},{"type":"translation","translation":%s}]}`,
			path, mustJSON(t, scale), mustJSON(t, make([]float64, len(shape)))))
		want.Paths = append(want.Paths, path)
		want.Scales = append(want.Scales, scale)
	}
	attrs := fmt.Sprintf(`{"ome":{"version":"0.5","multiscales":[{"name":%q,"axes":[%s],"datasets":[%s],"type":"mean","metadata":{"method":"zarrfs test","version":"1"}}]%s}}`,
		filepath.Base(spec.path), strings.Join(axes, ","), strings.Join(datasets, ","), spec.extra)
	if err := zarr.CreateGroup(ctx, s, spec.path, 3, json.RawMessage(attrs)); err != nil {
		t.Fatal(err)
	}
	for i, shape := range spec.shapes {
		inner, shard := make([]int, len(shape)), make([]int, len(shape))
		order := make([]int, len(shape))
		for d := range shape {
			inner[d] = max(1, (shape[d]+3)/4)
			shard[d] = 2 * inner[d]
			order[d] = len(shape) - 1 - d
		}
		m := &meta.ArrayV3{Shape: shape, DataType: spec.typ, FillValue: make([]byte, spec.typ.Size),
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, DimensionNames: names}
		switch i % 3 {
		case 0:
			m.ChunkShape = shard
			m.Codecs = []meta.Codec{zarrtest.Sharding(inner, []meta.Codec{zarrtest.C("transpose", `{"order":`+mustJSON(t, order)+`}`), zarrtest.BytesLE,
				zarrtest.C("blosc", fmt.Sprintf(`{"cname":"zstd","clevel":3,"shuffle":"shuffle","typesize":%d,"blocksize":0}`, spec.typ.Size))},
				[]meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}, "end")}
		case 1:
			m.ChunkShape = shard
			m.Codecs = []meta.Codec{zarrtest.Sharding(inner, []meta.Codec{zarrtest.BytesLE, zarrtest.Zstd, zarrtest.CRC32C}, []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}, "start")}
		default:
			m.ChunkShape = inner
			m.Codecs = []meta.Codec{zarrtest.BytesLE, zarrtest.Gzip}
		}
		a, err := zarr.CreateArrayV3(ctx, s, spec.path+"/"+want.Paths[i], m)
		if err != nil {
			t.Fatal(err)
		}
		data := zarrtest.Pattern(a, spec.seed+i)
		if err := a.Write(ctx, data); err != nil {
			t.Fatal(err)
		}
		want.Levels = append(want.Levels, omeLevel{Path: want.Paths[i], Shape: shape, Dtype: spec.typ.String(), Sha256: zarrtest.Digest(data)})
	}
	return want
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeOMEStore writes a store the OME-Zarr code has never seen: an image
// with two channels, three levels (z kept, y and x halved), omero and two
// label images (one without dimension_names); a plate of two wells with two
// fields each; and an array outside any image. It returns the images by
// path as the v2 view must show them.
func writeOMEStore(t *testing.T, dir string) map[string]omeImage {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(zarr.CreateGroup(ctx, s, "", 3, json.RawMessage(`{"title":"OME-Zarr 0.5 test store"}`)))
	space := func(n string) omeAxis { return omeAxis{n, "space", "micrometer"} }
	czyx := []omeAxis{{"c", "channel", ""}, space("z"), space("y"), space("x")}
	images := map[string]omeImage{}
	images["image"] = writeOMEImage(t, s, omeImageSpec{path: "image", axes: czyx, typ: dtype.TypeUint16, seed: 3,
		shapes: [][]int{{2, 12, 40, 36}, {2, 12, 20, 18}, {2, 12, 10, 9}},
		extra: `,"omero":{"name":"image","channels":[` +
			`{"label":"DAPI","color":"0000FF","active":true,"window":{"min":0,"max":65535,"start":0,"end":1500}},` +
			`{"label":"GFP","color":"00FF00","active":true,"window":{"min":0,"max":65535,"start":100,"end":4000}}],"rdefs":{"model":"color"}}`})
	must(zarr.CreateGroup(ctx, s, "image/labels", 3, json.RawMessage(`{"ome":{"version":"0.5","labels":["nuclei","cells"]}}`)))
	label := `,"image-label":{"colors":[{"label-value":1,"rgba":[255,0,0,255]},{"label-value":2,"rgba":[0,255,0,128]}],` +
		`"properties":[{"label-value":1,"class":"nucleus"}],"source":{"image":"../../"}}`
	images["image/labels/nuclei"] = writeOMEImage(t, s, omeImageSpec{path: "image/labels/nuclei", axes: czyx, typ: dtype.TypeUint8, seed: 5,
		shapes: [][]int{{1, 12, 40, 36}, {1, 12, 20, 18}}, extra: label})
	images["image/labels/cells"] = writeOMEImage(t, s, omeImageSpec{path: "image/labels/cells", axes: czyx[1:], typ: dtype.TypeUint32, seed: 7,
		shapes: [][]int{{12, 40, 36}}, extra: label, unnamed: true})
	im := images["image"]
	im.Labels = []string{"nuclei", "cells"}
	images["image"] = im

	must(zarr.CreateGroup(ctx, s, "plate", 3, json.RawMessage(`{"ome":{"version":"0.5","plate":{"name":"test plate","field_count":2,`+
		`"acquisitions":[{"id":0,"name":"run","maximumfieldcount":2}],`+
		`"rows":[{"name":"A"},{"name":"B"}],"columns":[{"name":"1"},{"name":"2"},{"name":"3"}],`+
		`"wells":[{"path":"A/1","rowIndex":0,"columnIndex":0},{"path":"B/3","rowIndex":1,"columnIndex":2}]}}}`)))
	for _, row := range []string{"A", "B"} {
		must(zarr.CreateGroup(ctx, s, "plate/"+row, 3, nil))
	}
	for i, well := range []string{"A/1", "B/3"} {
		must(zarr.CreateGroup(ctx, s, "plate/"+well, 3, json.RawMessage(`{"ome":{"version":"0.5","well":{"images":[{"path":"0","acquisition":0},{"path":"1","acquisition":0}]}}}`)))
		for field := range 2 {
			p := fmt.Sprintf("plate/%s/%d", well, field)
			images[p] = writeOMEImage(t, s, omeImageSpec{path: p, axes: []omeAxis{{"c", "channel", ""}, space("y"), space("x")}, typ: dtype.TypeUint8,
				seed: 10 + 2*i + field, shapes: [][]int{{1, 16, 16}, {1, 8, 8}}})
		}
	}
	a, err := zarr.CreateArrayV3(ctx, s, "other", &meta.ArrayV3{Shape: []int{10, 10}, DataType: dtype.TypeUint16, ChunkShape: []int{5, 5},
		FillValue: []byte{0, 0}, KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, Codecs: []meta.Codec{zarrtest.BytesLE}})
	must(err)
	must(a.Write(ctx, zarrtest.Pattern(a, 1)))
	return images
}

// checkOMEReport compares what the OME-Zarr reader saw with the images
// written: every group valid against the 0.4 schemas (strict ones too),
// every image with the written levels, axes, scales and pixels.
func checkOMEReport(t *testing.T, got omeReport, want map[string]omeImage, kinds map[string]string) {
	t.Helper()
	for path, g := range got.Groups {
		if len(g.Errors) > 0 {
			t.Errorf("%s (%s) is not valid OME-Zarr 0.4: %v", path, g.Kind, g.Errors)
		}
	}
	for path, kind := range kinds {
		if g, ok := got.Groups[path]; !ok || g.Kind != kind {
			t.Errorf("the OME-Zarr reader saw %s as %q, want %q", path, g.Kind, kind)
		}
	}
	for path, w := range want {
		g, ok := got.Images[path]
		if !ok {
			t.Errorf("the OME-Zarr reader did not find the image %s", path)
			continue
		}
		if len(g.Labels) == 0 && len(w.Labels) == 0 {
			g.Labels = w.Labels
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("image %s as the OME-Zarr reader sees it:\n got %+v\nwant %+v", path, g, w)
		}
	}
	if len(got.Images) != len(want) {
		t.Errorf("the OME-Zarr reader found %d images, want %d", len(got.Images), len(want))
	}
}

// xarrayDims opens a group of the v2 view with xarray and returns the
// dimensions of each variable and their sizes, or the error xarray gave.
func xarrayDims(t *testing.T, root, group string) (dims map[string][]string, sizes map[string]int) {
	t.Helper()
	zarrtest.RequirePython(t, "xarray")
	script := `
import json, sys, warnings
import xarray as xr
warnings.simplefilter("ignore")
ds = xr.open_zarr(sys.argv[1], group=sys.argv[2])
print(json.dumps({"dims": {k: list(v.dims) for k, v in ds.data_vars.items()}, "sizes": dict(ds.sizes)}))
`
	out, err := exec.Command("/usr/bin/python3", "-c", script, root, group).Output()
	if err != nil {
		t.Fatalf("xr.open_zarr(%s, group=%q): %v\n%s", root, group, err, stderrOf(err))
	}
	var r struct {
		Dims  map[string][]string `json:"dims"`
		Sizes map[string]int      `json:"sizes"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	return r.Dims, r.Sizes
}

// TestOMEZarr mounts an OME-Zarr 0.5 store and reads its v2 view as
// OME-Zarr 0.4 readers do: every group validates against the 0.4 JSON
// schemas; ome-zarr.js lists the written levels, axes and scales of every
// image, label image and plate field and reads the original pixels; the
// levels have "/" chunk keys (other arrays keep the mount's "."); xarray
// opens an image's levels together. The same store zipped (an .ozx) reads
// the same. Attribute writes through v2 .zattrs (zarr-python 2) are stored
// in the 0.5 form.
func TestOMEZarr(t *testing.T) {
	omeReader(t)
	dir := t.TempDir()
	want := writeOMEStore(t, dir)
	m := mount(t, dir)
	v2 := filepath.Join(m.Dir, "v2")

	kinds := map[string]string{"image": "image", "image/labels/nuclei": "label image", "image/labels/cells": "label image",
		"plate": "plate", "plate/A/1": "well", "plate/B/3": "well"}
	checkOMEReport(t, readOME(t, v2, "image", "plate"), want, kinds)

	for path, img := range want {
		for _, l := range img.Levels {
			checkSeparator(t, filepath.Join(v2, path, l.Path), "/")
		}
	}
	checkSeparator(t, filepath.Join(v2, "other"), ".")

	t.Run("xarray", func(t *testing.T) {
		dims, sizes := xarrayDims(t, v2, "image")
		wantDims := map[string][]string{"0": {"c", "z", "y", "x"}, "1": {"c", "z", "y_1", "x_1"}, "2": {"c", "z", "y_2", "x_2"}}
		wantSizes := map[string]int{"c": 2, "z": 12, "y": 40, "x": 36, "y_1": 20, "x_1": 18, "y_2": 10, "x_2": 9}
		if !reflect.DeepEqual(dims, wantDims) || !reflect.DeepEqual(sizes, wantSizes) {
			t.Errorf("xarray opened image with dims %v sizes %v, want %v %v", dims, sizes, wantDims, wantSizes)
		}
		if dims, _ := xarrayDims(t, v2, "image/labels/cells"); !reflect.DeepEqual(dims, map[string][]string{"0": {"z", "y", "x"}}) {
			t.Errorf("xarray opened a label image without dimension_names with dims %v, want the axes' names", dims)
		}
	})

	t.Run("zipped", func(t *testing.T) {
		zarrtest.RequirePython(t)
		zipped := mount(t, pythonZip(t, dir, "STORED"))
		checkOMEReport(t, readOME(t, filepath.Join(zipped.Dir, "v2"), "image", "plate"), want, kinds)
	})

	t.Run("attribute writes", func(t *testing.T) {
		zarrtest.RequirePython(t, "zarr")
		script := `
import sys, zarr
g = zarr.open_group(sys.argv[1] + "/image", mode="r+")
ms = g.attrs["multiscales"]
ms[0]["name"] = "renamed"
g.attrs["multiscales"] = ms
g.attrs["napari"] = {"visible": True}
a = zarr.open_array(sys.argv[1] + "/image/1", mode="r+")
a.attrs["note"] = "level one"
`
		if out, err := exec.Command("/usr/bin/python3", "-c", script, v2).CombinedOutput(); err != nil {
			t.Fatalf("zarr-python writing attributes: %v\n%s", err, out)
		}
		var stored map[string]any
		if err := json.Unmarshal(writtenAttrs(t, filepath.Join(dir, "image", "zarr.json")), &stored); err != nil {
			t.Fatal(err)
		}
		ome, _ := stored["ome"].(map[string]any)
		ms, _ := ome["multiscales"].([]any)
		if ome["version"] != "0.5" || len(ms) != 1 || ms[0].(map[string]any)["name"] != "renamed" || ms[0].(map[string]any)["version"] != nil ||
			ome["omero"] == nil || stored["napari"] == nil || stored["multiscales"] != nil || len(stored) != 2 {
			t.Errorf("attributes stored after writing the 0.4 form: %v; want the 0.5 form with the new name and napari at the top level", stored)
		}
		var arrayAttrs map[string]any
		if err := json.Unmarshal(writtenAttrs(t, filepath.Join(dir, "image", "1", "zarr.json")), &arrayAttrs); err != nil ||
			!reflect.DeepEqual(arrayAttrs, map[string]any{"note": "level one"}) {
			t.Errorf("array attributes stored: %v (%v), want only the note (no derived _ARRAY_DIMENSIONS)", arrayAttrs, err)
		}
		b, err := os.ReadFile(filepath.Join(v2, "image", ".zattrs"))
		if err != nil {
			t.Fatal(err)
		}
		var shown map[string]any
		if err := json.Unmarshal(b, &shown); err != nil {
			t.Fatal(err)
		}
		if ms, _ := shown["multiscales"].([]any); len(ms) != 1 || ms[0].(map[string]any)["version"] != "0.4" || ms[0].(map[string]any)["name"] != "renamed" {
			t.Errorf("v2 .zattrs after the write: %s", b)
		}
		report := readOME(t, v2, "image")
		if g := report.Groups["image"]; len(g.Errors) > 0 {
			t.Errorf("after the write, image is not valid OME-Zarr 0.4: %v", g.Errors)
		}
	})
}

// writtenAttrs returns the attributes of a zarr.json in the store.
func writtenAttrs(t *testing.T, path string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Attributes json.RawMessage `json:"attributes"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Attributes
}

// checkSeparator checks an array's v2 dimension_separator.
func checkSeparator(t *testing.T, dir, want string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".zarray"))
	if err != nil {
		t.Error(err)
		return
	}
	var z struct {
		Separator string `json:"dimension_separator"`
	}
	if err := json.Unmarshal(b, &z); err != nil || z.Separator != want {
		t.Errorf("%s: dimension_separator %q (%v), want %q", dir, z.Separator, err, want)
	}
}

// TestDemoIsOMEZarr: the demo store is an OME-Zarr 0.5 image with labels
// that OME-Zarr 0.4 readers and xarray read through the v2 view.
func TestDemoIsOMEZarr(t *testing.T) {
	omeReader(t)
	dir := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command(zarrfsBin, "demo", dir).CombinedOutput(); err != nil {
		t.Fatalf("zarrfs demo: %v\n%s", err, out)
	}
	h := zarrtest.OpenHierarchy(t, dir, true)
	images := map[string]omeImage{}
	for _, img := range []struct {
		path   string
		levels int
		labels []string
	}{{"volume", 3, []string{"mask"}}, {"volume/labels/mask", 2, nil}} {
		w := omeImage{Version: "0.4", ZarrVersion: 2, Labels: img.labels}
		for _, axis := range []string{"z", "y", "x"} {
			w.Axes = append(w.Axes, map[string]any{"name": axis, "type": "space", "unit": "micrometer"})
		}
		for i := range img.levels {
			p := fmt.Sprint(i)
			n, ok := h.Node(img.path + "/" + p)
			if !ok || n.Array == nil {
				t.Fatalf("the demo has no array %s/%s", img.path, p)
			}
			digest, err := zarrtest.DigestArray(context.Background(), n.Array)
			if err != nil {
				t.Fatal(err)
			}
			s := 0.5 * float64(int(1)<<i)
			w.Paths = append(w.Paths, p)
			w.Scales = append(w.Scales, []float64{s, s, s})
			w.Levels = append(w.Levels, omeLevel{Path: p, Shape: n.Array.Shape, Dtype: n.Array.Type.String(), Sha256: digest})
		}
		images[img.path] = w
	}
	m := mount(t, dir, "--ro")
	v2 := filepath.Join(m.Dir, "v2")
	checkOMEReport(t, readOME(t, v2, "volume"), images, map[string]string{"volume": "image", "volume/labels/mask": "label image"})
	for group, want := range map[string]map[string]int{
		"volume":             {"z": 256, "y": 256, "x": 256, "z_1": 128, "y_1": 128, "x_1": 128, "z_2": 64, "y_2": 64, "x_2": 64},
		"volume/labels/mask": {"z": 256, "y": 256, "x": 256, "z_1": 128, "y_1": 128, "x_1": 128},
	} {
		if _, sizes := xarrayDims(t, v2, group); !reflect.DeepEqual(sizes, want) {
			t.Errorf("xr.open_zarr(v2, group=%q): sizes %v, want %v", group, sizes, want)
		}
	}
}
