package meta

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// addFixtureSeeds adds the fixtures' documents named name as seeds, if the
// fixtures are there.
func addFixtureSeeds(f *testing.F, name string) {
	root, err := findFixtures()
	if err != nil {
		return
	}
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name {
			if b, err := os.ReadFile(path); err == nil {
				f.Add(b)
			}
		}
		return nil
	})
}

// checkClassified fails unless err is nil or matches an error class.
func checkClassified(t *testing.T, err error) {
	if err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupported) {
		t.Fatalf("unclassified error: %v", err)
	}
}

// checkStable checks that a parsed document marshals, that the output
// parses to the same values, and that marshalling is then stable.
func checkStable[T interface{ Marshal() ([]byte, error) }](t *testing.T, v T, parse func([]byte) (T, error)) {
	out, err := v.Marshal()
	if err != nil {
		t.Fatalf("a parsed document does not marshal: %v", err)
	}
	w, err := parse(out)
	if err != nil {
		t.Fatalf("marshalled document does not parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(stripDoc(v), stripDoc(w)) {
		t.Fatalf("values changed in a round trip:\n%#v\n%#v", stripDoc(v), stripDoc(w))
	}
	again, err := w.Marshal()
	if err != nil || !bytes.Equal(out, again) {
		t.Fatalf("marshal not stable (%v):\n%s\n---\n%s", err, out, again)
	}
}

func FuzzParseV3(f *testing.F) {
	f.Add([]byte(validArray))
	f.Add([]byte(`{"zarr_format": 3, "node_type": "group", "attributes": {"a": 1}, "consolidated_metadata": {"kind": "inline", "must_understand": false, "metadata": {"x": {}}}}`))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[],"data_type":"bytes","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[]}},"chunk_key_encoding":"v2","fill_value":[1,2],"codecs":["vlen-bytes"],"dimension_names":[],"x":{"must_understand":false}}`))
	addFixtureSeeds(f, "zarr.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseV3(b)
		checkClassified(t, err)
		if err != nil {
			return
		}
		checkStable(t, n, ParseV3)
	})
}

func FuzzParseZarray(f *testing.F) {
	f.Add([]byte(validZarray))
	f.Add([]byte(`{"zarr_format": 2, "shape": [], "chunks": [], "dtype": "|O", "fill_value": 0, "filters": [{"id": "vlen-utf8"}], "dimension_separator": "/"}`))
	f.Add([]byte(`{"zarr_format": 2, "shape": [3], "chunks": [2], "dtype": "<U3", "fill_value": "ab", "order": "C", "compressor": null}`))
	f.Add([]byte(`{"zarr_format": 2, "shape": [3], "chunks": [2], "dtype": "<f4", "fill_value": -1.0000000200408773e+20, "compressor": {"id": "blosc", "shuffle": "BIT"}}`))
	addFixtureSeeds(f, ".zarray")
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseZarray(b)
		checkClassified(t, err)
		if err != nil {
			return
		}
		checkStable(t, a, ParseZarray)
	})
}

func FuzzParseConsolidated(f *testing.F) {
	f.Add([]byte(`{"metadata": {".zgroup": {"zarr_format": 2}, "a/.zattrs": {}}, "zarr_consolidated_format": 1}`))
	addFixtureSeeds(f, ".zmetadata")
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConsolidated(b)
		checkClassified(t, err)
		if err != nil {
			return
		}
		checkStable(t, c, ParseConsolidated)
	})
}

func FuzzKeyParse(f *testing.F) {
	for _, seed := range []struct {
		key  string
		ndim uint8
	}{{"c/1/23/45", 3}, {"c", 0}, {"1.23.45", 3}, {"0", 0}, {"c.0.10", 2}, {"9223372036854775807", 1}, {"c/01", 1}} {
		for enc := range uint8(4) {
			f.Add(seed.key, seed.ndim, enc)
		}
	}
	encodings := []KeyEncoding{defaultSlash, defaultDot, v2Dot, v2Slash}
	f.Fuzz(func(t *testing.T, key string, ndim, enc uint8) {
		k := encodings[int(enc)%len(encodings)]
		coords, ok := k.Parse(key, int(ndim%8))
		if !ok {
			return
		}
		if len(coords) != int(ndim%8) {
			t.Fatalf("%+v.Parse(%q, %d) = %v", k, key, ndim%8, coords)
		}
		if back := k.Key(coords); back != key {
			t.Fatalf("%+v: Parse(%q) = %v, Key gives %q", k, key, coords, back)
		}
	})
}
