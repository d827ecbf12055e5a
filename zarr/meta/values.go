package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Readers of JSON member values. Each takes the field path for its errors.

// jsonKind returns the first byte of a JSON value, which tells its type:
// '{', '[', '"', 't', 'f', 'n', or the first character of a number.
func jsonKind(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func isNull(raw json.RawMessage) bool { return jsonKind(raw) == 'n' }

// brief renders a JSON value for an error message.
func brief(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 40 {
		return string(raw[:37]) + "..."
	}
	return string(raw)
}

// parseInt reads a JSON integer: a number without fraction or exponent.
func parseInt(raw json.RawMessage, field string) (int, error) {
	if k := jsonKind(raw); k != '-' && (k < '0' || k > '9') {
		return 0, invalid("%s: %s is not an integer", field, brief(raw))
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(raw)))
	if errors.Is(err, strconv.ErrRange) {
		return 0, invalid("%s: %s is out of range", field, brief(raw))
	}
	if err != nil {
		return 0, invalid("%s: %s is not an integer", field, brief(raw))
	}
	return n, nil
}

// parseInts reads an array of JSON integers.
func parseInts(raw json.RawMessage, field string) ([]int, error) {
	elems, err := parseArray(raw, field)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(elems))
	for i, e := range elems {
		if out[i], err = parseInt(e, fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func parseArray(raw json.RawMessage, field string) ([]json.RawMessage, error) {
	var elems []json.RawMessage
	if jsonKind(raw) != '[' || json.Unmarshal(raw, &elems) != nil {
		return nil, invalid("%s: %s is not an array", field, brief(raw))
	}
	return elems, nil
}

func parseString(raw json.RawMessage, field string) (string, error) {
	var s string
	if jsonKind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", invalid("%s: %s is not a string", field, brief(raw))
	}
	return s, nil
}

func parseBool(raw json.RawMessage, field string) (bool, error) {
	var b bool
	if k := jsonKind(raw); (k != 't' && k != 'f') || json.Unmarshal(raw, &b) != nil {
		return false, invalid("%s: %s is not a boolean", field, brief(raw))
	}
	return b, nil
}

// objectValue checks that raw is a JSON object and returns it compact.
func objectValue(raw json.RawMessage, field string) (json.RawMessage, error) {
	if jsonKind(raw) != '{' {
		return nil, invalid("%s: %s is not an object", field, brief(raw))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, invalid("%s: invalid JSON: %v", field, err)
	}
	return buf.Bytes(), nil
}

// optionalObject is objectValue for a field that may be absent (nil).
func optionalObject(raw json.RawMessage, field string) (json.RawMessage, error) {
	if raw == nil {
		return nil, nil
	}
	return objectValue(raw, field)
}

func encodeInts(ns []int) json.RawMessage {
	out := []byte{'['}
	for i, n := range ns {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(n), 10)
	}
	return append(out, ']')
}

func encodeStrings(ss []*string) json.RawMessage {
	if ss == nil {
		return nil
	}
	out := []byte{'['}
	for i, s := range ss {
		if i > 0 {
			out = append(out, ',')
		}
		if s == nil {
			out = append(out, "null"...)
		} else {
			out = append(out, encodeString(*s)...)
		}
	}
	return append(out, ']')
}
