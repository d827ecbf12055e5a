package codec

import (
	"encoding/json"
	"fmt"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/zarrfs/zarrfs/zarr/dtype"
)

func init() { Register("numcodecs.json2", newJSON2) }

// json2Codec is numcodecs' JSON codec (id "json2") for object arrays. A
// chunk is stored as one JSON list: the values nested by the chunk's shape
// (numpy's tolist, so always in logical C order whatever the array's
// order), then the dtype string and the shape. Decoded items hold each value
// as compact JSON, printed as Python's json.dumps(v, separators=(",", ":"),
// ensure_ascii=False) prints the value json.loads returned.
type json2Codec struct {
	spec Spec
	out  jsonStyle // how Encode prints values, from the codec configuration
}

func newJSON2(config json.RawMessage, spec Spec) (any, error) {
	cfg := struct {
		Encoding    string          `json:"encoding"`
		EnsureASCII bool            `json:"ensure_ascii"`
		SortKeys    bool            `json:"sort_keys"`
		Separators  []string        `json:"separators"`
		Indent      json.RawMessage `json:"indent"`
	}{Encoding: "utf-8", EnsureASCII: true, SortKeys: true}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	if spec.Type.Kind != dtype.Object {
		return nil, configError("json2 serialises object arrays, not %s", spec.Type)
	}
	if e := strings.ToLower(strings.ReplaceAll(cfg.Encoding, "_", "-")); e != "utf-8" && e != "utf8" {
		return nil, configError("json2 text encoding %q is not supported (only utf-8)", cfg.Encoding)
	}
	style := jsonStyle{ensureASCII: cfg.EnsureASCII, sortKeys: cfg.SortKeys, itemSep: ",", keySep: ":"}
	if len(cfg.Indent) > 0 && string(cfg.Indent) != "null" {
		// Python's default separators with an indent; the indent itself is
		// not reproduced (readers ignore whitespace).
		style.itemSep, style.keySep = ", ", ": "
	}
	if len(cfg.Separators) == 2 {
		style.itemSep, style.keySep = cfg.Separators[0], cfg.Separators[1]
	}
	return &json2Codec{spec: spec, out: style}, nil
}

func (*json2Codec) EncodedSize() (int, bool) { return 0, false }

func (c *json2Codec) Encode(ch *Chunk) ([]byte, error) {
	if err := ch.Check(c.spec); err != nil {
		return nil, err
	}
	var out []byte
	i := 0
	var nest func(dim int) error
	nest = func(dim int) error {
		if dim == len(c.spec.Shape) {
			v, err := normalizeJSON(out, ch.Items[i], c.out)
			if err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
			out = v
			i++
			return nil
		}
		if dim > 0 {
			out = append(out, '[')
		}
		for k := 0; k < c.spec.Shape[dim]; k++ {
			if k > 0 {
				out = append(out, c.out.itemSep...)
			}
			if err := nest(dim + 1); err != nil {
				return err
			}
		}
		if dim > 0 {
			out = append(out, ']')
		}
		return nil
	}
	out = append(out, '[')
	if err := nest(0); err != nil {
		return nil, err
	}
	if len(c.spec.Shape) > 0 && c.spec.Shape[0] > 0 || len(c.spec.Shape) == 0 {
		out = append(out, c.out.itemSep...)
	}
	out = append(out, `"|O"`...)
	out = append(out, c.out.itemSep...)
	out = append(out, '[')
	for k, d := range c.spec.Shape {
		if k > 0 {
			out = append(out, c.out.itemSep...)
		}
		out = strconv.AppendInt(out, int64(d), 10)
	}
	return append(out, ']', ']'), nil
}

func (c *json2Codec) Decode(b []byte) (*Chunk, error) {
	p := jsonParser{b: b}
	p.space()
	top, err := p.elements()
	if err != nil {
		return nil, err
	}
	if p.space(); p.i != len(b) {
		return nil, corrupt("json2: trailing data at byte %d", p.i)
	}
	if len(top) < 2 {
		return nil, corrupt("json2: the list lacks the dtype and shape")
	}
	var shape []int
	if err := json.Unmarshal(b[top[len(top)-1].start:top[len(top)-1].end], &shape); err != nil {
		return nil, corrupt("json2: shape: %v", err)
	}
	n := c.spec.NumElements()
	if nd.Size(shape) != n || slices.ContainsFunc(shape, func(d int) bool { return d < 0 }) {
		return nil, corrupt("json2: shape %v does not hold the %d elements of the chunk", shape, n)
	}
	items := make([][]byte, 0, n)
	var collect func(spans []span, dim int) error
	collect = func(spans []span, dim int) error {
		if dim == len(shape) {
			for _, s := range spans {
				v, err := normalizeJSON(nil, b[s.start:s.end], pythonStyle)
				if err != nil {
					return err
				}
				items = append(items, v)
			}
			return nil
		}
		if len(spans) != shape[dim] {
			return corrupt("json2: %d values where the shape %v needs %d", len(spans), shape, shape[dim])
		}
		if dim == len(shape)-1 {
			return collect(spans, dim+1)
		}
		for _, s := range spans {
			q := jsonParser{b: b[:s.end], i: s.start}
			inner, err := q.elements()
			if err != nil {
				return corrupt("json2: values are not nested as the shape %v", shape)
			}
			if err := collect(inner, dim+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := collect(top[:len(top)-2], 0); err != nil {
		return nil, err
	}
	if len(items) != n {
		return nil, corrupt("json2: %d values, want %d", len(items), n)
	}
	return &Chunk{Shape: c.spec.Shape, Type: c.spec.Type, Items: items}, nil
}

// jsonStyle is how Python's json module is told to print.
type jsonStyle struct {
	ensureASCII, sortKeys bool
	itemSep, keySep       string
}

// pythonStyle is json.dumps(v, separators=(",", ":"), ensure_ascii=False).
var pythonStyle = jsonStyle{itemSep: ",", keySep: ":"}

// normalizeJSON appends to dst the JSON text b (one value) as Python would
// print the value json.loads(b) returns: integers exactly, floats by repr,
// NaN and infinities as NaN/Infinity/-Infinity, duplicate keys resolved to
// the last value at the first position, strings re-escaped.
func normalizeJSON(dst, b []byte, style jsonStyle) ([]byte, error) {
	p := jsonParser{b: b}
	p.space()
	out, err := p.value(dst, style)
	if err != nil {
		return nil, err
	}
	if p.space(); p.i != len(b) {
		return nil, corrupt("json: trailing data at byte %d", p.i)
	}
	return out, nil
}

type span struct{ start, end int }

// jsonParser is a small JSON reader that keeps number tokens and key order,
// which encoding/json does not.
type jsonParser struct {
	b []byte
	i int
}

func (p *jsonParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) fail(what string) error {
	return corrupt("json: %s at byte %d", what, p.i)
}

// elements parses a list and returns the spans of its elements.
func (p *jsonParser) elements() ([]span, error) {
	if p.i >= len(p.b) || p.b[p.i] != '[' {
		return nil, p.fail("expected a list")
	}
	p.i++
	var spans []span
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return spans, nil
	}
	for {
		p.space()
		start := p.i
		if _, err := p.value(nil, jsonStyle{}); err != nil {
			return nil, err
		}
		spans = append(spans, span{start, p.i})
		p.space()
		if p.i >= len(p.b) {
			return nil, p.fail("unterminated list")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return spans, nil
		default:
			return nil, p.fail("expected , or ]")
		}
	}
}

// value parses one value, appending its Python form to dst (dst == nil and
// a zero style just validates).
func (p *jsonParser) value(dst []byte, style jsonStyle) ([]byte, error) {
	if p.i >= len(p.b) {
		return nil, p.fail("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(dst, style)
	case c == '[':
		p.i++
		dst = append(dst, '[')
		p.space()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return append(dst, ']'), nil
		}
		for first := true; ; first = false {
			if !first {
				dst = append(dst, style.itemSep...)
			}
			p.space()
			var err error
			if dst, err = p.value(dst, style); err != nil {
				return nil, err
			}
			p.space()
			if p.i >= len(p.b) {
				return nil, p.fail("unterminated list")
			}
			if p.b[p.i] == ']' {
				p.i++
				return append(dst, ']'), nil
			}
			if p.b[p.i] != ',' {
				return nil, p.fail("expected , or ]")
			}
			p.i++
		}
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendPyString(dst, s, style.ensureASCII), nil
	case c == '-' || c >= '0' && c <= '9' || c == 'N' || c == 'I':
		return p.number(dst)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if strings.HasPrefix(string(p.b[p.i:min(len(p.b), p.i+5)]), lit) {
			p.i += len(lit)
			return append(dst, lit...), nil
		}
	}
	return nil, p.fail("invalid value")
}

func (p *jsonParser) object(dst []byte, style jsonStyle) ([]byte, error) {
	p.i++ // {
	type member struct {
		key   string
		value []byte
	}
	var members []member
	index := map[string]int{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return append(dst, '{', '}'), nil
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, p.fail("expected a key")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.fail("expected :")
		}
		p.i++
		p.space()
		v, err := p.value(nil, style)
		if err != nil {
			return nil, err
		}
		if k, dup := index[key]; dup {
			members[k].value = v // Python's dict keeps the first position
		} else {
			index[key] = len(members)
			members = append(members, member{key, v})
		}
		p.space()
		if p.i >= len(p.b) {
			return nil, p.fail("unterminated object")
		}
		if p.b[p.i] == '}' {
			p.i++
			break
		}
		if p.b[p.i] != ',' {
			return nil, p.fail("expected , or }")
		}
		p.i++
	}
	if style.sortKeys {
		slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	}
	dst = append(dst, '{')
	for k, m := range members {
		if k > 0 {
			dst = append(dst, style.itemSep...)
		}
		dst = appendPyString(dst, m.key, style.ensureASCII)
		dst = append(dst, style.keySep...)
		dst = append(dst, m.value...)
	}
	return append(dst, '}'), nil
}

// str parses a JSON string.
func (p *jsonParser) str() (string, error) {
	p.i++ // opening quote
	var sb strings.Builder
	for {
		start := p.i
		for p.i < len(p.b) && p.b[p.i] != '"' && p.b[p.i] != '\\' && p.b[p.i] >= 0x20 {
			p.i++
		}
		if !utf8.Valid(p.b[start:p.i]) {
			return "", p.fail("invalid UTF-8 in a string")
		}
		sb.Write(p.b[start:p.i])
		if p.i >= len(p.b) {
			return "", p.fail("unterminated string")
		}
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return sb.String(), nil
		case c < 0x20:
			return "", p.fail("control character in a string")
		}
		// An escape.
		if p.i+1 >= len(p.b) {
			return "", p.fail("unterminated escape")
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			sb.WriteByte(e)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				if r2, ok2 := p.lowSurrogate(); ok2 {
					r = utf16.DecodeRune(r, r2)
				} else {
					r = utf8.RuneError // a lone surrogate has no UTF-8 form
				}
			}
			sb.WriteRune(r)
		default:
			return "", p.fail("invalid escape")
		}
	}
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(v), true
}

// lowSurrogate consumes a following \uDC00-\uDFFF escape, if there is one.
func (p *jsonParser) lowSurrogate() (rune, bool) {
	if p.i+6 > len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
		return 0, false
	}
	save := p.i
	p.i += 2
	r, ok := p.hex4()
	if !ok || r < 0xdc00 || r > 0xdfff {
		p.i = save
		return 0, false
	}
	return r, true
}

// number parses a JSON number (or Python's NaN/Infinity/-Infinity).
func (p *jsonParser) number(dst []byte) ([]byte, error) {
	rest := p.b[p.i:]
	for _, c := range []string{"NaN", "Infinity", "-Infinity"} {
		if strings.HasPrefix(string(rest[:min(len(rest), len(c))]), c) {
			p.i += len(c)
			return append(dst, c...), nil
		}
	}
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		s := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		return p.i - s
	}
	intStart := p.i
	if n := digits(); n == 0 || n > 1 && p.b[intStart] == '0' {
		return nil, p.fail("invalid number")
	}
	isFloat := false
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		isFloat = true
		if digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		isFloat = true
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	tok := string(p.b[start:p.i])
	if !isFloat {
		if tok == "-0" {
			tok = "0"
		}
		return append(dst, tok...), nil
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil && !math.IsInf(f, 0) {
		return nil, p.fail("invalid number")
	}
	return appendPyFloat(dst, f), nil
}

// appendPyFloat appends repr(f) as Python prints it in JSON.
func appendPyFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	if math.Signbit(f) {
		dst = append(dst, '-')
		f = -f
	}
	if f == 0 {
		return append(dst, "0.0"...)
	}
	// Shortest round-trip digits d1.d2d3...e±X; decpt is X+1.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	decpt := x + 1
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			dst = append(dst, "0."...)
			dst = append(dst, strings.Repeat("0", -decpt)...)
			return append(dst, digits...)
		case decpt < len(digits):
			dst = append(dst, digits[:decpt]...)
			dst = append(dst, '.')
			return append(dst, digits[decpt:]...)
		default:
			dst = append(dst, digits...)
			dst = append(dst, strings.Repeat("0", decpt-len(digits))...)
			return append(dst, ".0"...)
		}
	}
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	if x < 0 {
		dst = append(dst, '-')
		x = -x
	} else {
		dst = append(dst, '+')
	}
	if x < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, int64(x), 10)
}

// appendPyString appends s as Python's json module writes a string.
func appendPyString(dst []byte, s string, ensureASCII bool) []byte {
	const hex = "0123456789abcdef"
	u4 := func(dst []byte, r rune) []byte {
		return append(dst, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
	}
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"':
			dst = append(dst, '\\', '"')
		case r == '\\':
			dst = append(dst, '\\', '\\')
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\b':
			dst = append(dst, '\\', 'b')
		case r == '\f':
			dst = append(dst, '\\', 'f')
		case r < 0x20:
			dst = u4(dst, r)
		case ensureASCII && r >= 0x7f:
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				dst = u4(u4(dst, r1), r2)
			} else {
				dst = u4(dst, r)
			}
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return append(dst, '"')
}
