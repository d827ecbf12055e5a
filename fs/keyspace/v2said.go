package keyspace

import (
	"encoding/json"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
)

// v2SaidKey is the attribute in which the zarr.json of an array created
// through the v2 view keeps what its .zarray said that v3 metadata cannot
// hold: a null fill_value (v3 requires one) or one spelled otherwise than
// zarrfs spells it (0 for the empty string of an object array, which
// zarr-python 2 reads back as 0), and the dimension_separator the writer
// chose. Both views read it back, so the .zarray shows what was written
// after a remount too (xarray masks elements equal to the fill value: a
// null turned 0 would hide zeros), and hide it from the
// attributes they show. An attribute, not a v3 extension field: every v3
// reader accepts any attribute, while readers that predate
// `"must_understand": false` (zarr-python 3 before 3.1.4, say) refuse
// unknown fields.
const v2SaidKey = "_zarrfs_v2"

// withV2Said returns the attributes of a v3 array created from the v2
// array m, with v2SaidKey when m says what v3 cannot hold.
func withV2Said(attrs json.RawMessage, m *meta.ArrayV2) (json.RawMessage, error) {
	said := map[string]any{}
	switch {
	case m.FillValue == nil:
		said["fill_value"] = nil
	case m.FillText != nil:
		said["fill_value"] = m.FillText
	}
	if m.DimensionSeparator != "" {
		said["dimension_separator"] = m.DimensionSeparator
	}
	if len(said) == 0 {
		return attrs, nil
	}
	fields := jsonFields(attrs)
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	b, err := json.Marshal(said)
	if err != nil {
		return nil, err
	}
	fields[v2SaidKey] = b
	return json.Marshal(fields)
}

// v2Said reads v2SaidKey from a v3 array's attributes: the fill_value its
// v2 writer said (nil if v3 holds it as written), and the
// dimension_separator it chose ("" if none).
func v2Said(attrs json.RawMessage) (fill json.RawMessage, separator string) {
	said := jsonFields(jsonFields(attrs)[v2SaidKey])
	var sep string
	if json.Unmarshal(said["dimension_separator"], &sep) == nil && (sep == "." || sep == "/") {
		separator = sep
	}
	return said["fill_value"], separator
}

// withoutV2Said returns attributes as the views show them: without
// v2SaidKey (and absent if nothing else is left).
func withoutV2Said(attrs json.RawMessage) json.RawMessage {
	fields := jsonFields(attrs)
	if _, ok := fields[v2SaidKey]; !ok {
		return attrs
	}
	delete(fields, v2SaidKey)
	if len(fields) == 0 {
		return nil
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return attrs
	}
	return out
}

// keepV2Said returns the attributes written through a view, which does not
// show v2SaidKey, with the stored one: an attribute edit keeps it, and a
// writer cannot set it.
func keepV2Said(stored, written json.RawMessage) json.RawMessage {
	kept, ok := jsonFields(stored)[v2SaidKey]
	fields := jsonFields(written)
	_, set := fields[v2SaidKey]
	if !ok && !set {
		return written
	}
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	delete(fields, v2SaidKey)
	if ok {
		fields[v2SaidKey] = kept
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return written
	}
	return out
}

// withV2SaidCodecs returns the attributes of a v3 array created from the
// v2 array m, whose chunks typ and chain encode, with the filters and
// compressor m spells in v2SaidKey when the v2 view would spell the same
// codecs otherwise (a Blosc AUTOSHUFFLE, -1, is stored as the shuffle it
// means): the view then shows the .zarray as written, and a copy tool
// comparing it with its source (rsync run again) finds them equal.
func withV2SaidCodecs(attrs json.RawMessage, m *meta.ArrayV2, typ dtype.DataType, chain []meta.Codec) (json.RawMessage, error) {
	shown, ok := codec.ToV2(typ, chain, m.Chunks)
	if !ok || sameJSON(shown.Compressor, m.Compressor) && sameJSON(rawList(shown.Filters), rawList(m.Filters)) {
		return attrs, nil
	}
	fields := jsonFields(attrs)
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	said := jsonFields(fields[v2SaidKey])
	if said == nil {
		said = map[string]json.RawMessage{}
	}
	said["compressor"], said["filters"] = orNull(m.Compressor), rawList(m.Filters)
	b, err := json.Marshal(said)
	if err != nil {
		return nil, err
	}
	fields[v2SaidKey] = b
	return json.Marshal(fields)
}

// v2SaidCodecs returns the filters and compressor the v2 view shows for a
// pass-through array whose .zarray otherwise says m, stored with the
// codecs chain: those its v2 writer spelled (withV2SaidCodecs) while they
// still mean chain, else m's own.
func v2SaidCodecs(attrs json.RawMessage, m *meta.ArrayV2, chain []meta.Codec) ([]json.RawMessage, json.RawMessage) {
	said := jsonFields(jsonFields(attrs)[v2SaidKey])
	compressor, ok := said["compressor"]
	if !ok {
		return m.Filters, m.Compressor
	}
	var filters []json.RawMessage
	if json.Unmarshal(said["filters"], &filters) != nil {
		return m.Filters, m.Compressor
	}
	_, meant, err := codec.FromV2(m.DataType, m.Endian, m.Order, m.Rank(), filters, compressor)
	if err != nil || !sameJSON(marshalled(meant), marshalled(chain)) {
		return m.Filters, m.Compressor
	}
	if string(compressor) == "null" {
		compressor = nil
	}
	return filters, compressor
}

func sameJSON(a, b json.RawMessage) bool {
	return jsonEqual(orNull(a), orNull(b))
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// rawList is a list of JSON values as one JSON array (null when empty).
func rawList(l []json.RawMessage) json.RawMessage {
	if len(l) == 0 {
		return json.RawMessage("null")
	}
	b, _ := json.Marshal(l)
	return b
}

func marshalled(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
