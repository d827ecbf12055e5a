package dtype

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Fill values are held decoded: one element packed as a decoded chunk holds
// it (little-endian, bool as 0/1, sub-byte integers sign- or zero-extended
// to a byte), or the item itself for variable-length types.

// zarrFormat selects the JSON dialect of a fill value.
type zarrFormat int

const (
	zarr2 zarrFormat = 2
	zarr3 zarrFormat = 3
)

// ParseFillV3 parses the fill_value of a v3 zarr.json for data type d.
// Integers must be exact and in range; floats may be numbers, "NaN",
// "Infinity", "-Infinity" or a hex bit pattern such as "0x7fc00000";
// complex numbers are [re, im]; rN is an array of N/8 bytes; byte strings
// are base64 (zarr-python 3) or arrays of bytes (zarrs, zarr-python 3.0).
func ParseFillV3(d DataType, raw json.RawMessage) ([]byte, error) {
	return parseFill(d, raw, zarr3)
}

// ParseFillV2 parses the fill_value of a v2 .zarray for data type d. It
// returns nil for null, which v2 allows for "no fill value". Fixed-size
// byte strings (|S, |V) are base64; "NaN" and the infinities are strings.
// For |O the fill is the value as compact JSON, like Object items; 0,
// which zarr-python 2 writes for object arrays, is the empty item for
// String and Bytes.
func ParseFillV2(d DataType, raw json.RawMessage) ([]byte, error) {
	return parseFill(d, raw, zarr2)
}

// FormatFillV3 returns the v3 fill_value for the decoded fill v. Floats use
// the shortest decimal that reads back exactly; NaNs other than the one
// "NaN" denotes are written as hex bit patterns, the only exact form.
func FormatFillV3(d DataType, v []byte) (json.RawMessage, error) {
	return formatFill(d, v, zarr3)
}

// FormatFillV2 returns the v2 fill_value for the decoded fill v, null for
// nil. v2 cannot express NaN payloads: every NaN is written as "NaN".
func FormatFillV2(d DataType, v []byte) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage("null"), nil
	}
	return formatFill(d, v, zarr2)
}

func parseFill(d DataType, raw json.RawMessage, f zarrFormat) ([]byte, error) {
	v, err := decodeValue(raw)
	if err != nil {
		return nil, fmt.Errorf("fill_value: %w", err)
	}
	if v == nil {
		if f == zarr2 {
			return nil, nil
		}
		return nil, errors.New("fill_value: null is not allowed in zarr v3")
	}
	b, err := parseValue(d, v, raw, f)
	if err != nil {
		return nil, fmt.Errorf("fill_value: %w", err)
	}
	return b, nil
}

// decodeValue decodes one JSON value, keeping numbers as written.
func decodeValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the value")
	}
	return v, nil
}

func parseValue(d DataType, v any, raw json.RawMessage, f zarrFormat) ([]byte, error) {
	if !d.Variable() && !validSize(d) {
		return nil, fmt.Errorf("%w: %s of %d bytes", ErrUnknown, d, d.Size)
	}
	switch d.Kind {
	case Bool:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("%s is not a boolean", show(v))
		}
		if b {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case Int, Uint:
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s is not an integer", show(v))
		}
		return parseInteger(d, string(n))
	case Float:
		bits, err := parseFloat(d.Size, v, f)
		if err != nil {
			return nil, err
		}
		return putUint(d.Size, bits), nil
	case Complex:
		return parseComplex(d, v, f)
	case Datetime, Timedelta:
		return parseTime(v)
	case RawBits, FixedBytes:
		b, err := parseByteString(v, f)
		if err != nil {
			return nil, err
		}
		if len(b) > d.Size {
			return nil, fmt.Errorf("%d bytes do not fit %s", len(b), d)
		}
		// numpy pads short |S and |V values with NULs.
		return append(b, make([]byte, d.Size-len(b))...), nil
	case FixedUnicode:
		return parseUnicode(d, v)
	case String:
		if f == zarr2 && isZero(v) {
			return []byte{}, nil
		}
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s is not a string", show(v))
		}
		return []byte(s), nil
	case Bytes:
		if f == zarr2 && isZero(v) {
			return []byte{}, nil
		}
		return parseByteString(v, f)
	case Object:
		if f == zarr3 {
			return nil, fmt.Errorf("%w: object has no zarr v3 form", ErrUnknown)
		}
		// Object items are compact JSON, so the fill is the value itself.
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknown, d)
}

// isZero reports whether v is the number 0, which zarr-python 2 writes as
// the fill value of object arrays of strings and bytes.
func isZero(v any) bool {
	n, ok := v.(json.Number)
	return ok && n == "0"
}

func parseInteger(d DataType, s string) ([]byte, error) {
	bits := intBits(d)
	if bits < 1 || bits > 8*d.Size {
		return nil, fmt.Errorf("%w: %s", ErrUnknown, d)
	}
	var u uint64
	var err error
	if d.Kind == Int || strings.HasPrefix(s, "-") {
		// Negative values are parsed signed so that an unsigned type
		// reports them as out of range (or accepts -0).
		var n int64
		n, err = strconv.ParseInt(s, 10, bits)
		if d.Kind == Uint && (n < 0 || errors.Is(err, strconv.ErrRange)) {
			return nil, fmt.Errorf("%s out of range for %s", s, d)
		}
		u = uint64(n)
	} else {
		u, err = strconv.ParseUint(s, 10, bits)
	}
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("%s out of range for %s", s, d)
		}
		return nil, fmt.Errorf("%s is not an integer", s)
	}
	return putUint(d.Size, u), nil
}

// intBits is the number of significant bits of an integer type.
func intBits(d DataType) int {
	if d.Bits != 0 {
		return d.Bits
	}
	return 8 * d.Size
}

func putUint(size int, u uint64) []byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], u)
	return bytes.Clone(b[:size])
}

func getUint(b []byte) uint64 {
	var buf [8]byte
	copy(buf[:], b)
	return binary.LittleEndian.Uint64(buf[:])
}

// parseFloat returns the bit pattern of a float fill of size 2, 4 or 8.
func parseFloat(size int, v any, f zarrFormat) (uint64, error) {
	switch v := v.(type) {
	case json.Number:
		return parseFloatNumber(size, string(v))
	case string:
		switch v {
		case "NaN":
			return canonicalNaN(size), nil
		case "Infinity":
			return infinity(size, false), nil
		case "-Infinity":
			return infinity(size, true), nil
		}
		if hex, ok := strings.CutPrefix(v, "0x"); ok && f == zarr3 && len(hex) <= 2*size {
			if u, err := strconv.ParseUint(hex, 16, 8*size); err == nil {
				return u, nil
			}
		}
	}
	forms := `a number, "NaN", "Infinity" or "-Infinity"`
	if f == zarr3 {
		forms = `a number, "NaN", "Infinity", "-Infinity" or a hex bit pattern such as "0x7fc00000"`
	}
	return 0, fmt.Errorf("%s is not a float%d: want %s", show(v), 8*size, forms)
}

func parseFloatNumber(size int, s string) (uint64, error) {
	var bits uint64
	var err error
	switch size {
	case 2:
		var x float64
		x, err = strconv.ParseFloat(s, 64)
		bits = uint64(float64ToFloat16(x))
		if err == nil && bits&0x7fff == 0x7c00 {
			err = strconv.ErrRange
		}
	case 4:
		var x float64
		x, err = strconv.ParseFloat(s, 32)
		bits = uint64(math.Float32bits(float32(x)))
	default:
		var x float64
		x, err = strconv.ParseFloat(s, 64)
		bits = math.Float64bits(x)
	}
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%s out of range for float%d", s, 8*size)
		}
		return 0, fmt.Errorf("%s is not a number", s)
	}
	return bits, nil
}

func parseComplex(d DataType, v any, f zarrFormat) ([]byte, error) {
	pair, ok := v.([]any)
	if !ok || len(pair) != 2 {
		return nil, fmt.Errorf("%s is not a [real, imaginary] pair", show(v))
	}
	half := d.Size / 2
	out := make([]byte, 0, d.Size)
	for i, part := range pair {
		bits, err := parseFloat(half, part, f)
		if err != nil {
			return nil, fmt.Errorf("%s part: %w", [2]string{"real", "imaginary"}[i], err)
		}
		out = append(out, putUint(half, bits)...)
	}
	return out, nil
}

func parseTime(v any) ([]byte, error) {
	if v == "NaT" {
		return putUint(8, 1<<63), nil // math.MinInt64
	}
	n, ok := v.(json.Number)
	if !ok {
		return nil, fmt.Errorf(`%s is not an integer or "NaT"`, show(v))
	}
	return parseInteger(DataType{Kind: Int, Size: 8}, string(n))
}

// parseByteString reads a base64 string, or in v3 an array of byte values.
func parseByteString(v any, f zarrFormat) ([]byte, error) {
	switch v := v.(type) {
	case string:
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("%s is not base64: %v", show(v), err)
		}
		return b, nil
	case []any:
		if f == zarr3 {
			b := make([]byte, len(v))
			for i, e := range v {
				n, ok := e.(json.Number)
				u, err := strconv.ParseUint(string(n), 10, 8)
				if !ok || err != nil {
					return nil, fmt.Errorf("element %d: %s is not a byte value 0..255", i, show(e))
				}
				b[i] = byte(u)
			}
			return b, nil
		}
	}
	if f == zarr3 {
		return nil, fmt.Errorf("%s is not a base64 string or an array of bytes", show(v))
	}
	return nil, fmt.Errorf("%s is not a base64 string", show(v))
}

func parseUnicode(d DataType, v any) ([]byte, error) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%s is not a string", show(v))
	}
	out := make([]byte, d.Size)
	i := 0
	for _, r := range s {
		if i+4 > len(out) {
			return nil, fmt.Errorf("%s has more than %d code points", show(v), d.Size/4)
		}
		binary.LittleEndian.PutUint32(out[i:], uint32(r))
		i += 4
	}
	return out, nil
}

func formatFill(d DataType, v []byte, f zarrFormat) (json.RawMessage, error) {
	if !d.Variable() && !validSize(d) {
		return nil, fmt.Errorf("fill_value: %w: %s of %d bytes", ErrUnknown, d, d.Size)
	}
	if !d.Variable() && len(v) != d.Size {
		return nil, fmt.Errorf("fill_value: %d bytes for %s, want %d", len(v), d, d.Size)
	}
	out, err := formatValue(d, v, f)
	if err != nil {
		return nil, fmt.Errorf("fill_value: %w", err)
	}
	return out, nil
}

func formatValue(d DataType, v []byte, f zarrFormat) (json.RawMessage, error) {
	switch d.Kind {
	case Bool:
		switch v[0] {
		case 0:
			return json.RawMessage("false"), nil
		case 1:
			return json.RawMessage("true"), nil
		}
		return nil, fmt.Errorf("byte %d is not a boolean", v[0])
	case Int, Uint:
		return formatInteger(d, v)
	case Float:
		return formatFloat(d.Size, getUint(v), f), nil
	case Complex:
		half := d.Size / 2
		re := formatFloat(half, getUint(v[:half]), f)
		im := formatFloat(half, getUint(v[half:]), f)
		return json.RawMessage("[" + string(re) + "," + string(im) + "]"), nil
	case Datetime, Timedelta:
		return json.RawMessage(strconv.FormatInt(int64(getUint(v)), 10)), nil
	case RawBits:
		if f == zarr3 {
			return formatByteArray(v), nil
		}
		return marshalString(base64.StdEncoding.EncodeToString(v)), nil
	case FixedBytes:
		// Trailing NULs are padding, as numpy reads |S values.
		return marshalString(base64.StdEncoding.EncodeToString(bytes.TrimRight(v, "\x00"))), nil
	case FixedUnicode:
		return formatUnicode(v)
	case String:
		if !utf8.Valid(v) {
			return nil, errors.New("string is not valid UTF-8")
		}
		return marshalString(string(v)), nil
	case Bytes:
		return marshalString(base64.StdEncoding.EncodeToString(v)), nil
	case Object:
		if f == zarr3 {
			return nil, fmt.Errorf("%w: object has no zarr v3 form", ErrUnknown)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, fmt.Errorf("object item is not JSON: %v", err)
		}
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknown, d)
}

func formatInteger(d DataType, v []byte) (json.RawMessage, error) {
	bits := intBits(d)
	if bits < 1 || bits > 8*d.Size {
		return nil, fmt.Errorf("%w: %s", ErrUnknown, d)
	}
	u := getUint(v)
	var s string
	if d.Kind == Int {
		shift := 64 - 8*uint(d.Size)
		n := int64(u<<shift) >> shift // sign-extend the stored width
		if limit := int64(1) << (bits - 1); bits < 64 && (n < -limit || n >= limit) {
			return nil, fmt.Errorf("%d out of range for %s", n, d)
		}
		s = strconv.FormatInt(n, 10)
	} else {
		if bits < 64 && u >= 1<<bits {
			return nil, fmt.Errorf("%d out of range for %s", u, d)
		}
		s = strconv.FormatUint(u, 10)
	}
	return json.RawMessage(s), nil
}

// formatFloat writes a float of size 2, 4 or 8 given by its bits.
func formatFloat(size int, bits uint64, f zarrFormat) json.RawMessage {
	var x float64
	switch size {
	case 2:
		x = float16ToFloat64(uint16(bits))
	case 4:
		x = float64(math.Float32frombits(uint32(bits)))
	default:
		x = math.Float64frombits(bits)
	}
	switch {
	case math.IsNaN(x):
		if f == zarr3 && bits != canonicalNaN(size) {
			return marshalString(fmt.Sprintf("0x%0*x", 2*size, bits))
		}
		return marshalString("NaN")
	case math.IsInf(x, 1):
		return marshalString("Infinity")
	case math.IsInf(x, -1):
		return marshalString("-Infinity")
	}
	switch size {
	case 2:
		return pyFloat(shortestFloat16(uint16(bits)), 64)
	case 4:
		return pyFloat(x, 32)
	}
	return pyFloat(x, 64)
}

// pyFloat writes the finite x as Python's repr writes a float, and so
// zarr-python and GDAL write fill values: the shortest digits that read
// back as the same float of bitSize bits, positional with at least one
// decimal ("0.0", "-2.5", "100.0") when the decimal point falls within 16
// digits of the first, else with an exponent of at least two digits
// ("-1e+20", "1.5e-05"). It stays a float for readers that tell JSON
// integers from floats: GDAL reads -100000000000000000000 as an int64.
func pyFloat(x float64, bitSize int) json.RawMessage {
	mant, exp, _ := strings.Cut(strconv.FormatFloat(x, 'e', -1, bitSize), "e")
	sign, digits := "", strings.Replace(mant, ".", "", 1)
	if rest, neg := strings.CutPrefix(digits, "-"); neg {
		sign, digits = "-", rest
	}
	e, _ := strconv.Atoi(exp)
	point := e + 1 // digits before the decimal point
	var s string
	switch {
	case point <= -4 || point > 16:
		s = digits[:1]
		if len(digits) > 1 {
			s += "." + digits[1:]
		}
		es := "+"
		if e < 0 {
			es, e = "-", -e
		}
		s += fmt.Sprintf("e%s%02d", es, e)
	case point <= 0:
		s = "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		s = digits + strings.Repeat("0", point-len(digits)) + ".0"
	default:
		s = digits[:point] + "." + digits[point:]
	}
	return json.RawMessage(sign + s)
}

// shortestFloat16 returns the float64 with the fewest significant digits
// that rounds to the float16 h, so that its JSON form is the shortest that
// reads back as h.
func shortestFloat16(h uint16) float64 {
	x := float16ToFloat64(h)
	for prec := 1; prec < 17; prec++ {
		y, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', prec, 64), 64)
		if float64ToFloat16(y) == h {
			return y
		}
	}
	return x
}

func formatByteArray(v []byte) json.RawMessage {
	out := []byte{'['}
	for i, b := range v {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, uint64(b), 10)
	}
	return append(out, ']')
}

func formatUnicode(v []byte) (json.RawMessage, error) {
	var sb strings.Builder
	for i := 0; i+4 <= len(v); i += 4 {
		r := rune(binary.LittleEndian.Uint32(v[i:]))
		if r == 0 && allZero(v[i:]) {
			break // NUL padding
		}
		if !utf8.ValidRune(r) {
			return nil, fmt.Errorf("code point %#x at byte %d is not valid Unicode", uint32(r), i)
		}
		sb.WriteRune(r)
	}
	return marshalString(sb.String()), nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// marshalString encodes s as a JSON string without HTML escaping.
func marshalString(s string) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// show renders a decoded JSON value for an error message.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

// canonicalNaN is the NaN that "NaN" denotes: positive, quiet, no payload.
func canonicalNaN(size int) uint64 {
	switch size {
	case 2:
		return 0x7e00
	case 4:
		return 0x7fc00000
	}
	return 0x7ff8000000000000
}

func infinity(size int, negative bool) uint64 {
	var bits uint64
	switch size {
	case 2:
		bits = 0x7c00
	case 4:
		bits = 0x7f800000
	default:
		bits = 0x7ff0000000000000
	}
	if negative {
		bits |= 1 << (8*size - 1)
	}
	return bits
}

// float16ToFloat64 converts IEEE 754 binary16 bits exactly; NaN payloads
// are not kept (callers handle NaN by its bits).
func float16ToFloat64(h uint16) float64 {
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	var x float64
	switch exp {
	case 0:
		x = math.Ldexp(frac, -24)
	case 0x1f:
		x = math.Inf(1)
		if frac != 0 {
			x = math.NaN()
		}
	default:
		x = math.Ldexp(frac+1024, exp-25)
	}
	if h&0x8000 != 0 {
		x = -x
	}
	return x
}

// float64ToFloat16 rounds x to the nearest binary16, ties to even, with
// overflow to infinity; NaN becomes the canonical NaN.
func float64ToFloat16(x float64) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign = 0x8000
	}
	a := math.Abs(x)
	switch {
	case math.IsNaN(x):
		return 0x7e00
	case a >= 65520: // halfway between the largest float16 (65504) and 2^16
		return sign | 0x7c00
	case a < 0x1p-14: // subnormal: a multiple of 2^-24
		return sign | uint16(math.RoundToEven(math.Ldexp(a, 24)))
	}
	frac, exp := math.Frexp(a) // a = frac * 2^exp, frac in [0.5, 1)
	m := math.RoundToEven(math.Ldexp(frac, 11))
	e := exp - 1
	if m == 2048 {
		m, e = 1024, e+1
	}
	return sign | uint16(e+15)<<10 | uint16(m-1024)
}
