package dtype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrUnknown is returned for data types zarrfs does not implement.
var ErrUnknown = errors.New("unknown data type")

var v3Names = map[string]DataType{
	"bool":       TypeBool,
	"int8":       TypeInt8,
	"int16":      TypeInt16,
	"int32":      TypeInt32,
	"int64":      TypeInt64,
	"uint8":      TypeUint8,
	"uint16":     TypeUint16,
	"uint32":     TypeUint32,
	"uint64":     TypeUint64,
	"float16":    TypeFloat16,
	"float32":    TypeFloat32,
	"float64":    TypeFloat64,
	"complex64":  TypeComplex64,
	"complex128": TypeComplex128,
	// Extensions written by zarr-python 3 and zarrs.
	"string":                TypeString,
	"bytes":                 TypeBytes,
	"variable_length_bytes": TypeBytes,
	"int2":                  {Kind: Int, Size: 1, Bits: 2},
	"int4":                  {Kind: Int, Size: 1, Bits: 4},
	"uint2":                 {Kind: Uint, Size: 1, Bits: 2},
	"uint4":                 {Kind: Uint, Size: 1, Bits: 4},
}

// ParseV3 parses the data_type field of a v3 zarr.json: a name, or an
// object with name and configuration for parameterised extension types.
func ParseV3(raw json.RawMessage) (DataType, error) {
	raw = bytes.TrimSpace(raw)
	var name string
	var config struct {
		Unit        *string `json:"unit"`
		ScaleFactor *int    `json:"scale_factor"`
		LengthBytes *int    `json:"length_bytes"`
	}
	if len(raw) > 0 && raw[0] == '{' {
		var obj struct {
			Name          string          `json:"name"`
			Configuration json.RawMessage `json:"configuration"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return DataType{}, fmt.Errorf("data_type: %v", err)
		}
		if len(obj.Configuration) > 0 {
			if err := json.Unmarshal(obj.Configuration, &config); err != nil {
				return DataType{}, fmt.Errorf("data_type %q configuration: %v", obj.Name, err)
			}
		}
		name = obj.Name
	} else if err := json.Unmarshal(raw, &name); err != nil {
		return DataType{}, fmt.Errorf("data_type must be a string or an object, got %s", raw)
	}
	if d, ok := v3Names[name]; ok {
		return d, nil
	}
	switch name {
	case "numpy.datetime64", "numpy.timedelta64", "datetime64", "timedelta64":
		if config.Unit == nil {
			return DataType{}, fmt.Errorf("data_type %q: configuration.unit is required", name)
		}
		unit := *config.Unit
		if config.ScaleFactor != nil && (*config.ScaleFactor < 1 || *config.ScaleFactor > math.MaxInt32) {
			return DataType{}, fmt.Errorf("data_type %q: configuration.scale_factor %d is not in 1..2^31-1", name, *config.ScaleFactor)
		}
		if config.ScaleFactor != nil && *config.ScaleFactor != 1 {
			unit = strconv.Itoa(*config.ScaleFactor) + unit
		}
		kind := Datetime
		if strings.HasSuffix(name, "timedelta64") {
			kind = Timedelta
		}
		return DataType{Kind: kind, Size: 8, Unit: unit}, nil
	case "fixed_length_utf32", "null_terminated_bytes", "raw_bytes":
		if config.LengthBytes == nil || *config.LengthBytes < 0 {
			return DataType{}, fmt.Errorf("data_type %q: configuration.length_bytes must be a non-negative integer", name)
		}
		n := *config.LengthBytes
		switch name {
		case "fixed_length_utf32":
			if n%4 != 0 {
				return DataType{}, fmt.Errorf("data_type %q: length_bytes %d is not a multiple of 4", name, n)
			}
			return DataType{Kind: FixedUnicode, Size: n}, nil
		case "null_terminated_bytes":
			return DataType{Kind: FixedBytes, Size: n}, nil
		}
		return DataType{Kind: RawBits, Size: n}, nil
	}
	if bits, ok := strings.CutPrefix(name, "r"); ok {
		n, err := strconv.Atoi(bits)
		if err == nil && n > 0 && n%8 == 0 {
			return DataType{Kind: RawBits, Size: n / 8}, nil
		}
	}
	return DataType{}, fmt.Errorf("%w %q", ErrUnknown, name)
}

// FormatV3 returns the data_type field for d in a v3 zarr.json.
func FormatV3(d DataType) (json.RawMessage, error) {
	obj := func(name string, config any) (json.RawMessage, error) {
		return json.Marshal(map[string]any{"name": name, "configuration": config})
	}
	switch d.Kind {
	case Bool, Int, Uint, Float, Complex, String, Bytes:
		return json.Marshal(d.String())
	case RawBits:
		if d.Size == 0 {
			return nil, fmt.Errorf("%w: a raw type of 0 bytes has no v3 form", ErrUnknown)
		}
		return json.Marshal(d.String())
	case FixedBytes:
		return obj("null_terminated_bytes", map[string]int{"length_bytes": d.Size})
	case FixedUnicode:
		return obj("fixed_length_utf32", map[string]int{"length_bytes": d.Size})
	case Datetime, Timedelta:
		name := "numpy.datetime64"
		if d.Kind == Timedelta {
			name = "numpy.timedelta64"
		}
		scale, unit := splitUnit(d.Unit)
		return obj(name, map[string]any{"unit": unit, "scale_factor": scale})
	}
	return nil, fmt.Errorf("%w: %s has no v3 form", ErrUnknown, d)
}

// splitUnit splits a numpy unit such as "10s" into (10, "s").
func splitUnit(u string) (int, string) {
	i := 0
	for i < len(u) && u[i] >= '0' && u[i] <= '9' {
		i++
	}
	n, err := strconv.Atoi(u[:i])
	if err != nil {
		n = 1
	}
	return n, u[i:]
}

// ParseV2 parses a v2 .zarray dtype: a numpy type string such as "<i2",
// "|b1", ">f8", "|S7", "<U13", "|V16", "<M8[ns]" or "|O". Structured
// (record) dtypes are not supported.
func ParseV2(typestr string) (DataType, Endian, error) {
	if len(typestr) < 2 {
		return DataType{}, 0, fmt.Errorf("%w: dtype %q", ErrUnknown, typestr)
	}
	var e Endian
	switch typestr[0] {
	case '<', '=':
		e = Little
	case '>':
		e = Big
	case '|':
		e = NoEndian
	default:
		return DataType{}, 0, fmt.Errorf("dtype %q: byte order must be one of < > | =", typestr)
	}
	kind, rest := typestr[1], typestr[2:]
	if kind == 'O' && rest == "" {
		return DataType{Kind: Object}, NoEndian, nil
	}
	if kind == 'M' || kind == 'm' {
		size, unit, ok := strings.Cut(rest, "[")
		if size != "8" || !ok || !strings.HasSuffix(unit, "]") || len(unit) < 2 {
			return DataType{}, 0, fmt.Errorf("dtype %q: expected <M8[unit] or <m8[unit]", typestr)
		}
		k := Datetime
		if kind == 'm' {
			k = Timedelta
		}
		return DataType{Kind: k, Size: 8, Unit: strings.TrimSuffix(unit, "]")}, e, nil
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return DataType{}, 0, fmt.Errorf("%w: dtype %q", ErrUnknown, typestr)
	}
	var d DataType
	switch kind {
	case 'b':
		d = DataType{Kind: Bool, Size: n}
	case 'i':
		d = DataType{Kind: Int, Size: n}
	case 'u':
		d = DataType{Kind: Uint, Size: n}
	case 'f':
		d = DataType{Kind: Float, Size: n}
	case 'c':
		d = DataType{Kind: Complex, Size: n}
	case 'S':
		d = DataType{Kind: FixedBytes, Size: n}
	case 'U':
		d = DataType{Kind: FixedUnicode, Size: 4 * n}
	case 'V':
		d = DataType{Kind: RawBits, Size: n}
	default:
		return DataType{}, 0, fmt.Errorf("%w: dtype %q", ErrUnknown, typestr)
	}
	if !validSize(d) {
		return DataType{}, 0, fmt.Errorf("%w: dtype %q has an invalid size", ErrUnknown, typestr)
	}
	if d.SwapSize() == 1 {
		e = NoEndian
	} else if e == NoEndian {
		return DataType{}, 0, fmt.Errorf("dtype %q: a %d-byte type needs byte order < or >", typestr, d.SwapSize())
	}
	return d, e, nil
}

func validSize(d DataType) bool {
	switch d.Kind {
	case Bool:
		return d.Size == 1
	case Int, Uint:
		return d.Size == 1 || d.Size == 2 || d.Size == 4 || d.Size == 8
	case Float:
		return d.Size == 2 || d.Size == 4 || d.Size == 8
	case Complex:
		return d.Size == 8 || d.Size == 16
	case Datetime, Timedelta:
		return d.Size == 8
	case FixedUnicode:
		return d.Size%4 == 0
	}
	return true
}

// FormatV2 returns the numpy type string of d stored with byte order e.
func FormatV2(d DataType, e Endian) (string, error) {
	order := "<"
	if e == Big {
		order = ">"
	}
	if d.SwapSize() == 1 {
		order = "|"
	}
	switch d.Kind {
	case Bool:
		return "|b1", nil
	case Int, Uint:
		if d.Bits != 0 && d.Bits != 8*d.Size {
			return "", fmt.Errorf("%w: %s has no v2 equivalent", ErrUnknown, d)
		}
		return order + string("iu"[d.Kind-Int]) + strconv.Itoa(d.Size), nil
	case Float:
		return order + "f" + strconv.Itoa(d.Size), nil
	case Complex:
		return order + "c" + strconv.Itoa(d.Size), nil
	case RawBits:
		return "|V" + strconv.Itoa(d.Size), nil
	case FixedBytes:
		return "|S" + strconv.Itoa(d.Size), nil
	case FixedUnicode:
		return order + "U" + strconv.Itoa(d.Size/4), nil
	case Datetime:
		return order + "M8[" + d.Unit + "]", nil
	case Timedelta:
		return order + "m8[" + d.Unit + "]", nil
	case String, Bytes, Object:
		return "|O", nil
	}
	return "", fmt.Errorf("%w: %s has no v2 equivalent", ErrUnknown, d)
}
