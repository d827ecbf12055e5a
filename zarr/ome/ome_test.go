package ome

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const image05 = `{"description": "x < y & z", "ome": {"version": "0.5",
  "multiscales": [{"name": "cells", "axes": [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}],
    "datasets": [{"path": "s0", "coordinateTransformations": [{"type": "scale", "scale": [1, 0.5, 0.5]}]},
                 {"path": "s1", "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 1]}, {"type": "translation", "translation": [0, 0.25, 0.25]}]}],
    "type": "mean", "metadata": {"method": "local_mean", "version": "1.2"}}],
  "omero": {"name": "cells", "channels": [{"label": "DAPI", "color": "0000FF", "window": {"min": 0, "max": 65535, "start": 10, "end": 900}, "active": true}]}}}`

func decode(t *testing.T, b json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

func TestToV04(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"image", image05, `{"description": "x < y & z",
		  "multiscales": [{"version": "0.4", "name": "cells", "axes": [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}],
		    "datasets": [{"path": "s0", "coordinateTransformations": [{"type": "scale", "scale": [1, 0.5, 0.5]}]},
		                 {"path": "s1", "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 1]}, {"type": "translation", "translation": [0, 0.25, 0.25]}]}],
		    "type": "mean", "metadata": {"method": "local_mean", "version": "1.2"}}],
		  "omero": {"name": "cells", "channels": [{"label": "DAPI", "color": "0000FF", "window": {"min": 0, "max": 65535, "start": 10, "end": 900}, "active": true}]}}`},
		{"labels", `{"ome": {"version": "0.5", "labels": ["nuclei", "cells"]}}`, `{"labels": ["nuclei", "cells"]}`},
		{"label image", `{"ome": {"version": "0.5", "image-label": {"colors": [{"label-value": 1, "rgba": [255, 0, 0, 255]}], "source": {"image": "../../"}},
		  "multiscales": [{"axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}], "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1]}]}]}]}}`,
			`{"image-label": {"version": "0.4", "colors": [{"label-value": 1, "rgba": [255, 0, 0, 255]}], "source": {"image": "../../"}},
		  "multiscales": [{"version": "0.4", "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}], "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1]}]}]}]}`},
		{"plate", `{"ome": {"version": "0.5", "plate": {"name": "p", "columns": [{"name": "1"}], "rows": [{"name": "A"}], "wells": [{"path": "A/1", "rowIndex": 0, "columnIndex": 0}]}}}`,
			`{"plate": {"version": "0.4", "name": "p", "columns": [{"name": "1"}], "rows": [{"name": "A"}], "wells": [{"path": "A/1", "rowIndex": 0, "columnIndex": 0}]}}`},
		{"well", `{"ome": {"version": "0.5", "well": {"images": [{"path": "0", "acquisition": 1}]}}}`,
			`{"well": {"version": "0.4", "images": [{"path": "0", "acquisition": 1}]}}`},
		{"bioformats2raw", `{"ome": {"version": "0.5", "bioformats2raw.layout": 3}}`, `{"bioformats2raw.layout": 3}`},
		{"OME series", `{"ome": {"version": "0.5", "series": ["0", "1"]}}`, `{"series": ["0", "1"]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, ok, err := ToV04(json.RawMessage(c.in))
			if !ok || err != nil {
				t.Fatalf("ToV04: ok %v, %v", ok, err)
			}
			if got, want := decode(t, out), decode(t, json.RawMessage(c.want)); !reflect.DeepEqual(got, want) {
				t.Errorf("ToV04:\n got %s\nwant %s", out, c.want)
			}
			if strings.Contains(string(out), `\u003c`) {
				t.Errorf("ToV04 escaped <: %s", out)
			}
			back, err := FromV04(out, json.RawMessage(c.in))
			if err != nil {
				t.Fatalf("FromV04: %v", err)
			}
			if got, want := decode(t, back), decode(t, json.RawMessage(c.in)); !reflect.DeepEqual(got, want) {
				t.Errorf("FromV04(ToV04(x)) != x:\n got %s\nwant %s", back, c.in)
			}
		})
	}
}

func TestNotTranslated(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `{}`, `{"a": 1}`,
		`{"multiscales": [{"version": "0.4", "axes": [], "datasets": []}]}`, // 0.4 already
		`{"ome": {"version": "0.6", "multiscales": []}}`,                    // a later version 0.4 cannot express
		`{"ome": {"multiscales": []}}`, `{"ome": {"version": 5}}`, `{"ome": []}`,
	} {
		out, ok, err := ToV04(json.RawMessage(in))
		if ok || err != nil || string(out) != in {
			t.Errorf("ToV04(%s) = %s, %v, %v; want it unchanged", in, out, ok, err)
		}
		if Multiscales(json.RawMessage(in)) != nil {
			t.Errorf("%s: Multiscales says OME-Zarr 0.5", in)
		}
	}
}

func TestNotTranslatable(t *testing.T) {
	for _, in := range []string{
		`{"multiscales": [], "ome": {"version": "0.5", "multiscales": []}}`,
		`{"ome": {"version": "0.5", "multiscales": {"not": "a list"}}}`,
		`{"ome": {"version": "0.5", "plate": ["not an object"]}}`,
	} {
		if _, ok, err := ToV04(json.RawMessage(in)); !ok || !errors.Is(err, ErrNotTranslatable) {
			t.Errorf("ToV04(%s): ok %v, err %v; want ErrNotTranslatable", in, ok, err)
		}
	}
}

func TestFromV04Edits(t *testing.T) {
	shown, _, err := ToV04(json.RawMessage(image05))
	if err != nil {
		t.Fatal(err)
	}
	fields := decode(t, shown)
	// A viewer renames the image, changes a window and adds its own key.
	ms := fields["multiscales"].([]any)
	ms[0].(map[string]any)["name"] = "renamed"
	fields["omero"].(map[string]any)["channels"].([]any)[0].(map[string]any)["window"].(map[string]any)["end"] = 1200.0
	fields["napari"] = map[string]any{"visible": true}
	written, _ := json.Marshal(fields)
	back, err := FromV04(written, json.RawMessage(image05))
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, back)
	want := decode(t, json.RawMessage(image05))
	wantMS := want["ome"].(map[string]any)["multiscales"].([]any)[0].(map[string]any)
	wantMS["name"] = "renamed"
	want["ome"].(map[string]any)["omero"].(map[string]any)["channels"].([]any)[0].(map[string]any)["window"].(map[string]any)["end"] = 1200.0
	want["napari"] = map[string]any{"visible": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("edited:\n got %s\nwant %v", back, want)
	}

	// Dropping every OME key drops "ome"; another version string is kept.
	back, err = FromV04(json.RawMessage(`{"description": "d", "plate": {"version": "0.3", "wells": []}}`), json.RawMessage(image05))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decode(t, back), decode(t, json.RawMessage(`{"description": "d", "ome": {"version": "0.5", "plate": {"version": "0.3", "wells": []}}}`)); !reflect.DeepEqual(got, want) {
		t.Errorf("got %s", back)
	}
	back, err = FromV04(json.RawMessage(`{"description": "d"}`), json.RawMessage(image05))
	if err != nil || string(back) != `{"description":"d"}` {
		t.Errorf("got %s, %v", back, err)
	}

	for _, bad := range []string{`[]`, `{"ome": {"version": "0.5"}}`, `{"multiscales": "no list"}`} {
		if _, err := FromV04(json.RawMessage(bad), json.RawMessage(image05)); err == nil {
			t.Errorf("FromV04(%s) took it", bad)
		}
	}
	if _, err := FromV04(json.RawMessage(`{}`), json.RawMessage(`{"a": 1}`)); err == nil {
		t.Error("FromV04 over attributes without OME-Zarr 0.5 metadata took it")
	}
}

func TestMultiscales(t *testing.T) {
	got := Multiscales(json.RawMessage(image05))
	want := []Multiscale{{Axes: []string{"c", "y", "x"}, Paths: []string{"s0", "s1"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// FuzzRoundTrip: whatever attributes are stored, their 0.4 form written
// back unchanged is the stored attributes, and nothing panics.
func FuzzRoundTrip(f *testing.F) {
	f.Add(image05, `{"multiscales": [], "x": 1}`)
	f.Add(`{"ome": {"version": "0.5", "plate": {"version": "0.5"}, "well": {}}}`, `{"well": {"version": "0.4"}}`)
	f.Add(`{"ome": {"version": "0.5", "multiscales": [{"version": "0.4"}, {}], "labels": ["a"]}}`, `{"ome": 1}`)
	f.Fuzz(func(t *testing.T, stored, written string) {
		out, ok, err := ToV04(json.RawMessage(stored))
		if !ok || err != nil {
			return
		}
		back, err := FromV04(out, json.RawMessage(stored))
		if err != nil {
			t.Fatalf("FromV04(ToV04(%s)): %v", stored, err)
		}
		if !jsonEqual(back, json.RawMessage(stored)) {
			t.Fatalf("FromV04(ToV04(%s)) = %s", stored, back)
		}
		if back, err := FromV04(json.RawMessage(written), json.RawMessage(stored)); err == nil && !json.Valid(back) {
			t.Fatalf("FromV04(%s) gave invalid JSON %s", written, back)
		}
	})
}
