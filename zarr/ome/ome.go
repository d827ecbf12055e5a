// Package ome translates OME-Zarr image metadata between version 0.5, which
// Zarr v3 groups hold in one "ome" attribute, and version 0.4, which Zarr v2
// readers (napari-ome-zarr, Fiji/MoBIE, QuPath, older ome-zarr-py) expect:
// the same objects at the top level of .zattrs, each carrying its version.
// Nothing else differs between the two forms (axes, coordinate
// transformations and paths are the same), so the translation is exact
// both ways.
package ome

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
)

const (
	// V05 is the version whose metadata is translated.
	V05 = "0.5"
	// V04 is the version of the translation.
	V04 = "0.4"
)

// topLevel are the keys 0.4 keeps at the top level of .zattrs and 0.5
// keeps under "ome" (image, labels, label image, plate, well,
// bioformats2raw container and its OME group).
var topLevel = []string{"multiscales", "omero", "labels", "image-label", "plate", "well", "bioformats2raw.layout", "series"}

// versioned are the objects that carry "version" in 0.4; in multiscales,
// each entry of the list does.
var versioned = []string{"image-label", "plate", "well"}

// ErrNotTranslatable: the attributes hold OME-Zarr 0.5 metadata that has no
// 0.4 form.
var ErrNotTranslatable = errors.New("no OME-Zarr 0.4 form")

// attributes splits a group's attributes into the "ome" object and the rest.
type attributes struct {
	rest map[string]json.RawMessage
	ome  map[string]json.RawMessage
}

// parse returns the attributes if they hold OME-Zarr 0.5 metadata.
func parse(attrs json.RawMessage) (*attributes, bool) {
	var rest map[string]json.RawMessage
	if json.Unmarshal(attrs, &rest) != nil || rest["ome"] == nil {
		return nil, false
	}
	var ome map[string]json.RawMessage
	var version string
	if json.Unmarshal(rest["ome"], &ome) != nil || json.Unmarshal(ome["version"], &version) != nil || version != V05 {
		return nil, false
	}
	delete(rest, "ome")
	return &attributes{rest: rest, ome: ome}, true
}

// ToV04 returns attributes holding OME-Zarr 0.5 metadata in the 0.4 form:
// every key of "ome" but its version at the top level, and "version": "0.4"
// in each multiscales entry and in the image-label, plate and well objects.
// ok is false, and attrs are returned unchanged, when they hold no 0.5
// metadata. An error says why 0.5 metadata has no 0.4 form.
func ToV04(attrs json.RawMessage) (out json.RawMessage, ok bool, err error) {
	a, ok := parse(attrs)
	if !ok {
		return attrs, false, nil
	}
	fields, err := a.v04()
	if err != nil {
		return attrs, true, err
	}
	out, err = marshal(fields)
	return out, true, err
}

// v04 returns the top-level fields of the 0.4 form.
func (a *attributes) v04() (map[string]json.RawMessage, error) {
	fields := make(map[string]json.RawMessage, len(a.rest)+len(a.ome))
	for k, v := range a.rest {
		fields[k] = v
	}
	for k, v := range a.ome {
		if k == "version" {
			continue
		}
		if _, taken := fields[k]; taken {
			return nil, fmt.Errorf("%w: the attribute %q is both at the top level and in \"ome\"", ErrNotTranslatable, k)
		}
		var err error
		if fields[k], err = withVersion(k, v); err != nil {
			return nil, fmt.Errorf("%w: ome.%s: %v", ErrNotTranslatable, k, err)
		}
	}
	return fields, nil
}

// withVersion adds the 0.4 version where 0.4 puts it.
func withVersion(key string, v json.RawMessage) (json.RawMessage, error) {
	switch {
	case key == "multiscales":
		var entries []map[string]json.RawMessage
		if err := json.Unmarshal(v, &entries); err != nil {
			return nil, err
		}
		for _, e := range entries {
			e["version"] = json.RawMessage(`"` + V04 + `"`)
		}
		return marshal(entries)
	case slices.Contains(versioned, key):
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(v, &obj); err != nil {
			return nil, err
		}
		obj["version"] = json.RawMessage(`"` + V04 + `"`)
		return marshal(obj)
	}
	return v, nil
}

// withoutVersion removes the 0.4 version that withVersion adds.
func withoutVersion(key string, v json.RawMessage) (json.RawMessage, error) {
	drop := func(obj map[string]json.RawMessage) {
		var version string
		if json.Unmarshal(obj["version"], &version) == nil && version == V04 {
			delete(obj, "version")
		}
	}
	switch {
	case key == "multiscales":
		var entries []map[string]json.RawMessage
		if err := json.Unmarshal(v, &entries); err != nil {
			return nil, fmt.Errorf("multiscales: %v", err)
		}
		for _, e := range entries {
			drop(e)
		}
		return marshal(entries)
	case slices.Contains(versioned, key):
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(v, &obj); err != nil {
			return nil, fmt.Errorf("%s: %v", key, err)
		}
		drop(obj)
		return marshal(obj)
	}
	return v, nil
}

// FromV04 maps attributes written in the 0.4 form back to the 0.5 form of
// stored, attributes for which ToV04 succeeds: the OME keys move under
// "ome" (with stored's version) and lose the 0.4 version, and a key
// written as ToV04 shows it keeps its stored value exactly. Keys that are
// not OME metadata stay at the top level. When no OME key is left, so is
// "ome", unless stored's held none either.
func FromV04(written, stored json.RawMessage) (json.RawMessage, error) {
	a, ok := parse(stored)
	if !ok {
		return nil, fmt.Errorf("the stored attributes hold no OME-Zarr %s metadata", V05)
	}
	shown, err := a.v04()
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(written, &fields); err != nil {
		return nil, err
	}
	if _, ok := fields["ome"]; ok {
		return nil, fmt.Errorf("an \"ome\" attribute in the OME-Zarr %s form of a %s group: write the %s form, whose keys are at the top level", V04, V05, V04)
	}
	out := map[string]json.RawMessage{}
	ome := map[string]json.RawMessage{"version": a.ome["version"]}
	for k, v := range fields {
		_, fromOME := a.ome[k]
		if !fromOME && !slices.Contains(topLevel, k) {
			out[k] = v
			continue
		}
		if stored, ok := a.ome[k]; ok && jsonEqual(v, shown[k]) {
			ome[k] = stored
			continue
		}
		if ome[k], err = withoutVersion(k, v); err != nil {
			return nil, err
		}
	}
	// An "ome" that held only its version stays: the writer changed none
	// of it.
	if len(ome) > 1 || len(a.ome) == 1 {
		if out["ome"], err = marshal(ome); err != nil {
			return nil, err
		}
	}
	return marshal(out)
}

// Multiscale is one multiscale image of a group.
type Multiscale struct {
	// Axes are the names of the axes, in order.
	Axes []string
	// Paths are the paths of the levels, relative to the group, from the
	// highest resolution down.
	Paths []string
}

// Multiscales returns the multiscale images of attributes holding OME-Zarr
// 0.5 metadata; entries that do not parse are left out.
func Multiscales(attrs json.RawMessage) []Multiscale {
	a, ok := parse(attrs)
	if !ok {
		return nil
	}
	var entries []struct {
		Axes []struct {
			Name string `json:"name"`
		} `json:"axes"`
		Datasets []struct {
			Path string `json:"path"`
		} `json:"datasets"`
	}
	if json.Unmarshal(a.ome["multiscales"], &entries) != nil {
		return nil
	}
	var out []Multiscale
	for _, e := range entries {
		var m Multiscale
		for _, ax := range e.Axes {
			m.Axes = append(m.Axes, ax.Name)
		}
		for _, d := range e.Datasets {
			m.Paths = append(m.Paths, d.Path)
		}
		out = append(out, m)
	}
	return out
}

// marshal encodes without escaping <, > and &, which attributes keep as
// written.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
