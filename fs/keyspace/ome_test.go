package keyspace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/writeback"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

const omeImage = `{"ome": {"version": "0.5", "multiscales": [{"name": "img",
  "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
  "datasets": [{"path": "s0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1]}]},
               {"path": "s1", "coordinateTransformations": [{"type": "scale", "scale": [1, 2]}]}]}]}}`

// TestOMEImagesInV2: the v2 view shows an OME-Zarr 0.5 image as 0.4 (group
// attributes, "/" chunk keys for its levels, a level's shrunk axes named
// apart), and a .zattrs written in the 0.4 form is stored in the 0.5 form.
// Metadata without a 0.4 form is shown as it is, with a log line.
func TestOMEImagesInV2(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := zarrtest.OpenStore(t, dir)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(zarr.CreateGroup(ctx, s, "", 3, nil))
	must(zarr.CreateGroup(ctx, s, "img", 3, json.RawMessage(omeImage)))
	must(zarr.CreateGroup(ctx, s, "clash", 3, json.RawMessage(`{"multiscales": [], "ome": {"version": "0.5", "multiscales": []}}`)))
	for _, a := range []struct {
		path  string
		shape []int
	}{{"img/s0", []int{8, 8}}, {"img/s1", []int{8, 4}}, {"plain", []int{8, 8}}} {
		y, x := "y", "x"
		_, err := zarr.CreateArrayV3(ctx, s, a.path, &meta.ArrayV3{Shape: a.shape, DataType: dtype.TypeUint8, ChunkShape: []int{4, 4}, FillValue: []byte{0},
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, DimensionNames: []*string{&y, &x},
			Codecs: []meta.Codec{zarrtest.Sharding([]int{2, 2}, []meta.Codec{zarrtest.BytesLE}, []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}, "end")}})
		must(err)
	}
	s.Close()

	var logs bytes.Buffer
	h := zarrtest.OpenHierarchy(t, dir, false)
	journals, err := writeback.LocalJournalRoot(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { journals.Close() })
	w, err := writeback.New(h.Store, journals, writeback.Options{})
	must(err)
	f := keyspace.New(h, keyspace.Options{Writer: w, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(f.Close)
	t.Cleanup(func() { w.Close(ctx) })
	v2 := f.Root(keyspace.V2)

	decode := func(b []byte) map[string]any {
		t.Helper()
		var m map[string]any
		must(json.Unmarshal(b, &m))
		return m
	}
	img := lookupDir(t, v2, "img")
	attrs := decode(readFile(t, img, ".zattrs"))
	if ms, _ := attrs["multiscales"].([]any); attrs["ome"] != nil || len(ms) != 1 || ms[0].(map[string]any)["version"] != "0.4" {
		t.Errorf("v2 .zattrs of an OME-Zarr 0.5 image: %v, want the 0.4 form", attrs)
	}
	for level, dims := range map[string][]any{"s0": {"y", "x"}, "s1": {"y", "x_s1"}} {
		d := lookupDir(t, img, level)
		if sep := decode(readFile(t, d, ".zarray"))["dimension_separator"]; sep != "/" {
			t.Errorf("img/%s: dimension_separator %v, want /", level, sep)
		}
		if got := decode(readFile(t, d, ".zattrs"))["_ARRAY_DIMENSIONS"]; !reflect.DeepEqual(got, dims) {
			t.Errorf("img/%s: _ARRAY_DIMENSIONS %v, want %v", level, got, dims)
		}
	}
	if sep := decode(readFile(t, lookupDir(t, v2, "plain"), ".zarray"))["dimension_separator"]; sep != "." {
		t.Errorf("an array outside any image: dimension_separator %v, want the mount's .", sep)
	}
	if attrs := decode(readFile(t, lookupDir(t, v2, "clash"), ".zattrs")); attrs["ome"] == nil {
		t.Errorf("metadata without a 0.4 form: %v, want it as it is", attrs)
	}
	if !strings.Contains(logs.String(), `"multiscales\" is both at the top level and in \"ome\""`) || !strings.Contains(logs.String(), "key=clash") {
		t.Errorf("no log line naming the group and the reason:\n%s", logs.String())
	}
	if zmeta := string(readFile(t, v2, ".zmetadata")); !strings.Contains(zmeta, `"version": "0.4"`) {
		t.Errorf(".zmetadata does not show the 0.4 form:\n%s", zmeta)
	}

	// Written back in the 0.4 form, with the image renamed.
	write := func(content string) error {
		h, err := lookupFile(t, img, ".zattrs").OpenWrite(ctx, true)
		must(err)
		h.WriteAt([]byte(content), 0)
		return h.Commit(ctx)
	}
	attrs["multiscales"].([]any)[0].(map[string]any)["name"] = "renamed"
	b, _ := json.Marshal(attrs)
	must(write(string(b)))
	var doc struct {
		Attributes map[string]any `json:"attributes"`
	}
	must(json.Unmarshal(readFile(t, lookupDir(t, f.Root(keyspace.V3), "img"), "zarr.json"), &doc))
	want := decode([]byte(omeImage))
	want["ome"].(map[string]any)["multiscales"].([]any)[0].(map[string]any)["name"] = "renamed"
	if !reflect.DeepEqual(doc.Attributes, want) {
		t.Errorf("attributes after writing the 0.4 form:\n got %v\nwant %v", doc.Attributes, want)
	}
	if err := write(`{"ome": {"version": "0.5"}}`); !errors.Is(err, keyspace.ErrInvalid) {
		t.Errorf("writing the 0.5 form to the v2 .zattrs: %v, want ErrInvalid", err)
	}
}
