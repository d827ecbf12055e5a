package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/zarrtest/missing"
)

// findFixtures returns the shared fixtures directory: ../shared/fixtures
// from the module root (the nearest directory above with a go.mod).
func findFixtures() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the package directory")
		}
		dir = parent
	}
	fixtures := filepath.Join(dir, "..", "shared", "fixtures")
	if _, err := os.Stat(fixtures); err != nil {
		return "", err
	}
	return fixtures, nil
}

// fixturesDir returns the fixtures directory or skips the test.
func fixturesDir(t testing.TB) string {
	t.Helper()
	dir, err := findFixtures()
	if err != nil {
		missing.Report(t, "fixtures not found, tests against other implementations' files did not run: %v", err)
	}
	return dir
}

// metadataFiles returns every metadata document under the fixtures, by
// path relative to the fixtures directory.
func metadataFiles(t testing.TB) map[string][]byte {
	t.Helper()
	root := fixturesDir(t)
	files := make(map[string][]byte)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch d.Name() {
		case "zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata":
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			files[rel] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		missing.Report(t, "the fixtures directory holds no metadata documents")
	}
	return files
}

// roundTrip parses b, marshals it, and parses the result again; it
// returns the two parsed values (documents stripped) and the output.
func roundTrip(t *testing.T, name string, b []byte) (first, second any, out []byte) {
	t.Helper()
	switch filepath.Base(name) {
	case "zarr.json":
		parse := func(b []byte) (any, []byte, error) {
			n, err := ParseV3(b)
			if err != nil {
				return nil, nil, err
			}
			out, err := n.Marshal()
			return stripDoc(n), out, err
		}
		return roundTripWith(t, b, parse)
	case ".zarray":
		return roundTripWith(t, b, func(b []byte) (any, []byte, error) {
			a, err := ParseZarray(b)
			if err != nil {
				return nil, nil, err
			}
			out, err := a.Marshal()
			return stripDoc(a), out, err
		})
	case ".zgroup":
		return roundTripWith(t, b, func(b []byte) (any, []byte, error) {
			g, err := ParseZgroup(b)
			if err != nil {
				return nil, nil, err
			}
			out, err := g.Marshal()
			return nil, out, err
		})
	case ".zattrs":
		return roundTripWith(t, b, func(b []byte) (any, []byte, error) {
			attrs, err := ParseZattrs(b)
			if err != nil {
				return nil, nil, err
			}
			out, err := MarshalZattrs(attrs)
			return attrs, out, err
		})
	case ".zmetadata":
		return roundTripWith(t, b, func(b []byte) (any, []byte, error) {
			c, err := ParseConsolidated(b)
			if err != nil {
				return nil, nil, err
			}
			out, err := c.Marshal()
			return stripDoc(c), out, err
		})
	}
	t.Fatalf("%s: not a metadata document", name)
	return nil, nil, nil
}

func roundTripWith(t *testing.T, b []byte, parse func([]byte) (any, []byte, error)) (any, any, []byte) {
	t.Helper()
	first, out, err := parse(b)
	if err != nil {
		t.Fatalf("first parse: %v", err)
	}
	second, again, err := parse(out)
	if err != nil {
		t.Fatalf("parse of the marshalled document: %v\n%s", err, out)
	}
	if !bytes.Equal(out, again) {
		t.Errorf("marshal is not stable:\n%s\n---\n%s", out, again)
	}
	return first, second, out
}

// stripDoc returns a copy of a document value without its record of the
// parsed document, for comparing what was parsed.
func stripDoc(v any) any {
	switch v := v.(type) {
	case *ArrayV3:
		c := *v
		c.doc = document{}
		return c
	case *GroupV3:
		c := *v
		c.doc = document{}
		return c
	case *ArrayV2:
		c := *v
		c.doc = document{}
		return c
	case *Consolidated:
		c := *v
		c.doc = document{}
		return c
	}
	return v
}

// decodeJSON decodes b keeping numbers as written.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func topKeys(t *testing.T, b []byte) []string {
	t.Helper()
	ms, err := parseObject(b)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.key
	}
	return keys
}

func TestFixturesRoundTrip(t *testing.T) {
	for name, b := range metadataFiles(t) {
		t.Run(name, func(t *testing.T) {
			first, second, out := roundTrip(t, name, b)
			if !reflect.DeepEqual(first, second) {
				t.Errorf("parsed values differ after a round trip:\n%#v\n%#v", first, second)
			}
			if want, got := decodeJSON(t, b), decodeJSON(t, out); !reflect.DeepEqual(want, got) {
				t.Errorf("marshalled document differs from the original:\n%s\n---\n%s", b, out)
			}
			if want, got := topKeys(t, b), topKeys(t, out); !reflect.DeepEqual(want, got) {
				t.Errorf("key order %q, want %q", got, want)
			}
		})
	}
}

// Facts about particular fixtures, as other implementations wrote them.
func TestFixtureValues(t *testing.T) {
	files := metadataFiles(t)
	read := func(name string) []byte {
		t.Helper()
		b, ok := files[name]
		if !ok {
			missing.Report(t, "fixture %s is missing", name)
		}
		return b
	}
	arrayV3 := func(name string) *ArrayV3 {
		t.Helper()
		n, err := ParseV3(read(name))
		if err != nil {
			t.Fatal(err)
		}
		a, ok := n.(*ArrayV3)
		if !ok {
			t.Fatalf("%s: %T, want an array", name, n)
		}
		return a
	}

	nan := arrayV3("zarrs_snapshot_data/sharding_inner2x2/float32_fillnan/zarr.json")
	if got := math.Float32frombits(uint32(getLE(nan.FillValue))); !math.IsNaN(float64(got)) || len(nan.FillValue) != 4 {
		t.Errorf("float32_fillnan fill = %x, want NaN", nan.FillValue)
	}

	keys := arrayV3("zarrs/v3_v2keys/array_none_transpose.zarr/zarr.json")
	if keys.KeyEncoding != (KeyEncoding{Name: KeyEncodingV2, Separator: "."}) {
		t.Errorf("v3_v2keys key encoding = %+v", keys.KeyEncoding)
	}
	if got := keys.KeyEncoding.Key([]int{1, 0}); got != "1.0" {
		t.Errorf("key = %q, want 1.0", got)
	}

	ng := arrayV3("neuroglancer/zarr_v3_examples/single_res/zarr.json")
	if ng.KeyEncoding != (KeyEncoding{Name: KeyEncodingDefault, Separator: "/"}) || ng.DataType != dtype.TypeUint16 {
		t.Errorf("tensorstore array: %+v %v", ng.KeyEncoding, ng.DataType)
	}
	if got := ng.GridShape(); !reflect.DeepEqual(got, []int{2, 2}) {
		t.Errorf("grid shape = %v, want [2 2]", got)
	}

	sharded := arrayV3("zarrita.js/v3/data.zarr/1d.chunked.compressed.sharded.i2/zarr.json")
	if len(sharded.Codecs) != 1 || sharded.Codecs[0].Name != "sharding_indexed" {
		t.Errorf("sharded codecs = %+v", sharded.Codecs)
	}

	n, err := ParseV3(read("zarrita.js/v3/data.zarr/consolidated/zarr.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := n.(*GroupV3)
	if doc, ok := g.Consolidated.Get("nested/1d.i2"); !ok {
		t.Errorf("consolidated metadata lacks nested/1d.i2: %+v", g.Consolidated)
	} else if inner, err := ParseV3(doc); err != nil {
		t.Errorf("consolidated nested/1d.i2: %v", err)
	} else if a := inner.(*ArrayV3); !reflect.DeepEqual(a.Shape, []int{4}) {
		t.Errorf("nested/1d.i2 shape = %v", a.Shape)
	}

	// zarr-python 2 writes 0 as the fill value of object arrays; with the
	// vlen-utf8 object codec they are string arrays, filled with "".
	strs, err := ParseZarray(read("zarrita.js/v2/data.zarr/3d.chunked.O/.zarray"))
	if err != nil {
		t.Fatal(err)
	}
	if strs.DataType != dtype.TypeString || strs.FillValue == nil || len(strs.FillValue) != 0 || len(strs.Filters) != 1 {
		t.Errorf("|O vlen-utf8 array: %v fill %q filters %s", strs.DataType, strs.FillValue, strs.Filters)
	}
	object, err := ParseZarray(read("zarrita.js/v2/data.zarr/1d.contiguous.json2.O/.zarray"))
	if err != nil {
		t.Fatal(err)
	}
	if object.DataType.Kind != dtype.Object || string(object.FillValue) != "0" {
		t.Errorf("|O json2 array: %v fill %q", object.DataType, object.FillValue)
	}

	c, err := ParseConsolidated(read("zarrita.js/v2/data.zarr/.zmetadata"))
	if err != nil {
		t.Fatal(err)
	}
	if doc, ok := c.Entries.Get("1d.contiguous.S7/.zarray"); !ok {
		t.Error(".zmetadata lacks 1d.contiguous.S7/.zarray")
	} else if a, err := ParseZarray(doc); err != nil {
		t.Error(err)
	} else if !bytes.Equal(a.FillValue, make([]byte, 7)) {
		t.Errorf("|S7 fill = %q, want 7 NULs", a.FillValue)
	}
}

func getLE(b []byte) uint64 {
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	return u
}
