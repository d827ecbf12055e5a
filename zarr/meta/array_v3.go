package meta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/nd"
)

// ArrayV3 is the zarr.json of an array.
type ArrayV3 struct {
	Shape    []int
	DataType dtype.DataType
	// ChunkShape is the chunk_shape of the regular chunk grid, the only
	// grid zarrfs supports.
	ChunkShape  []int
	KeyEncoding KeyEncoding
	// FillValue is one decoded element (see dtype.ParseFillV3).
	FillValue []byte
	// Codecs are the codecs in order, with compact configurations.
	Codecs []Codec
	// DimensionNames has one entry per dimension, nil for an unnamed one;
	// the slice is nil if the field is absent.
	DimensionNames []*string
	// Attributes is the attributes object as compact JSON; nil if absent.
	Attributes json.RawMessage
	doc        document
}

func (*ArrayV3) nodeV3() {}

// Rank is the number of dimensions.
func (a *ArrayV3) Rank() int { return len(a.Shape) }

// GridShape is the number of chunks along each dimension.
func (a *ArrayV3) GridShape() []int { return nd.Grid(a.Shape, a.ChunkShape) }

// Clone returns a deep copy of a.
func (a *ArrayV3) Clone() *ArrayV3 {
	b := *a
	b.Shape = slices.Clone(a.Shape)
	b.ChunkShape = slices.Clone(a.ChunkShape)
	b.FillValue = bytes.Clone(a.FillValue)
	b.Codecs = cloneCodecs(a.Codecs)
	if a.DimensionNames != nil {
		b.DimensionNames = make([]*string, len(a.DimensionNames))
		for i, name := range a.DimensionNames {
			if name != nil {
				b.DimensionNames[i] = new(*name)
			}
		}
	}
	b.Attributes = bytes.Clone(a.Attributes)
	return &b
}

// WithChunking returns a copy of a with another chunk shape and codecs,
// everything else unchanged: the v3 view presents a sharded array this
// way, with its inner chunks as the chunks.
func (a *ArrayV3) WithChunking(chunkShape []int, codecs []Codec) *ArrayV3 {
	b := a.Clone()
	b.ChunkShape = slices.Clone(chunkShape)
	b.Codecs = cloneCodecs(codecs)
	return b
}

func cloneCodecs(cs []Codec) []Codec {
	if cs == nil {
		return nil
	}
	out := make([]Codec, len(cs))
	for i, c := range cs {
		out[i] = Codec{Name: c.Name, Configuration: bytes.Clone(c.Configuration)}
	}
	return out
}

// SetAttributes replaces the attributes object; nil removes the field.
func (a *ArrayV3) SetAttributes(attrs json.RawMessage) error {
	v, err := optionalObject(attrs, "attributes")
	if err != nil {
		return inDoc(docV3, err)
	}
	a.Attributes = v
	return nil
}

// Marshal validates a and writes its zarr.json.
func (a *ArrayV3) Marshal() ([]byte, error) {
	fields, err := a.fields()
	if err != nil {
		return nil, inDoc(docV3, err)
	}
	return a.doc.render(docV3, fields)
}

func parseArrayV3(ms []member) (*ArrayV3, error) {
	a := &ArrayV3{}
	values := make(map[string]json.RawMessage)
	for _, m := range ms {
		var err error
		switch m.key {
		case "zarr_format", "node_type":
			// checked by parseV3
		case "shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs":
			values[m.key] = m.value
		case "dimension_names":
			a.DimensionNames, err = parseNames(m.value)
		case "attributes":
			a.Attributes, err = objectValue(m.value, "attributes")
		case "storage_transformers":
			err = checkStorageTransformers(m.value)
		default:
			err = checkExtensionField(m)
		}
		if err != nil {
			return nil, err
		}
	}
	// In this order, so that fill_value is read with a known data type.
	for _, key := range []string{"shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"} {
		raw, ok := values[key]
		if !ok {
			return nil, invalid("%s: required", key)
		}
		var err error
		switch key {
		case "shape":
			a.Shape, err = parseInts(raw, key)
		case "data_type":
			if a.DataType, err = dtype.ParseV3(raw); err != nil {
				err = fromDtype(err)
			}
		case "chunk_grid":
			a.ChunkShape, err = parseChunkGrid(raw)
		case "chunk_key_encoding":
			a.KeyEncoding, err = parseKeyEncoding(raw)
		case "fill_value":
			if a.FillValue, err = dtype.ParseFillV3(a.DataType, raw); err != nil {
				err = fromDtype(err)
			}
		case "codecs":
			a.Codecs, err = parseCodecs(raw)
		}
		if err != nil {
			return nil, err
		}
	}
	fields, err := a.fields()
	if err != nil {
		return nil, err
	}
	a.doc = newDocument(ms, fields)
	return a, nil
}

func (a *ArrayV3) validate() error {
	if err := checkGrid(a.Shape, a.ChunkShape, "chunk_grid.configuration.chunk_shape"); err != nil {
		return err
	}
	if err := a.KeyEncoding.validate(); err != nil {
		return err
	}
	if len(a.Codecs) == 0 {
		return invalid("codecs: empty, but an array -> bytes codec is required")
	}
	if a.DimensionNames != nil && len(a.DimensionNames) != len(a.Shape) {
		return invalid("dimension_names: has %d names, shape has %d dimensions", len(a.DimensionNames), len(a.Shape))
	}
	return nil
}

// fields validates a and returns its modelled members.
func (a *ArrayV3) fields() ([]field, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	dataType, err := dtype.FormatV3(a.DataType)
	if err != nil {
		return nil, fromDtype(err)
	}
	fill, err := dtype.FormatFillV3(a.DataType, a.FillValue)
	if err != nil {
		return nil, fromDtype(err)
	}
	codecs, err := encodeCodecs(a.Codecs)
	if err != nil {
		return nil, err
	}
	attrs, err := optionalObject(a.Attributes, "attributes")
	if err != nil {
		return nil, err
	}
	grid := encodeObject([]member{{"chunk_shape", encodeInts(a.ChunkShape)}})
	return []field{
		{"zarr_format", json.RawMessage("3")},
		{"node_type", json.RawMessage(`"array"`)},
		{"shape", encodeInts(a.Shape)},
		{"data_type", dataType},
		{"chunk_grid", encodeExtension("regular", grid)},
		{"chunk_key_encoding", a.KeyEncoding.encode()},
		{"fill_value", fill},
		{"codecs", codecs},
		{"attributes", attrs},
		{"dimension_names", encodeStrings(a.DimensionNames)},
	}, nil
}

func parseChunkGrid(raw json.RawMessage) ([]int, error) {
	const field = "chunk_grid"
	ext, err := parseExtension(raw, field)
	if err != nil {
		return nil, err
	}
	if err := ext.requireUnderstood(field); err != nil {
		return nil, err
	}
	if ext.name != "regular" {
		return nil, unsupported(`%s: %q is not supported (only "regular")`, field, ext.name)
	}
	config, err := ext.configMembers(field)
	if err != nil {
		return nil, err
	}
	var chunks []int
	for _, m := range config {
		if m.key != "chunk_shape" {
			return nil, invalid("%s.configuration: unknown member %q", field, m.key)
		}
		if chunks, err = parseInts(m.value, field+".configuration.chunk_shape"); err != nil {
			return nil, err
		}
	}
	if chunks == nil {
		return nil, invalid("%s.configuration.chunk_shape: required", field)
	}
	return chunks, nil
}

func parseCodecs(raw json.RawMessage) ([]Codec, error) {
	elems, err := parseArray(raw, "codecs")
	if err != nil {
		return nil, err
	}
	codecs := make([]Codec, len(elems))
	for i, e := range elems {
		// must_understand is dropped: Codec cannot carry it.
		ext, err := parseExtension(e, fmt.Sprintf("codecs[%d]", i))
		if err != nil {
			return nil, err
		}
		codecs[i] = Codec{Name: ext.name, Configuration: ext.config}
	}
	return codecs, nil
}

func encodeCodecs(codecs []Codec) (json.RawMessage, error) {
	out := []byte{'['}
	for i, c := range codecs {
		field := fmt.Sprintf("codecs[%d]", i)
		if c.Name == "" {
			return nil, invalid("%s.name: required, as a non-empty string", field)
		}
		config, err := optionalObject(c.Configuration, field+".configuration")
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, encodeExtension(c.Name, config)...)
	}
	return append(out, ']'), nil
}

// checkStorageTransformers refuses storage transformers unless they may be
// ignored: zarrfs implements none.
func checkStorageTransformers(raw json.RawMessage) error {
	elems, err := parseArray(raw, "storage_transformers")
	if err != nil {
		return err
	}
	for i, e := range elems {
		field := fmt.Sprintf("storage_transformers[%d]", i)
		ext, err := parseExtension(e, field)
		if err != nil {
			return err
		}
		if ext.mustUnderstand {
			return unsupported("%s: %q is not supported", field, ext.name)
		}
	}
	return nil
}

func parseNames(raw json.RawMessage) ([]*string, error) {
	if isNull(raw) {
		return nil, nil // the same as absent
	}
	elems, err := parseArray(raw, "dimension_names")
	if err != nil {
		return nil, err
	}
	names := make([]*string, len(elems))
	for i, e := range elems {
		if isNull(e) {
			continue
		}
		name, err := parseString(e, fmt.Sprintf("dimension_names[%d]", i))
		if err != nil {
			return nil, invalid("dimension_names[%d]: %s is neither a string nor null", i, brief(e))
		}
		names[i] = &name
	}
	return names, nil
}
