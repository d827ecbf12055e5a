package meta

import "encoding/json"

// extension is the value of a v3 extension point (data type, chunk grid,
// chunk key encoding, codec, storage transformer): a name with an optional
// configuration, written as an object or as the short-hand name alone.
type extension struct {
	name   string
	config json.RawMessage // compact object; nil if absent
	// mustUnderstand is false only if the object says so: readers that do
	// not know the extension may then ignore it.
	mustUnderstand bool
}

func parseExtension(raw json.RawMessage, field string) (extension, error) {
	ext := extension{mustUnderstand: true}
	switch jsonKind(raw) {
	case '"':
		name, err := parseString(raw, field)
		if err == nil && name == "" {
			err = invalid("%s: the name is empty", field)
		}
		ext.name = name
		return ext, err
	case '{':
	default:
		return ext, invalid("%s: %s is neither a name nor an object with a name", field, brief(raw))
	}
	ms, err := parseObject(raw)
	if err != nil {
		return ext, invalid("%s: %v", field, err)
	}
	for _, m := range ms {
		switch m.key {
		case "name":
			ext.name, err = parseString(m.value, field+".name")
		case "configuration":
			// Some writers spell an absent configuration as null.
			if !isNull(m.value) {
				ext.config, err = objectValue(m.value, field+".configuration")
			}
		case "must_understand":
			ext.mustUnderstand, err = parseBool(m.value, field+".must_understand")
		default:
			err = invalid("%s: unknown member %q", field, m.key)
		}
		if err != nil {
			return ext, err
		}
	}
	if ext.name == "" {
		return ext, invalid("%s.name: required, as a non-empty string", field)
	}
	return ext, nil
}

// requireUnderstood refuses "must_understand": false where the v3 spec
// does not allow it (data type, chunk grid, chunk key encoding).
func (e extension) requireUnderstood(field string) error {
	if !e.mustUnderstand {
		return invalid("%s.must_understand: false is not allowed for this extension point", field)
	}
	return nil
}

// configMembers returns the members of the configuration, in order.
func (e extension) configMembers(field string) ([]member, error) {
	if e.config == nil {
		return nil, nil
	}
	ms, err := parseObject(e.config)
	if err != nil {
		return nil, invalid("%s.configuration: %v", field, err)
	}
	return ms, nil
}

func encodeExtension(name string, config json.RawMessage) json.RawMessage {
	ms := []member{{"name", encodeString(name)}}
	if config != nil {
		ms = append(ms, member{"configuration", config})
	}
	return encodeObject(ms)
}

// checkExtensionField accepts a member of a zarr.json that this package
// does not know only if it is an object marked "must_understand": false:
// the v3 spec says readers must fail on any other unrecognised field.
func checkExtensionField(m member) error {
	if jsonKind(m.value) == '{' {
		ms, err := parseObject(m.value)
		if err != nil {
			return invalid("%s: %v", m.key, err)
		}
		for _, x := range ms {
			if x.key == "must_understand" && jsonKind(x.value) == 'f' {
				return nil
			}
		}
	}
	return unsupported(`%q: unknown field; only fields marked "must_understand": false may be ignored`, m.key)
}
