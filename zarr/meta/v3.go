package meta

import "encoding/json"

// NodeV3 is a parsed zarr.json: an *ArrayV3 or a *GroupV3.
type NodeV3 interface {
	// Marshal validates the node and writes its zarr.json.
	Marshal() ([]byte, error)
	// SetAttributes replaces the attributes object; nil removes the field.
	SetAttributes(attrs json.RawMessage) error
	nodeV3()
}

// ParseV3 parses and validates a zarr.json.
func ParseV3(b []byte) (NodeV3, error) {
	n, err := parseV3(b)
	if err != nil {
		return nil, inDoc(docV3, err)
	}
	return n, nil
}

func parseV3(b []byte) (NodeV3, error) {
	ms, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	if err := checkFormat(ms, 3); err != nil {
		return nil, err
	}
	nodeType, ok := lookup(ms, "node_type")
	if !ok {
		return nil, invalid("node_type: required")
	}
	switch t, _ := parseString(nodeType, "node_type"); t {
	case "array":
		return parseArrayV3(ms)
	case "group":
		return parseGroupV3(ms)
	}
	return nil, invalid(`node_type: %s is neither "array" nor "group"`, brief(nodeType))
}

// lookup returns the value of the member named key.
func lookup(ms []member, key string) (json.RawMessage, bool) {
	for _, m := range ms {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

// GroupV3 is the zarr.json of a group.
type GroupV3 struct {
	// Attributes is the attributes object as compact JSON; nil if absent.
	Attributes json.RawMessage
	// Consolidated is the consolidated metadata zarr-python 3 writes
	// inline ("consolidated_metadata"): the zarr.json documents of the
	// group's descendants by path relative to the group. It is nil if
	// absent or null. Readers that trust it do not look at the documents
	// themselves, so it must be kept in step with them or removed.
	Consolidated Entries
	doc          document
}

func (*GroupV3) nodeV3() {}

func parseGroupV3(ms []member) (*GroupV3, error) {
	g := &GroupV3{}
	for _, m := range ms {
		var err error
		switch m.key {
		case "zarr_format", "node_type":
			// checked by parseV3
		case "attributes":
			g.Attributes, err = objectValue(m.value, "attributes")
		case "consolidated_metadata":
			g.Consolidated, err = parseInlineConsolidated(m.value)
		default:
			err = checkExtensionField(m)
		}
		if err != nil {
			return nil, err
		}
	}
	fields, err := g.fields()
	if err != nil {
		return nil, err
	}
	g.doc = newDocument(ms, fields)
	return g, nil
}

func (g *GroupV3) fields() ([]field, error) {
	attrs, err := optionalObject(g.Attributes, "attributes")
	if err != nil {
		return nil, err
	}
	consolidated, err := encodeInlineConsolidated(g.Consolidated)
	if err != nil {
		return nil, err
	}
	return []field{
		{"zarr_format", json.RawMessage("3")},
		{"node_type", json.RawMessage(`"group"`)},
		{"attributes", attrs},
		{"consolidated_metadata", consolidated},
	}, nil
}

// Marshal validates g and writes its zarr.json.
func (g *GroupV3) Marshal() ([]byte, error) {
	fields, err := g.fields()
	if err != nil {
		return nil, inDoc(docV3, err)
	}
	return g.doc.render(docV3, fields)
}

// SetAttributes replaces the attributes object; nil removes the field.
func (g *GroupV3) SetAttributes(attrs json.RawMessage) error {
	a, err := optionalObject(attrs, "attributes")
	if err != nil {
		return inDoc(docV3, err)
	}
	g.Attributes = a
	return nil
}
