package meta

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/dtype"
)

// validArray is a zarr.json every test case below changes one thing of.
const validArray = `{
  "zarr_format": 3,
  "node_type": "array",
  "shape": [10, 20, 30],
  "data_type": "uint16",
  "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5, 5, 7]}},
  "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
  "fill_value": 7,
  "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
}`

// withMember returns validArray with member key set to value, or removed
// if value is "".
func withMember(t *testing.T, key, value string) string {
	t.Helper()
	ms, err := parseObject([]byte(validArray))
	if err != nil {
		t.Fatal(err)
	}
	out := ms[:0:0]
	found := false
	for _, m := range ms {
		if m.key == key {
			found = true
			if value == "" {
				continue
			}
			m.value = json.RawMessage(value)
		}
		out = append(out, m)
	}
	if !found && value != "" {
		out = append(out, member{key, json.RawMessage(value)})
	}
	return string(encodeObject(out))
}

func TestParseV3Errors(t *testing.T) {
	cases := []struct {
		key, value string // member to change; value "" removes it
		class      error
		msg        string
	}{
		{"zarr_format", `2`, ErrInvalid, "zarr.json: zarr_format: 2 is not 3"},
		{"zarr_format", `"3"`, ErrInvalid, `zarr.json: zarr_format: "3" is not an integer`},
		{"zarr_format", "", ErrInvalid, "zarr.json: zarr_format: required"},
		{"node_type", `"table"`, ErrInvalid, `zarr.json: node_type: "table" is neither "array" nor "group"`},
		{"node_type", "", ErrInvalid, "zarr.json: node_type: required"},
		{"shape", "", ErrInvalid, "zarr.json: shape: required"},
		{"shape", `[10, -1, 30]`, ErrInvalid, "zarr.json: shape[1]: -1 is negative"},
		{"shape", `[10, 2.5, 30]`, ErrInvalid, "zarr.json: shape[1]: 2.5 is not an integer"},
		{"shape", `[10, 1e3, 30]`, ErrInvalid, "zarr.json: shape[1]: 1e3 is not an integer"},
		{"shape", `[10, 99999999999999999999, 30]`, ErrInvalid, "zarr.json: shape[1]: 99999999999999999999 is out of range"},
		{"shape", `{"a": 1}`, ErrInvalid, `zarr.json: shape: {"a": 1} is not an array`},
		{"shape", `null`, ErrInvalid, "zarr.json: shape: null is not an array"},
		{"data_type", `"float8"`, ErrUnsupported, `zarr.json: unknown data type "float8"`},
		{"data_type", "", ErrInvalid, "zarr.json: data_type: required"},
		{"chunk_grid", `{"name": "rectilinear", "configuration": {}}`, ErrUnsupported, `zarr.json: chunk_grid: "rectilinear" is not supported (only "regular")`},
		{"chunk_grid", `{"name": "regular", "configuration": {"chunk_shape": [5, 5]}}`, ErrInvalid, "zarr.json: chunk_grid.configuration.chunk_shape: has 2 dimensions, shape has 3"},
		{"chunk_grid", `{"name": "regular", "configuration": {"chunk_shape": [5, 0, 7]}}`, ErrInvalid, "zarr.json: chunk_grid.configuration.chunk_shape[1]: 0 is not positive"},
		{"shape", `[9223372036854775807, 9223372036854775807, 30]`, ErrInvalid, "zarr.json: chunk_grid.configuration.chunk_shape: [5 5 7]: more than 2^63 chunks"},
		{"chunk_grid", `{"name": "regular", "configuration": {"chunk_shape": [4294967296, 4294967296, 7]}}`, ErrInvalid, "a chunk of more than 2^63 elements"},
		{"chunk_grid", `{"name": "regular", "configuration": {}}`, ErrInvalid, "zarr.json: chunk_grid.configuration.chunk_shape: required"},
		{"chunk_grid", `{"name": "regular", "configuration": {"chunk_shape": [5, 5, 7], "x": 1}}`, ErrInvalid, `zarr.json: chunk_grid.configuration: unknown member "x"`},
		{"chunk_grid", `{"name": "regular", "configuration": [5]}`, ErrInvalid, "zarr.json: chunk_grid.configuration: [5] is not an object"},
		{"chunk_grid", `{"configuration": {"chunk_shape": [5, 5, 7]}}`, ErrInvalid, "zarr.json: chunk_grid.name: required"},
		{"chunk_grid", `{"name": "regular", "must_understand": false, "configuration": {"chunk_shape": [5, 5, 7]}}`, ErrInvalid, "zarr.json: chunk_grid.must_understand: false is not allowed"},
		{"chunk_grid", `5`, ErrInvalid, "zarr.json: chunk_grid: 5 is neither a name nor an object with a name"},
		{"chunk_key_encoding", `{"name": "default", "configuration": {"separator": "-"}}`, ErrInvalid, `zarr.json: chunk_key_encoding.configuration.separator: "-" is neither "/" nor "."`},
		{"chunk_key_encoding", `{"name": "custom"}`, ErrUnsupported, `zarr.json: chunk_key_encoding: "custom" is not supported`},
		{"chunk_key_encoding", `{"name": "v2", "configuration": {"separator": ".", "zero": true}}`, ErrInvalid, `zarr.json: chunk_key_encoding.configuration: unknown member "zero"`},
		{"fill_value", `70000`, ErrInvalid, "zarr.json: fill_value: 70000 out of range for uint16"},
		{"fill_value", `null`, ErrInvalid, "zarr.json: fill_value: null is not allowed in zarr v3"},
		{"fill_value", "", ErrInvalid, "zarr.json: fill_value: required"},
		{"codecs", `[]`, ErrInvalid, "zarr.json: codecs: empty, but an array -> bytes codec is required"},
		{"codecs", `{"name": "bytes"}`, ErrInvalid, "zarr.json: codecs: {\"name\": \"bytes\"} is not an array"},
		{"codecs", `[{"name": "bytes", "configuration": 1}]`, ErrInvalid, "zarr.json: codecs[0].configuration: 1 is not an object"},
		{"codecs", `[{"name": "bytes", "level": 1}]`, ErrInvalid, `zarr.json: codecs[0]: unknown member "level"`},
		{"codecs", `["bytes", ""]`, ErrInvalid, "zarr.json: codecs[1]: the name is empty"},
		{"codecs", `[{"name": 5}]`, ErrInvalid, "zarr.json: codecs[0].name: 5 is not a string"},
		{"dimension_names", `["x", "y"]`, ErrInvalid, "zarr.json: dimension_names: has 2 names, shape has 3 dimensions"},
		{"dimension_names", `["x", 1, "z"]`, ErrInvalid, "zarr.json: dimension_names[1]: 1 is neither a string nor null"},
		{"attributes", `[]`, ErrInvalid, "zarr.json: attributes: [] is not an object"},
		{"attributes", `null`, ErrInvalid, "zarr.json: attributes: null is not an object"},
		{"storage_transformers", `[{"name": "chunk-manifest-json"}]`, ErrUnsupported, `zarr.json: storage_transformers[0]: "chunk-manifest-json" is not supported`},
		{"storage_transformers", `{}`, ErrInvalid, "zarr.json: storage_transformers: {} is not an array"},
		{"my_extension", `{"version": 1}`, ErrUnsupported, `zarr.json: "my_extension": unknown field; only fields marked "must_understand": false may be ignored`},
		{"my_extension", `{"must_understand": true}`, ErrUnsupported, `"my_extension": unknown field`},
		{"my_extension", `"hello"`, ErrUnsupported, `"my_extension": unknown field`},
		{"consolidated_metadata", `null`, ErrUnsupported, `"consolidated_metadata": unknown field`}, // only groups have it
	}
	for _, c := range cases {
		doc := withMember(t, c.key, c.value)
		_, err := ParseV3([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), c.msg) || !errors.Is(err, c.class) {
			t.Errorf("%s = %s:\n error %v\n want %q (%v)", c.key, c.value, err, c.msg, c.class)
		}
		if c.key == "data_type" && c.value != "" && !errors.Is(err, dtype.ErrUnknown) {
			t.Errorf("unknown data type: %v does not wrap dtype.ErrUnknown", err)
		}
	}
}

func TestParseV3DocumentErrors(t *testing.T) {
	cases := []struct{ doc, msg string }{
		{``, "zarr.json: not a JSON object"},
		{`[]`, "zarr.json: not a JSON object"},
		{`{"zarr_format": 3,}`, "zarr.json: invalid JSON"},
		{`{"zarr_format": 3, "node_type": "group"} x`, "zarr.json: invalid JSON: data after the object"},
		{`{"zarr_format": 3, "node_type": "group", "node_type": "array"}`, `zarr.json: "node_type" appears twice`},
		{`{"zarr_format": 3, "node_type": "group", "attributes": 1}`, "zarr.json: attributes: 1 is not an object"},
		{`{"zarr_format": 3, "node_type": "group", "shape": [1]}`, `zarr.json: "shape": unknown field`},
		{`{"zarr_format": 3, "node_type": "group", "consolidated_metadata": {"kind": "remote", "metadata": {}}}`, `zarr.json: consolidated_metadata.kind: "remote" is not supported`},
		{`{"zarr_format": 3, "node_type": "group", "consolidated_metadata": {"kind": "inline", "metadata": {"a": 1}}}`, `zarr.json: consolidated_metadata.metadata["a"]: 1 is not an object`},
		{`{"zarr_format": 3, "node_type": "group", "consolidated_metadata": {"kind": "inline"}}`, "zarr.json: consolidated_metadata.metadata: required"},
	}
	for _, c := range cases {
		_, err := ParseV3([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.msg) || !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s:\n error %v\n want %q", c.doc, err, c.msg)
		}
	}
}

func mustArrayV3(t *testing.T, doc string) *ArrayV3 {
	t.Helper()
	n, err := ParseV3([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a, ok := n.(*ArrayV3)
	if !ok {
		t.Fatalf("%T, want *ArrayV3", n)
	}
	return a
}

func marshal(t *testing.T, n interface{ Marshal() ([]byte, error) }) string {
	t.Helper()
	b, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseArrayV3(t *testing.T) {
	a := mustArrayV3(t, validArray)
	want := &ArrayV3{
		Shape:       []int{10, 20, 30},
		DataType:    dtype.TypeUint16,
		ChunkShape:  []int{5, 5, 7},
		KeyEncoding: KeyEncoding{Name: KeyEncodingDefault, Separator: "/"},
		FillValue:   []byte{7, 0},
		Codecs:      []Codec{{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)}},
	}
	if got := stripDoc(a); !reflect.DeepEqual(got, stripDoc(want)) {
		t.Errorf("parsed\n%#v\nwant\n%#v", got, stripDoc(want))
	}
	if a.Rank() != 3 || !reflect.DeepEqual(a.GridShape(), []int{2, 4, 5}) {
		t.Errorf("rank %d grid %v", a.Rank(), a.GridShape())
	}
}

// Short-hand names and defaults are accepted and written back as they were.
func TestParseV3ShortHands(t *testing.T) {
	doc := withMember(t, "codecs", `["bytes", {"name": "gzip", "configuration": {"level": 5}}, {"name": "crc32c", "configuration": null}]`)
	doc = strings.Replace(doc, `{"name": "default", "configuration": {"separator": "/"}}`, `"v2"`, 1)
	doc = strings.Replace(doc, `{"name": "regular", "configuration": {"chunk_shape": [5, 5, 7]}}`, `{"configuration": {"chunk_shape": [5, 5, 7]}, "name": "regular", "must_understand": true}`, 1)
	a := mustArrayV3(t, doc)
	if a.KeyEncoding != (KeyEncoding{Name: KeyEncodingV2, Separator: "."}) {
		t.Errorf("key encoding %+v", a.KeyEncoding)
	}
	wantCodecs := []Codec{{Name: "bytes"}, {Name: "gzip", Configuration: json.RawMessage(`{"level":5}`)}, {Name: "crc32c"}}
	if !reflect.DeepEqual(a.Codecs, wantCodecs) {
		t.Errorf("codecs %+v", a.Codecs)
	}
	out := marshal(t, a)
	for _, s := range []string{`"chunk_key_encoding": "v2"`, `"bytes",`, `"configuration": null`, `"must_understand": true`} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %s:\n%s", s, out)
		}
	}
}

// A parsed document is written back with everything it does not model, in
// its order, with its numbers; only changed fields are re-encoded.
func TestMarshalV3Lossless(t *testing.T) {
	doc := `{
  "node_type": "array",
  "zarr_format": 3,
  "shape": [4, 4],
  "data_type": "float32",
  "my_extension": {"must_understand": false, "values": [1.50, 2e3]},
  "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
  "chunk_key_encoding": {"name": "default"},
  "fill_value": 1.50,
  "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [1, 1], "codecs": [{"name": "bytes"}], "index_codecs": [{"name": "bytes"}, {"name": "crc32c"}]}}],
  "storage_transformers": [{"name": "cache", "must_understand": false}],
  "dimension_names": ["y", null],
  "attributes": {"b": 1, "a": 0.10}
}`
	a := mustArrayV3(t, doc)
	if got := marshal(t, a); !jsonEqual(t, got, doc) || !reflect.DeepEqual(topKeys(t, []byte(got)), topKeys(t, []byte(doc))) {
		t.Fatalf("round trip changed the document:\n%s", got)
	}

	if err := a.SetAttributes(json.RawMessage(`{"z": [true]}`)); err != nil {
		t.Fatal(err)
	}
	got := marshal(t, a)
	want := strings.Replace(doc, `{"b": 1, "a": 0.10}`, `{"z": [true]}`, 1)
	if !jsonEqual(t, got, want) || !reflect.DeepEqual(topKeys(t, []byte(got)), topKeys(t, []byte(doc))) {
		t.Errorf("SetAttributes changed more than the attributes:\n%s", got)
	}
	if err := a.SetAttributes(json.RawMessage(`[1]`)); err == nil || !errors.Is(err, ErrInvalid) {
		t.Errorf("SetAttributes([1]) = %v, want ErrInvalid", err)
	}

	// Changing the shape re-encodes the shape only (a resize).
	a.Shape = []int{8, 4}
	got = marshal(t, a)
	want = strings.Replace(want, `"shape": [4, 4]`, `"shape": [8, 4]`, 1)
	if !jsonEqual(t, got, want) {
		t.Errorf("resize:\n%s", got)
	}

	// Removing optional fields removes them; the rest stays.
	a.DimensionNames = nil
	if err := a.SetAttributes(nil); err != nil {
		t.Fatal(err)
	}
	got = marshal(t, a)
	if strings.Contains(got, "dimension_names") || strings.Contains(got, "attributes") || !strings.Contains(got, `"fill_value": 1.50`) {
		t.Errorf("removal:\n%s", got)
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	return reflect.DeepEqual(decodeJSON(t, []byte(a)), decodeJSON(t, []byte(b)))
}

func TestWithChunking(t *testing.T) {
	doc := `{"zarr_format": 3, "node_type": "array", "shape": [8, 8], "data_type": "int16",
  "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
  "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
  "fill_value": 0,
  "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 5}}]}}],
  "attributes": {"x": 1}, "dimension_names": ["y", "x"]}`
	sharded := mustArrayV3(t, doc)
	before := marshal(t, sharded)
	inner := []Codec{
		{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)},
		{Name: "gzip", Configuration: json.RawMessage(`{"level":5}`)},
	}
	view := sharded.WithChunking([]int{2, 2}, inner)
	inner[1].Configuration[2] = 'X' // the copy must not share the caller's slices
	view.DimensionNames[0] = nil

	if got := marshal(t, sharded); got != before {
		t.Errorf("WithChunking changed the original:\n%s", got)
	}
	want := strings.Replace(doc, `"chunk_shape": [4, 4]`, `"chunk_shape": [2, 2]`, 1)
	want = strings.Replace(want, `[{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 5}}]}}]`,
		`[{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 5}}]`, 1)
	want = strings.Replace(want, `["y", "x"]`, `[null, "x"]`, 1)
	if got := marshal(t, view); !jsonEqual(t, got, want) {
		t.Errorf("view:\n%s\nwant\n%s", got, want)
	}
	if !reflect.DeepEqual(view.GridShape(), []int{4, 4}) {
		t.Errorf("view grid %v", view.GridShape())
	}
}

// New documents come out in specification order, indented like zarr-python.
func TestMarshalNewV3(t *testing.T) {
	x := "x"
	a := &ArrayV3{
		Shape:          []int{100, 100},
		DataType:       dtype.TypeFloat64,
		ChunkShape:     []int{10, 10},
		KeyEncoding:    KeyEncoding{Name: KeyEncodingDefault, Separator: "/"},
		FillValue:      []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f},
		Codecs:         []Codec{{Name: "bytes", Configuration: json.RawMessage(`{"endian": "little"}`)}},
		DimensionNames: []*string{nil, &x},
		Attributes:     json.RawMessage(`{}`),
	}
	want := `{
  "zarr_format": 3,
  "node_type": "array",
  "shape": [
    100,
    100
  ],
  "data_type": "float64",
  "chunk_grid": {
    "name": "regular",
    "configuration": {
      "chunk_shape": [
        10,
        10
      ]
    }
  },
  "chunk_key_encoding": {
    "name": "default",
    "configuration": {
      "separator": "/"
    }
  },
  "fill_value": "NaN",
  "codecs": [
    {
      "name": "bytes",
      "configuration": {
        "endian": "little"
      }
    }
  ],
  "attributes": {},
  "dimension_names": [
    null,
    "x"
  ]
}`
	if got := marshal(t, a); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	g := &GroupV3{}
	if got := marshal(t, g); got != "{\n  \"zarr_format\": 3,\n  \"node_type\": \"group\"\n}" {
		t.Errorf("new group:\n%s", got)
	}
}

func TestMarshalV3Invalid(t *testing.T) {
	valid := func() *ArrayV3 { return mustArrayV3(t, validArray) }
	cases := []struct {
		change func(a *ArrayV3)
		class  error
		msg    string
	}{
		{func(a *ArrayV3) { a.ChunkShape = []int{1} }, ErrInvalid, "zarr.json: chunk_grid.configuration.chunk_shape: has 1 dimensions, shape has 3"},
		{func(a *ArrayV3) { a.FillValue = []byte{1} }, ErrInvalid, "zarr.json: fill_value: 1 bytes for uint16, want 2"},
		{func(a *ArrayV3) { a.Codecs = nil }, ErrInvalid, "zarr.json: codecs: empty"},
		{func(a *ArrayV3) { a.Codecs[0].Configuration = json.RawMessage(`{`) }, ErrInvalid, "zarr.json: codecs[0].configuration: invalid JSON"},
		{func(a *ArrayV3) { a.Codecs[0].Name = "" }, ErrInvalid, "zarr.json: codecs[0].name: required"},
		{func(a *ArrayV3) { a.KeyEncoding = KeyEncoding{} }, ErrUnsupported, `zarr.json: chunk_key_encoding: "" is not supported`},
		{func(a *ArrayV3) { a.Attributes = json.RawMessage(`"x"`) }, ErrInvalid, `zarr.json: attributes: "x" is not an object`},
		{func(a *ArrayV3) { a.DataType = dtype.DataType{Kind: dtype.Object} }, ErrUnsupported, "zarr.json: unknown data type: object has no v3 form"},
		{func(a *ArrayV3) { a.Shape[0] = -1 }, ErrInvalid, "zarr.json: shape[0]: -1 is negative"},
	}
	for _, c := range cases {
		a := valid()
		c.change(a)
		_, err := a.Marshal()
		if err == nil || !strings.Contains(err.Error(), c.msg) || !errors.Is(err, c.class) {
			t.Errorf("error %v, want %q (%v)", err, c.msg, c.class)
		}
	}
}

func TestFillValueExactNumbers(t *testing.T) {
	doc := strings.Replace(withMember(t, "fill_value", `18446744073709551615`), `"uint16"`, `"uint64"`, 1)
	a := mustArrayV3(t, doc)
	if string(a.FillValue) != "\xff\xff\xff\xff\xff\xff\xff\xff" {
		t.Errorf("fill %x", a.FillValue)
	}
	a.FillValue = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0} // 2^54 - 1: above 2^53
	if got := marshal(t, a); !strings.Contains(got, `"fill_value": 18014398509481983`) {
		t.Errorf("uint64 fill not exact:\n%s", got)
	}

	doc = strings.Replace(withMember(t, "fill_value", `"0x7fc00001"`), `"uint16"`, `"float32"`, 1)
	a = mustArrayV3(t, doc)
	if got := marshal(t, a); !strings.Contains(got, `"fill_value": "0x7fc00001"`) {
		t.Errorf("NaN payload not kept:\n%s", got)
	}
}

func TestDimensionNames(t *testing.T) {
	absent := mustArrayV3(t, validArray)
	null := mustArrayV3(t, withMember(t, "dimension_names", `null`))
	entries := mustArrayV3(t, withMember(t, "dimension_names", `[null, "y", null]`))
	if absent.DimensionNames != nil || null.DimensionNames != nil {
		t.Errorf("absent/null dimension_names parsed as %v / %v", absent.DimensionNames, null.DimensionNames)
	}
	if n := entries.DimensionNames; len(n) != 3 || n[0] != nil || n[1] == nil || *n[1] != "y" || n[2] != nil {
		t.Errorf("dimension names %v", n)
	}
	for _, c := range []struct {
		a    *ArrayV3
		want string // "" for absent
	}{{absent, ""}, {null, `"dimension_names": null`}, {entries, `"dimension_names": [null, "y", null]`}} {
		got := marshal(t, c.a)
		if c.want == "" && strings.Contains(got, "dimension_names") || c.want != "" && !jsonContains(t, got, c.want) {
			t.Errorf("dimension_names: got\n%s\nwant %s", got, c.want)
		}
	}
}

// jsonContains reports whether the document holds the member written as
// `"key": value`, compared as JSON.
func jsonContains(t *testing.T, doc, m string) bool {
	t.Helper()
	ms, err := parseObject([]byte("{" + m + "}"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := parseObject([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := lookup(all, ms[0].key)
	return ok && jsonEqual(t, string(got), string(ms[0].value))
}

func TestGroupV3(t *testing.T) {
	doc := `{"attributes": {"answer": 42}, "zarr_format": 3, "consolidated_metadata": null, "node_type": "group", "ext": {"must_understand": false}}`
	n, err := ParseV3([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g := n.(*GroupV3)
	if string(g.Attributes) != `{"answer":42}` || g.Consolidated != nil {
		t.Errorf("group %+v", g)
	}
	if got := marshal(t, g); !jsonEqual(t, got, doc) {
		t.Errorf("round trip:\n%s", got)
	}

	// Consolidated metadata can be replaced or removed.
	g.Consolidated = Entries{{Key: "a", Doc: json.RawMessage(`{"zarr_format": 3, "node_type": "group"}`)}}
	got := marshal(t, g)
	if !jsonContains(t, got, `"consolidated_metadata": {"kind": "inline", "must_understand": false, "metadata": {"a": {"zarr_format": 3, "node_type": "group"}}}`) {
		t.Errorf("set consolidated:\n%s", got)
	}
	g2, err := ParseV3([]byte(got))
	if err != nil {
		t.Fatal(err)
	}
	g2.(*GroupV3).Consolidated = nil
	if got := marshal(t, g2); strings.Contains(got, "consolidated_metadata") {
		t.Errorf("removed consolidated:\n%s", got)
	}
	g.Consolidated = Entries{{Key: "a", Doc: json.RawMessage(`{}`)}, {Key: "a", Doc: json.RawMessage(`{}`)}}
	if _, err := g.Marshal(); err == nil || !strings.Contains(err.Error(), `consolidated_metadata.metadata["a"]: appears twice`) {
		t.Errorf("duplicate entries: %v", err)
	}
}
