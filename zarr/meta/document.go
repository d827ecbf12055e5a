package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// member is one name/value pair of a JSON object.
type member struct {
	key   string
	value json.RawMessage
}

// parseObject parses a JSON object, keeping its members in order.
// Duplicate names are refused: readers disagree on which one wins.
func parseObject(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var ms []member
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("invalid JSON: an object key is not a string")
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
		if seen[key] {
			return nil, fmt.Errorf("%q appears twice", key)
		}
		seen[key] = true
		ms = append(ms, member{key, value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the object")
	}
	return ms, nil
}

// encodeObject writes members as a compact JSON object.
func encodeObject(ms []member) json.RawMessage {
	out := []byte{'{'}
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, encodeString(m.key)...)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}')
}

// encodeString writes s as a JSON string, without HTML escaping.
func encodeString(s string) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // strings always encode
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// field is a modelled member and its encoding now; nil means absent.
type field struct {
	key   string
	value json.RawMessage
}

// document is what Marshal needs to write a parsed document back: its
// members as written, and the encoding of each modelled field as parsed.
// A field whose encoding has not changed is written as it was (keeping
// its position, numbers and short-hand forms, and staying absent if it
// was), so only changed values are re-encoded. The zero document is new:
// every field is written, in the order given.
type document struct {
	members []member
	parsed  map[string]json.RawMessage
}

func newDocument(ms []member, fields []field) document {
	parsed := make(map[string]json.RawMessage, len(fields))
	for _, f := range fields {
		parsed[f.key] = f.value
	}
	return document{members: ms, parsed: parsed}
}

// render writes the document, named name in errors, with its fields as
// they are now, indented with two spaces as zarr-python does. Changed
// fields keep their place; fields that were absent are appended in the
// order given.
func (d document) render(name string, fields []field) ([]byte, error) {
	changed := make(map[string]json.RawMessage)
	for _, f := range fields {
		if old, ok := d.parsed[f.key]; !ok || !bytes.Equal(old, f.value) {
			changed[f.key] = f.value
		}
	}
	out := make([]member, 0, len(d.members)+len(fields))
	for _, m := range d.members {
		value, ok := changed[m.key]
		if !ok {
			out = append(out, m)
			continue
		}
		delete(changed, m.key)
		if value != nil {
			out = append(out, member{m.key, value})
		}
	}
	for _, f := range fields {
		if value := changed[f.key]; value != nil {
			out = append(out, member{f.key, value})
		}
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, encodeObject(out), "", "  "); err != nil {
		return nil, inDoc(name, err)
	}
	return buf.Bytes(), nil
}
