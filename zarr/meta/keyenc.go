package meta

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Names of the chunk key encodings.
const (
	KeyEncodingDefault = "default" // v3 keys: "c/1/2", and "c" for 0-d arrays
	KeyEncodingV2      = "v2"      // v2 keys: "1.2", and "0" for 0-d arrays
)

// KeyEncoding maps chunk grid coordinates to chunk keys (relative to the
// array) and back. v2 arrays use the "v2" encoding with their
// dimension_separator.
type KeyEncoding struct {
	Name      string // KeyEncodingDefault or KeyEncodingV2
	Separator string // "/" or "."
}

// defaultSeparator is the separator an encoding has when its
// configuration does not name one.
func defaultSeparator(name string) string {
	if name == KeyEncodingDefault {
		return "/"
	}
	return "."
}

func (k KeyEncoding) validate() error {
	if k.Name != KeyEncodingDefault && k.Name != KeyEncodingV2 {
		return unsupported("chunk_key_encoding: %q is not supported (only %q and %q)", k.Name, KeyEncodingDefault, KeyEncodingV2)
	}
	if k.Separator != "/" && k.Separator != "." {
		return invalid(`chunk_key_encoding.configuration.separator: %q is neither "/" nor "."`, k.Separator)
	}
	return nil
}

// Key returns the key of the chunk at coords, which must be non-negative.
func (k KeyEncoding) Key(coords []int) string {
	var buf [64]byte
	b := buf[:0]
	if k.Name == KeyEncodingDefault {
		b = append(b, 'c')
		for _, c := range coords {
			b = append(b, k.Separator...)
			b = strconv.AppendInt(b, int64(c), 10)
		}
		return string(b)
	}
	if len(coords) == 0 {
		return "0"
	}
	for i, c := range coords {
		if i > 0 {
			b = append(b, k.Separator...)
		}
		b = strconv.AppendInt(b, int64(c), 10)
	}
	return string(b)
}

// Parse returns the coordinates of the chunk of an ndim-dimensional array
// stored at key, and false if key is not exactly what Key writes: no
// signs, no leading zeros, no empty or extra parts. It allocates only the
// result.
func (k KeyEncoding) Parse(key string, ndim int) ([]int, bool) {
	if ndim < 0 || k.Separator == "" {
		return nil, false
	}
	if k.Name == KeyEncodingDefault {
		rest, ok := strings.CutPrefix(key, "c")
		if !ok {
			return nil, false
		}
		if ndim == 0 {
			return []int{}, rest == ""
		}
		if key, ok = strings.CutPrefix(rest, k.Separator); !ok {
			return nil, false
		}
	} else if ndim == 0 {
		return []int{}, key == "0"
	}
	coords := make([]int, ndim)
	for i := range coords {
		part := key
		if i < ndim-1 {
			var ok bool
			if part, key, ok = strings.Cut(key, k.Separator); !ok {
				return nil, false
			}
		}
		n, ok := parseIndex(part)
		if !ok {
			return nil, false
		}
		coords[i] = n
	}
	return coords, true
}

// parseIndex parses a canonical non-negative decimal that fits an int.
func parseIndex(s string) (int, bool) {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		d := int(s[i] - '0')
		if d < 0 || d > 9 || n > (math.MaxInt-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func parseKeyEncoding(raw json.RawMessage) (KeyEncoding, error) {
	const field = "chunk_key_encoding"
	ext, err := parseExtension(raw, field)
	if err != nil {
		return KeyEncoding{}, err
	}
	if err := ext.requireUnderstood(field); err != nil {
		return KeyEncoding{}, err
	}
	k := KeyEncoding{Name: ext.name, Separator: defaultSeparator(ext.name)}
	config, err := ext.configMembers(field)
	if err != nil {
		return KeyEncoding{}, err
	}
	for _, m := range config {
		if m.key != "separator" {
			return KeyEncoding{}, invalid("%s.configuration: unknown member %q", field, m.key)
		}
		if k.Separator, err = parseString(m.value, field+".configuration.separator"); err != nil {
			return KeyEncoding{}, err
		}
	}
	return k, k.validate()
}

func (k KeyEncoding) encode() json.RawMessage {
	config := encodeObject([]member{{"separator", encodeString(k.Separator)}})
	return encodeExtension(k.Name, config)
}
