package meta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/nd"
)

// ArrayV2 is the .zarray of a v2 array. Unknown keys are kept as written.
type ArrayV2 struct {
	Shape  []int
	Chunks []int
	// DataType and Endian come from dtype: Endian is the byte order of the
	// stored elements, dtype.NoEndian for types it does not apply to. A
	// "|O" array whose first filter is the object codec vlen-utf8 or
	// vlen-bytes has data type dtype.TypeString or dtype.TypeBytes, as in
	// zarr-python 3; other object arrays are dtype.Object.
	DataType dtype.DataType
	Endian   dtype.Endian
	// Order is the layout within a chunk: 'C' (row-major) or 'F'.
	Order byte
	// Compressor is the numcodecs configuration (compact JSON with an
	// "id"), nil for null.
	Compressor json.RawMessage
	// Filters are numcodecs configurations (compact JSON, each with an
	// "id"), nil for null.
	Filters []json.RawMessage
	// FillValue is one decoded element (see dtype.ParseFillV2), nil for
	// null: no fill value.
	FillValue []byte
	// FillText is fill_value as the writer spelled it (compact) when that
	// is not how dtype.FormatFillV2 spells FillValue: 0 for the empty
	// string of an object array, as zarr-python 2 writes it, or a float
	// with more digits than it needs. Marshal writes it while it still
	// reads as FillValue.
	FillText json.RawMessage
	// DimensionSeparator is "." (the default) or "/".
	DimensionSeparator string
	doc                document
}

// Rank is the number of dimensions.
func (a *ArrayV2) Rank() int { return len(a.Shape) }

// GridShape is the number of chunks along each dimension.
func (a *ArrayV2) GridShape() []int { return nd.Grid(a.Shape, a.Chunks) }

// KeyEncoding is the encoding of the array's chunk keys.
func (a *ArrayV2) KeyEncoding() KeyEncoding {
	return KeyEncoding{Name: KeyEncodingV2, Separator: a.DimensionSeparator}
}

// Clone returns a deep copy of a.
func (a *ArrayV2) Clone() *ArrayV2 {
	b := *a
	b.Shape = slices.Clone(a.Shape)
	b.Chunks = slices.Clone(a.Chunks)
	b.Compressor = bytes.Clone(a.Compressor)
	if a.Filters != nil {
		b.Filters = make([]json.RawMessage, len(a.Filters))
		for i, f := range a.Filters {
			b.Filters[i] = bytes.Clone(f)
		}
	}
	b.FillValue = bytes.Clone(a.FillValue)
	b.FillText = bytes.Clone(a.FillText)
	return &b
}

// ParseZarray parses and validates a .zarray. Structured data types are
// unsupported. Missing compressor, fill_value and filters mean null, and
// a missing order means "C".
func ParseZarray(b []byte) (*ArrayV2, error) {
	a, err := parseZarray(b)
	if err != nil {
		return nil, inDoc(docZarray, err)
	}
	return a, nil
}

func parseZarray(b []byte) (*ArrayV2, error) {
	ms, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	if err := checkFormat(ms, 2); err != nil {
		return nil, err
	}
	a := &ArrayV2{Order: 'C', DimensionSeparator: "."}
	for _, key := range []string{"shape", "chunks", "dtype"} {
		if _, ok := lookup(ms, key); !ok {
			return nil, invalid("%s: required", key)
		}
	}
	var fill json.RawMessage
	for _, m := range ms {
		switch m.key {
		case "shape":
			a.Shape, err = parseInts(m.value, m.key)
		case "chunks":
			a.Chunks, err = parseInts(m.value, m.key)
		case "dtype":
			a.DataType, a.Endian, err = parseTypestr(m.value)
		case "compressor":
			if !isNull(m.value) {
				a.Compressor, err = numcodec(m.value, m.key)
			}
		case "filters":
			a.Filters, err = parseFilters(m.value)
		case "fill_value":
			fill = m.value // read once the data type is known
		case "order":
			a.Order, err = parseOrder(m.value)
		case "dimension_separator":
			a.DimensionSeparator, err = parseString(m.value, m.key)
		}
		if err != nil {
			return nil, err
		}
	}
	if t, ok := objectTypes[objectCodec(a.Filters)]; ok && a.DataType.Kind == dtype.Object {
		a.DataType = t
	}
	if fill != nil {
		if a.FillValue, err = dtype.ParseFillV2(a.DataType, fill); err != nil {
			return nil, fromDtype(err)
		}
		var written bytes.Buffer
		json.Compact(&written, fill) // valid: it parsed
		if canonical, err := dtype.FormatFillV2(a.DataType, a.FillValue); err != nil || !bytes.Equal(canonical, written.Bytes()) {
			a.FillText = written.Bytes()
		}
	}
	fields, err := a.fields()
	if err != nil {
		return nil, err
	}
	a.doc = newDocument(ms, fields)
	return a, nil
}

func parseTypestr(raw json.RawMessage) (dtype.DataType, dtype.Endian, error) {
	if jsonKind(raw) == '[' {
		return dtype.DataType{}, 0, unsupported("dtype: structured data types are not supported")
	}
	s, err := parseString(raw, "dtype")
	if err != nil {
		return dtype.DataType{}, 0, err
	}
	d, e, err := dtype.ParseV2(s)
	if err != nil {
		return dtype.DataType{}, 0, fromDtype(err)
	}
	return d, e, nil
}

func parseOrder(raw json.RawMessage) (byte, error) {
	s, err := parseString(raw, "order")
	if err != nil {
		return 0, err
	}
	if s != "C" && s != "F" {
		return 0, invalid(`order: %q is neither "C" nor "F"`, s)
	}
	return s[0], nil
}

func parseFilters(raw json.RawMessage) ([]json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	elems, err := parseArray(raw, "filters")
	if err != nil {
		return nil, err
	}
	filters := make([]json.RawMessage, len(elems))
	for i, e := range elems {
		if filters[i], err = numcodec(e, fmt.Sprintf("filters[%d]", i)); err != nil {
			return nil, err
		}
	}
	return filters, nil
}

// objectTypes are the data types of "|O" arrays by object codec.
var objectTypes = map[string]dtype.DataType{
	"vlen-utf8":  dtype.TypeString,
	"vlen-bytes": dtype.TypeBytes,
}

// objectCodec returns the id of the first filter, where zarr-python puts
// the object codec of "|O" arrays, or "".
func objectCodec(filters []json.RawMessage) string {
	if len(filters) == 0 {
		return ""
	}
	ms, err := parseObject(filters[0])
	if err != nil {
		return ""
	}
	id, _ := lookup(ms, "id")
	s, _ := parseString(id, "")
	return s
}

// numcodec checks a numcodecs configuration: an object with a string
// "id". It returns the configuration compact.
func numcodec(raw json.RawMessage, field string) (json.RawMessage, error) {
	config, err := objectValue(raw, field)
	if err != nil {
		return nil, err
	}
	ms, err := parseObject(config)
	if err != nil {
		return nil, invalid("%s: %v", field, err)
	}
	id, ok := lookup(ms, "id")
	if !ok {
		return nil, invalid("%s.id: required", field)
	}
	if s, err := parseString(id, field+".id"); err != nil {
		return nil, err
	} else if s == "" {
		return nil, invalid("%s.id: empty", field)
	}
	return config, nil
}

func (a *ArrayV2) validate() error {
	if err := checkGrid(a.Shape, a.Chunks, "chunks"); err != nil {
		return err
	}
	if a.Order != 'C' && a.Order != 'F' {
		return invalid(`order: %q is neither "C" nor "F"`, a.Order)
	}
	if a.DimensionSeparator != "." && a.DimensionSeparator != "/" {
		return invalid(`dimension_separator: %q is neither "." nor "/"`, a.DimensionSeparator)
	}
	if a.DataType.Kind == dtype.String || a.DataType.Kind == dtype.Bytes {
		if t := objectTypes[objectCodec(a.Filters)]; t != a.DataType {
			return invalid("filters: a %s array needs its object codec as the first filter", a.DataType)
		}
	}
	return nil
}

// fields validates a and returns its modelled members, in the sorted order
// zarr-python 2 writes them.
func (a *ArrayV2) fields() ([]field, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	typestr, err := dtype.FormatV2(a.DataType, a.Endian)
	if err != nil {
		return nil, fromDtype(err)
	}
	fill, err := dtype.FormatFillV2(a.DataType, a.FillValue)
	if err != nil {
		return nil, fromDtype(err)
	}
	if a.FillText != nil {
		if v, err := dtype.ParseFillV2(a.DataType, a.FillText); err == nil && bytes.Equal(v, a.FillValue) && (v == nil) == (a.FillValue == nil) {
			fill = a.FillText
		}
	}
	compressor := json.RawMessage("null")
	if a.Compressor != nil {
		if compressor, err = numcodec(a.Compressor, "compressor"); err != nil {
			return nil, err
		}
	}
	filters := json.RawMessage("null")
	if a.Filters != nil {
		filters = []byte{'['}
		for i, f := range a.Filters {
			config, err := numcodec(f, fmt.Sprintf("filters[%d]", i))
			if err != nil {
				return nil, err
			}
			if i > 0 {
				filters = append(filters, ',')
			}
			filters = append(filters, config...)
		}
		filters = append(filters, ']')
	}
	return []field{
		{"chunks", encodeInts(a.Chunks)},
		{"compressor", compressor},
		{"dimension_separator", encodeString(a.DimensionSeparator)},
		{"dtype", encodeString(typestr)},
		{"fill_value", fill},
		{"filters", filters},
		{"order", encodeString(string(a.Order))},
		{"shape", encodeInts(a.Shape)},
		{"zarr_format", json.RawMessage("2")},
	}, nil
}

// Marshal validates a and writes its .zarray.
func (a *ArrayV2) Marshal() ([]byte, error) {
	fields, err := a.fields()
	if err != nil {
		return nil, inDoc(docZarray, err)
	}
	return a.doc.render(docZarray, fields)
}

// GroupV2 is the .zgroup of a v2 group. Unknown keys are kept as written.
type GroupV2 struct {
	doc document
}

// ParseZgroup parses and validates a .zgroup.
func ParseZgroup(b []byte) (*GroupV2, error) {
	ms, err := parseObject(b)
	if err == nil {
		err = checkFormat(ms, 2)
	}
	if err != nil {
		return nil, inDoc(docZgroup, err)
	}
	g := &GroupV2{}
	g.doc = newDocument(ms, g.fields())
	return g, nil
}

func (g *GroupV2) fields() []field {
	return []field{{"zarr_format", json.RawMessage("2")}}
}

// Marshal writes the .zgroup.
func (g *GroupV2) Marshal() ([]byte, error) { return g.doc.render(docZgroup, g.fields()) }

// ParseZattrs parses a .zattrs (or any attributes object) and returns it
// compact.
func ParseZattrs(b []byte) (json.RawMessage, error) {
	attrs, err := objectValue(b, "attributes")
	if err != nil {
		return nil, inDoc(docZattrs, err)
	}
	return attrs, nil
}

// MarshalZattrs writes attributes as a .zattrs document.
func MarshalZattrs(attrs json.RawMessage) ([]byte, error) {
	attrs, err := objectValue(attrs, "attributes")
	if err != nil {
		return nil, inDoc(docZattrs, err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, attrs, "", "  "); err != nil {
		return nil, inDoc(docZattrs, err)
	}
	return buf.Bytes(), nil
}

// checkFormat checks the zarr_format of a document.
func checkFormat(ms []member, want int) error {
	raw, ok := lookup(ms, "zarr_format")
	if !ok {
		return invalid("zarr_format: required")
	}
	n, err := parseInt(raw, "zarr_format")
	if err != nil {
		return err
	}
	if n != want {
		return invalid("zarr_format: %d is not %d", n, want)
	}
	return nil
}
