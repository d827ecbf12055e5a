package meta

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/dtype"
)

const validZarray = `{
    "chunks": [2, 3],
    "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1},
    "dtype": ">i4",
    "fill_value": 42,
    "filters": [{"id": "delta", "dtype": "<i4"}],
    "order": "F",
    "shape": [5, 7],
    "zarr_format": 2
}`

func withZarrayMember(t *testing.T, key, value string) string {
	t.Helper()
	ms, err := parseObject([]byte(validZarray))
	if err != nil {
		t.Fatal(err)
	}
	var out []member
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

func TestParseZarray(t *testing.T) {
	a, err := ParseZarray([]byte(validZarray))
	if err != nil {
		t.Fatal(err)
	}
	want := ArrayV2{
		Shape:              []int{5, 7},
		Chunks:             []int{2, 3},
		DataType:           dtype.TypeInt32,
		Endian:             dtype.Big,
		Order:              'F',
		Compressor:         json.RawMessage(`{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1}`),
		Filters:            []json.RawMessage{json.RawMessage(`{"id":"delta","dtype":"<i4"}`)},
		FillValue:          []byte{42, 0, 0, 0},
		DimensionSeparator: ".",
	}
	if got := stripDoc(a); !reflect.DeepEqual(got, want) {
		t.Errorf("parsed\n%#v\nwant\n%#v", got, want)
	}
	if a.Rank() != 2 || !reflect.DeepEqual(a.GridShape(), []int{3, 3}) {
		t.Errorf("rank %d grid %v", a.Rank(), a.GridShape())
	}
	if got := a.KeyEncoding().Key([]int{2, 1}); got != "2.1" {
		t.Errorf("key %q", got)
	}
	if got := marshal(t, a); !jsonEqual(t, got, validZarray) {
		t.Errorf("round trip:\n%s", got)
	}
}

func TestParseZarrayErrors(t *testing.T) {
	cases := []struct {
		key, value string
		class      error
		msg        string
	}{
		{"zarr_format", `3`, ErrInvalid, ".zarray: zarr_format: 3 is not 2"},
		{"zarr_format", ``, ErrInvalid, ".zarray: zarr_format: required"},
		{"shape", ``, ErrInvalid, ".zarray: shape: required"},
		{"shape", `[5, -7]`, ErrInvalid, ".zarray: shape[1]: -7 is negative"},
		{"chunks", `[2]`, ErrInvalid, ".zarray: chunks: has 1 dimensions, shape has 2"},
		{"chunks", `[2, 0]`, ErrInvalid, ".zarray: chunks[1]: 0 is not positive"},
		{"chunks", `"2,3"`, ErrInvalid, `.zarray: chunks: "2,3" is not an array`},
		{"dtype", ``, ErrInvalid, ".zarray: dtype: required"},
		{"dtype", `[["r", "|u1"], ["g", "|u1"]]`, ErrUnsupported, ".zarray: dtype: structured data types are not supported"},
		{"dtype", `"<x4"`, ErrUnsupported, `.zarray: unknown data type: dtype "<x4"`},
		{"dtype", `"!i4"`, ErrInvalid, `dtype "!i4": byte order must be one of`},
		{"dtype", `4`, ErrInvalid, ".zarray: dtype: 4 is not a string"},
		{"compressor", `{"cname": "lz4"}`, ErrInvalid, ".zarray: compressor.id: required"},
		{"compressor", `{"id": ""}`, ErrInvalid, ".zarray: compressor.id: empty"},
		{"compressor", `"zlib"`, ErrInvalid, `.zarray: compressor: "zlib" is not an object`},
		{"filters", `[{"id": "delta"}, {"dtype": "<i4"}]`, ErrInvalid, ".zarray: filters[1].id: required"},
		{"filters", `{"id": "delta"}`, ErrInvalid, ".zarray: filters: {\"id\": \"delta\"} is not an array"},
		{"fill_value", `2147483648`, ErrInvalid, ".zarray: fill_value: 2147483648 out of range for int32"},
		{"fill_value", `"0x7fc00000"`, ErrInvalid, ".zarray: fill_value: \"0x7fc00000\" is not an integer"},
		{"order", `"A"`, ErrInvalid, `.zarray: order: "A" is neither "C" nor "F"`},
		{"dimension_separator", `"-"`, ErrInvalid, `.zarray: dimension_separator: "-" is neither "." nor "/"`},
		{"dimension_separator", `null`, ErrInvalid, `.zarray: dimension_separator: null is not a string`},
	}
	for _, c := range cases {
		_, err := ParseZarray([]byte(withZarrayMember(t, c.key, c.value)))
		if err == nil || !strings.Contains(err.Error(), c.msg) || !errors.Is(err, c.class) {
			t.Errorf("%s = %s:\n error %v\n want %q (%v)", c.key, c.value, err, c.msg, c.class)
		}
	}
}

// Absent optional keys get their defaults and stay absent; unknown keys
// are kept.
func TestZarrayDefaultsAndUnknownKeys(t *testing.T) {
	doc := `{"zarr_format": 2, "shape": [10], "chunks": [4], "dtype": "<f8", "vendor": {"x": [1.0]}}`
	a, err := ParseZarray([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if a.Order != 'C' || a.Compressor != nil || a.Filters != nil || a.FillValue != nil || a.DimensionSeparator != "." {
		t.Errorf("defaults: %+v", a)
	}
	if got := marshal(t, a); !jsonEqual(t, got, doc) {
		t.Errorf("round trip:\n%s", got)
	}
	a.DimensionSeparator = "/"
	a.FillValue = []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}
	got := marshal(t, a)
	if !jsonContains(t, got, `"dimension_separator": "/"`) || !jsonContains(t, got, `"fill_value": "NaN"`) || !jsonContains(t, got, `"vendor": {"x": [1.0]}`) {
		t.Errorf("changed:\n%s", got)
	}
}

func TestMarshalNewZarray(t *testing.T) {
	a := &ArrayV2{
		Shape:              []int{10},
		Chunks:             []int{5},
		DataType:           dtype.TypeUint8,
		Order:              'C',
		FillValue:          []byte{0},
		DimensionSeparator: ".",
	}
	want := `{
  "chunks": [
    5
  ],
  "compressor": null,
  "dimension_separator": ".",
  "dtype": "|u1",
  "fill_value": 0,
  "filters": null,
  "order": "C",
  "shape": [
    10
  ],
  "zarr_format": 2
}`
	if got := marshal(t, a); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	b := a.Clone()
	b.Filters = []json.RawMessage{json.RawMessage(`{"id": "shuffle"}`)}
	b.Chunks[0] = 2
	if got := marshal(t, a); got != want {
		t.Errorf("Clone shares state with the original:\n%s", got)
	}
	if got := marshal(t, b); !jsonContains(t, got, `"filters": [{"id": "shuffle"}]`) {
		t.Errorf("filters:\n%s", got)
	}
	b.Order = 0
	if _, err := b.Marshal(); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), ".zarray: order:") {
		t.Errorf("order 0: %v", err)
	}
}

func TestZgroup(t *testing.T) {
	g, err := ParseZgroup([]byte(`{"zarr_format": 2, "extra": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := marshal(t, g); !jsonEqual(t, got, `{"zarr_format": 2, "extra": 1}`) {
		t.Errorf("round trip: %s", got)
	}
	if got := marshal(t, &GroupV2{}); got != "{\n  \"zarr_format\": 2\n}" {
		t.Errorf("new: %s", got)
	}
	for doc, msg := range map[string]string{
		`{}`:                   ".zgroup: zarr_format: required",
		`{"zarr_format": 3}`:   ".zgroup: zarr_format: 3 is not 2",
		`{"zarr_format": "2"}`: `.zgroup: zarr_format: "2" is not an integer`,
		`[2]`:                  ".zgroup: not a JSON object",
	} {
		if _, err := ParseZgroup([]byte(doc)); err == nil || err.Error() != msg || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want %q", doc, err, msg)
		}
	}
}

func TestZattrs(t *testing.T) {
	attrs, err := ParseZattrs([]byte("{\n  \"b\": 1.0,\n  \"a\": [null]\n}"))
	if err != nil || string(attrs) != `{"b":1.0,"a":[null]}` {
		t.Errorf("ParseZattrs = %s, %v", attrs, err)
	}
	out, err := MarshalZattrs(attrs)
	if err != nil || string(out) != "{\n  \"b\": 1.0,\n  \"a\": [\n    null\n  ]\n}" {
		t.Errorf("MarshalZattrs = %s, %v", out, err)
	}
	for _, bad := range []string{`[]`, `{"a": }`, `{} {}`, ``} {
		if _, err := ParseZattrs([]byte(bad)); err == nil || !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), ".zattrs: attributes: ") {
			t.Errorf("ParseZattrs(%q) = %v", bad, err)
		}
	}
}

func TestConsolidated(t *testing.T) {
	doc := `{"metadata": {".zgroup": {"zarr_format": 2}, "a/.zarray": {"zarr_format": 2, "shape": [1], "chunks": [1], "dtype": "<f4", "compressor": null, "fill_value": 0.0, "order": "C", "filters": null}, "a/.zattrs": {}}, "zarr_consolidated_format": 1}`
	c, err := ParseConsolidated([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for _, e := range c.Entries {
		keys = append(keys, e.Key)
	}
	if !reflect.DeepEqual(keys, []string{".zgroup", "a/.zarray", "a/.zattrs"}) {
		t.Errorf("keys %q", keys)
	}
	if _, ok := c.Entries.Get("b/.zarray"); ok {
		t.Error("Get found a missing key")
	}
	if got := marshal(t, c); !jsonEqual(t, got, doc) {
		t.Errorf("round trip:\n%s", got)
	}

	// Updating one document re-encodes the metadata only.
	a, _ := c.Entries.Get("a/.zarray")
	arr, err := ParseZarray(a)
	if err != nil {
		t.Fatal(err)
	}
	arr.Shape = []int{2}
	b, err := arr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c.Entries[1].Doc = b
	got := marshal(t, c)
	if !strings.Contains(got, `"fill_value": 0.0`) || !jsonContains(t, got, `"zarr_consolidated_format": 1`) {
		t.Errorf("update:\n%s", got)
	}

	if got := marshal(t, &Consolidated{}); got != "{\n  \"metadata\": {},\n  \"zarr_consolidated_format\": 1\n}" {
		t.Errorf("new: %s", got)
	}

	for doc, msg := range map[string]string{
		`{"metadata": {}}`: ".zmetadata: zarr_consolidated_format: required",
		`{"metadata": {}, "zarr_consolidated_format": 2}`:                 ".zmetadata: zarr_consolidated_format: 2 is not 1",
		`{"zarr_consolidated_format": 1}`:                                 ".zmetadata: metadata: required",
		`{"metadata": [], "zarr_consolidated_format": 1}`:                 ".zmetadata: metadata: [] is not an object",
		`{"metadata": {"a": 1}, "zarr_consolidated_format": 1}`:           `.zmetadata: metadata["a"]: 1 is not an object`,
		`{"metadata": {"a": {}, "a": {}}, "zarr_consolidated_format": 1}`: `.zmetadata: metadata: "a" appears twice`,
	} {
		if _, err := ParseConsolidated([]byte(doc)); err == nil || err.Error() != msg {
			t.Errorf("%s: %v, want %q", doc, err, msg)
		}
	}
}

// The object codec of a "|O" array decides its data type, and so how its
// fill value reads.
func TestZarrayObjectCodecs(t *testing.T) {
	cases := []struct {
		codec, fill string
		want        dtype.DataType
		wantFill    []byte
	}{
		{"vlen-utf8", `0`, dtype.TypeString, []byte{}},
		{"vlen-utf8", `"n/a"`, dtype.TypeString, []byte("n/a")},
		{"vlen-bytes", `0`, dtype.TypeBytes, []byte{}},
		{"vlen-bytes", `"aGk="`, dtype.TypeBytes, []byte("hi")},
		{"json2", `0`, dtype.DataType{Kind: dtype.Object}, []byte("0")},
		{"pickle", `null`, dtype.DataType{Kind: dtype.Object}, nil},
	}
	for _, c := range cases {
		doc := `{"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "|O", "compressor": null, "order": "C",
			"fill_value": ` + c.fill + `, "filters": [{"id": "` + c.codec + `"}, {"id": "zlib"}]}`
		a, err := ParseZarray([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", c.codec, err)
			continue
		}
		if a.DataType != c.want || !reflect.DeepEqual(a.FillValue, c.wantFill) {
			t.Errorf("%s %s: %v fill %q, want %v %q", c.codec, c.fill, a.DataType, a.FillValue, c.want, c.wantFill)
		}
		if got := marshal(t, a); !jsonEqual(t, got, doc) {
			t.Errorf("%s: round trip:\n%s", c.codec, got)
		}
		if a.DataType.Kind != dtype.Object {
			a.Filters = a.Filters[1:]
			if _, err := a.Marshal(); err == nil || !strings.Contains(err.Error(), "needs its object codec as the first filter") {
				t.Errorf("%s array without its codec: %v", a.DataType, err)
			}
		}
	}
}

// TestFillText: a fill_value spelled otherwise than FormatFillV2 spells it
// (0 for an object array's empty string, a float with more digits than it
// needs) is kept as FillText and written back so, also by an ArrayV2 made
// anew with it, while it still reads as FillValue.
func TestFillText(t *testing.T) {
	for _, c := range []struct{ dtype, filters, fill, text string }{
		{`"|O"`, `[{"id":"vlen-utf8"}]`, `0`, `0`},
		{`"<f4"`, `null`, `-1.0000000200408773e+20`, `-1.0000000200408773e+20`},
		{`"<f8"`, `null`, `-1e20`, `-1e20`},
		{`"<f8"`, `null`, `0.0`, ``},
		{`"<i4"`, `null`, `7`, ``},
		{`"<f8"`, `null`, `null`, ``},
	} {
		doc := `{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":` + c.dtype + `,"compressor":null,"filters":` + c.filters + `,"order":"C","fill_value":` + c.fill + `}`
		a, err := ParseZarray([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if string(a.FillText) != c.text {
			t.Errorf("%s %s: FillText %q, want %q", c.dtype, c.fill, a.FillText, c.text)
		}
		made := &ArrayV2{Shape: a.Shape, Chunks: a.Chunks, DataType: a.DataType, Endian: a.Endian, Order: 'C',
			Filters: a.Filters, FillValue: a.FillValue, FillText: a.FillText, DimensionSeparator: "."}
		for name, m := range map[string]*ArrayV2{"parsed": a, "made": made} {
			if got := marshal(t, m); memberText(t, got, "fill_value") != c.fill {
				t.Errorf("%s %s %s: written back as\n%s", name, c.dtype, c.fill, got)
			}
		}
	}
	a, err := ParseZarray([]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<f8","compressor":null,"filters":null,"order":"C","fill_value":-1e20}`))
	if err != nil {
		t.Fatal(err)
	}
	a.FillValue = make([]byte, 8) // changed: the text no longer says it
	if got := marshal(t, a); memberText(t, got, "fill_value") != "0.0" {
		t.Errorf("a changed fill value is written with its old text:\n%s", got)
	}
}

// memberText returns a member of a JSON object as written.
func memberText(t *testing.T, doc, key string) string {
	t.Helper()
	ms, err := parseObject([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := lookup(ms, key)
	return string(v)
}
