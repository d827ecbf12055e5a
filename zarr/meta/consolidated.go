package meta

import (
	"encoding/json"
	"fmt"
)

// Entry is one document of consolidated metadata.
type Entry struct {
	// Key names the document: its store key relative to the root in a v2
	// .zmetadata (".zgroup", "a/.zarray"), the node's path relative to
	// the group in v3 consolidated_metadata ("a", "a/b").
	Key string
	// Doc is the document as compact JSON.
	Doc json.RawMessage
}

// Entries are consolidated metadata documents, in document order.
type Entries []Entry

// Get returns the document with the given key.
func (es Entries) Get(key string) (json.RawMessage, bool) {
	for _, e := range es {
		if e.Key == key {
			return e.Doc, true
		}
	}
	return nil, false
}

func parseEntries(raw json.RawMessage, field string) (Entries, error) {
	if jsonKind(raw) != '{' {
		return nil, invalid("%s: %s is not an object", field, brief(raw))
	}
	ms, err := parseObject(raw)
	if err != nil {
		return nil, invalid("%s: %v", field, err)
	}
	es := make(Entries, len(ms))
	for i, m := range ms {
		doc, err := objectValue(m.value, fmt.Sprintf("%s[%q]", field, m.key))
		if err != nil {
			return nil, err
		}
		es[i] = Entry{Key: m.key, Doc: doc}
	}
	return es, nil
}

func encodeEntries(es Entries, field string) (json.RawMessage, error) {
	ms := make([]member, len(es))
	seen := make(map[string]bool, len(es))
	for i, e := range es {
		entryField := fmt.Sprintf("%s[%q]", field, e.Key)
		if seen[e.Key] {
			return nil, invalid("%s: appears twice", entryField)
		}
		seen[e.Key] = true
		doc, err := objectValue(e.Doc, entryField)
		if err != nil {
			return nil, err
		}
		ms[i] = member{e.Key, doc}
	}
	return encodeObject(ms), nil
}

// parseInlineConsolidated reads the consolidated_metadata of a v3 group.
func parseInlineConsolidated(raw json.RawMessage) (Entries, error) {
	const field = "consolidated_metadata"
	if isNull(raw) {
		return nil, nil // zarr-python 3 writes null for "not consolidated"
	}
	if jsonKind(raw) != '{' {
		return nil, invalid("%s: %s is neither an object nor null", field, brief(raw))
	}
	ms, err := parseObject(raw)
	if err != nil {
		return nil, invalid("%s: %v", field, err)
	}
	var kind string
	var es Entries
	for _, m := range ms {
		switch m.key {
		case "kind":
			kind, err = parseString(m.value, field+".kind")
		case "must_understand":
			_, err = parseBool(m.value, field+".must_understand")
		case "metadata":
			es, err = parseEntries(m.value, field+".metadata")
		default:
			err = invalid("%s: unknown member %q", field, m.key)
		}
		if err != nil {
			return nil, err
		}
	}
	if kind != "inline" {
		return nil, unsupported(`%s.kind: %q is not supported (only "inline")`, field, kind)
	}
	if es == nil {
		return nil, invalid("%s.metadata: required", field)
	}
	return es, nil
}

func encodeInlineConsolidated(es Entries) (json.RawMessage, error) {
	if es == nil {
		return nil, nil
	}
	metadata, err := encodeEntries(es, "consolidated_metadata.metadata")
	if err != nil {
		return nil, err
	}
	return encodeObject([]member{
		{"kind", json.RawMessage(`"inline"`)},
		{"must_understand", json.RawMessage("false")},
		{"metadata", metadata},
	}), nil
}

// Consolidated is a v2 .zmetadata: the metadata documents of a hierarchy
// in one object, as zarr-python's consolidate_metadata writes it.
type Consolidated struct {
	// Entries are the documents by store key relative to the root.
	Entries Entries
	doc     document
}

// ParseConsolidated parses a .zmetadata document.
func ParseConsolidated(b []byte) (*Consolidated, error) {
	c, err := parseConsolidated(b)
	if err != nil {
		return nil, inDoc(docConsolidated, err)
	}
	return c, nil
}

func parseConsolidated(b []byte) (*Consolidated, error) {
	ms, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	format, ok := lookup(ms, "zarr_consolidated_format")
	if !ok {
		return nil, invalid("zarr_consolidated_format: required")
	}
	if n, err := parseInt(format, "zarr_consolidated_format"); err != nil {
		return nil, err
	} else if n != 1 {
		return nil, unsupported("zarr_consolidated_format: %d is not 1", n)
	}
	metadata, ok := lookup(ms, "metadata")
	if !ok {
		return nil, invalid("metadata: required")
	}
	c := &Consolidated{}
	if c.Entries, err = parseEntries(metadata, "metadata"); err != nil {
		return nil, err
	}
	fields, err := c.fields()
	if err != nil {
		return nil, err
	}
	c.doc = newDocument(ms, fields)
	return c, nil
}

func (c *Consolidated) fields() ([]field, error) {
	es := c.Entries
	if es == nil {
		es = Entries{} // "metadata" is required, even if empty
	}
	metadata, err := encodeEntries(es, "metadata")
	if err != nil {
		return nil, err
	}
	return []field{
		{"metadata", metadata},
		{"zarr_consolidated_format", json.RawMessage("1")},
	}, nil
}

// Marshal validates c and writes its .zmetadata.
func (c *Consolidated) Marshal() ([]byte, error) {
	fields, err := c.fields()
	if err != nil {
		return nil, inDoc(docConsolidated, err)
	}
	return c.doc.render(docConsolidated, fields)
}
