package dtype

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

var (
	typeInt4  = DataType{Kind: Int, Size: 1, Bits: 4}
	typeUint4 = DataType{Kind: Uint, Size: 1, Bits: 4}
	typeInt2  = DataType{Kind: Int, Size: 1, Bits: 2}
	typeR16   = DataType{Kind: RawBits, Size: 2}
	typeS4    = DataType{Kind: FixedBytes, Size: 4}
	typeU2    = DataType{Kind: FixedUnicode, Size: 8}
	typeM8    = DataType{Kind: Datetime, Size: 8, Unit: "ns"}
	typeObj   = DataType{Kind: Object}
)

func le16(u uint16) []byte { return binary.LittleEndian.AppendUint16(nil, u) }
func le32(u uint32) []byte { return binary.LittleEndian.AppendUint32(nil, u) }
func le64(u uint64) []byte { return binary.LittleEndian.AppendUint64(nil, u) }

type fillCase struct {
	d    DataType
	raw  string
	want []byte // nil with err == "": want nil (v2 null)
	err  string // substring of the error; "" for success
}

var fillV3Cases = []fillCase{
	{TypeBool, `true`, []byte{1}, ""},
	{TypeBool, `false`, []byte{0}, ""},
	{TypeBool, `1`, nil, "fill_value: 1 is not a boolean"},
	{TypeInt8, `-128`, []byte{0x80}, ""},
	{TypeInt8, `127`, []byte{0x7f}, ""},
	{TypeInt8, `128`, nil, "fill_value: 128 out of range for int8"},
	{TypeUint8, `300`, nil, "fill_value: 300 out of range for uint8"},
	{TypeUint8, `-1`, nil, "fill_value: -1 out of range for uint8"},
	{TypeUint8, `-0`, []byte{0}, ""},
	{TypeUint8, `255`, []byte{0xff}, ""},
	{TypeInt16, `-2`, []byte{0xfe, 0xff}, ""},
	{TypeInt16, `1.0`, nil, "fill_value: 1.0 is not an integer"},
	{TypeInt16, `1e2`, nil, "fill_value: 1e2 is not an integer"},
	{TypeInt16, `"1"`, nil, `fill_value: "1" is not an integer`},
	{TypeInt32, `-2147483648`, le32(0x80000000), ""},
	{TypeInt64, `-9223372036854775808`, le64(1 << 63), ""},
	{TypeInt64, `9223372036854775808`, nil, "out of range for int64"},
	{TypeUint64, `18446744073709551615`, le64(math.MaxUint64), ""},
	{TypeUint64, `9007199254740993`, le64(1<<53 + 1), ""}, // not a float64
	{TypeUint64, `18446744073709551616`, nil, "18446744073709551616 out of range for uint64"},
	{typeInt4, `-8`, []byte{0xf8}, ""},
	{typeInt4, `7`, []byte{7}, ""},
	{typeInt4, `8`, nil, "8 out of range for int4"},
	{typeUint4, `15`, []byte{15}, ""},
	{typeUint4, `16`, nil, "16 out of range for uint4"},
	{typeInt2, `-2`, []byte{0xfe}, ""},
	{typeInt2, `2`, nil, "out of range for int2"},
	{TypeFloat32, `0.0`, le32(0), ""},
	{TypeFloat32, `-0.0`, le32(0x80000000), ""},
	{TypeFloat32, `-1000.5`, le32(math.Float32bits(-1000.5)), ""},
	{TypeFloat32, `0.1`, le32(math.Float32bits(0.1)), ""},
	{TypeFloat32, `1`, le32(math.Float32bits(1)), ""},
	{TypeFloat32, `"NaN"`, le32(0x7fc00000), ""},
	{TypeFloat32, `"Infinity"`, le32(0x7f800000), ""},
	{TypeFloat32, `"-Infinity"`, le32(0xff800000), ""},
	{TypeFloat32, `"0x7fc00001"`, le32(0x7fc00001), ""},
	{TypeFloat32, `"0xFFC00000"`, le32(0xffc00000), ""},
	{TypeFloat32, `"0x1"`, le32(1), ""},
	{TypeFloat32, `"0x123456789"`, nil, "is not a float32"},
	{TypeFloat32, `"0x"`, nil, "is not a float32"},
	{TypeFloat32, `"nan"`, nil, `fill_value: "nan" is not a float32: want a number, "NaN"`},
	{TypeFloat32, `1e39`, nil, "fill_value: 1e39 out of range for float32"},
	{TypeFloat32, `1e-50`, le32(0), ""}, // rounds to zero
	{TypeFloat32, `true`, nil, "is not a float32"},
	{TypeFloat64, `1.5`, le64(math.Float64bits(1.5)), ""},
	{TypeFloat64, `"NaN"`, le64(0x7ff8000000000000), ""},
	{TypeFloat64, `"0x7ff8000000000001"`, le64(0x7ff8000000000001), ""},
	{TypeFloat64, `1e400`, nil, "out of range for float64"},
	{TypeFloat16, `0.0`, le16(0), ""},
	{TypeFloat16, `1000.5`, le16(0x63d1), ""},
	{TypeFloat16, `-1000.5`, le16(0xe3d1), ""},
	{TypeFloat16, `0.1`, le16(0x2e66), ""},
	{TypeFloat16, `0.333`, le16(0x3554), ""},
	{TypeFloat16, `65504`, le16(0x7bff), ""},
	{TypeFloat16, `65519`, le16(0x7bff), ""},
	{TypeFloat16, `65520`, nil, "65520 out of range for float16"},
	{TypeFloat16, `6.103515625e-05`, le16(0x0400), ""},        // smallest normal
	{TypeFloat16, `2.98023224e-08`, le16(0x0001), ""},         // just above half the smallest subnormal
	{TypeFloat16, `2.9802322387695312e-08`, le16(0x0000), ""}, // tie to even
	{TypeFloat16, `8.940696716308594e-08`, le16(0x0002), ""},  // 1.5 subnormals: tie to even
	{TypeFloat16, `1.00146484375`, le16(0x3c02), ""},          // tie to even
	{TypeFloat16, `"NaN"`, le16(0x7e00), ""},
	{TypeFloat16, `"0x7e01"`, le16(0x7e01), ""},
	{TypeFloat16, `"-Infinity"`, le16(0xfc00), ""},
	{TypeComplex64, `[1, 2]`, append(le32(math.Float32bits(1)), le32(math.Float32bits(2))...), ""},
	{TypeComplex64, `["-Infinity", "NaN"]`, append(le32(0xff800000), le32(0x7fc00000)...), ""},
	{TypeComplex64, `["0x7fc00001", 0]`, append(le32(0x7fc00001), le32(0)...), ""},
	{TypeComplex64, `[1]`, nil, "fill_value: [1] is not a [real, imaginary] pair"},
	{TypeComplex64, `[1, "x"]`, nil, "fill_value: imaginary part: \"x\" is not a float32"},
	{TypeComplex128, `[0.0, 0.0]`, make([]byte, 16), ""},
	{typeR16, `[1, 255]`, []byte{1, 255}, ""},
	{typeR16, `[1]`, []byte{1, 0}, ""},
	{typeR16, `[256, 0]`, nil, "fill_value: element 0: 256 is not a byte value 0..255"},
	{typeR16, `[1, 2, 3]`, nil, "fill_value: 3 bytes do not fit r16"},
	{typeR16, `"AQI="`, []byte{1, 2}, ""}, // zarr-python 3 raw_bytes
	{typeS4, `"YWI="`, []byte("ab\x00\x00"), ""},
	{typeS4, `""`, []byte{0, 0, 0, 0}, ""},
	{typeS4, `"YWJjZGU="`, nil, "5 bytes do not fit"},
	{typeS4, `"not base64!"`, nil, "is not base64"},
	{typeU2, `"a"`, []byte{'a', 0, 0, 0, 0, 0, 0, 0}, ""},
	{typeU2, `"é€"`, []byte{0xe9, 0, 0, 0, 0xac, 0x20, 0, 0}, ""},
	{typeU2, `"abc"`, nil, "has more than 2 code points"},
	{typeU2, `0`, nil, "is not a string"},
	{TypeString, `"hello"`, []byte("hello"), ""},
	{TypeString, `""`, []byte{}, ""},
	{TypeString, `0`, nil, "fill_value: 0 is not a string"},
	{TypeBytes, `"aGk="`, []byte("hi"), ""},
	{TypeBytes, `[104, 105]`, []byte("hi"), ""},
	{TypeBytes, `[]`, []byte{}, ""},
	{TypeBytes, `""`, []byte{}, ""},
	{TypeBytes, `{}`, nil, "is not a base64 string or an array of bytes"},
	{typeM8, `0`, make([]byte, 8), ""},
	{typeM8, `-1`, le64(math.MaxUint64), ""},
	{typeM8, `"NaT"`, le64(1 << 63), ""},
	{typeM8, `-9223372036854775808`, le64(1 << 63), ""},
	{typeM8, `1.5`, nil, "1.5 is not an integer"},
	{typeM8, `"nat"`, nil, `"nat" is not an integer or "NaT"`},
	{typeObj, `0`, nil, "object has no zarr v3 form"},
	{TypeInt8, `null`, nil, "fill_value: null is not allowed in zarr v3"},
	{TypeInt8, `1 2`, nil, "fill_value: invalid JSON"},
	{TypeInt8, ``, nil, "fill_value: invalid JSON"},
	{DataType{Kind: Float, Size: 3}, `1`, nil, "unknown data type"},
}

var fillV2Cases = []fillCase{
	{TypeInt16, `null`, nil, ""},
	{TypeFloat32, `"NaN"`, le32(0x7fc00000), ""},
	{TypeFloat32, `0.0`, le32(0), ""},
	{TypeFloat32, `"0x7fc00000"`, nil, `fill_value: "0x7fc00000" is not a float32: want a number, "NaN", "Infinity" or "-Infinity"`},
	{TypeComplex128, `["NaN", 1]`, append(le64(0x7ff8000000000000), le64(math.Float64bits(1))...), ""},
	{DataType{Kind: FixedBytes, Size: 7}, `""`, make([]byte, 7), ""},
	{typeS4, `"YWI="`, []byte("ab\x00\x00"), ""},
	{DataType{Kind: FixedUnicode, Size: 52}, `""`, make([]byte, 52), ""},
	{typeR16, `"AQI="`, []byte{1, 2}, ""},
	{typeR16, `[1, 2]`, nil, "fill_value: [1,2] is not a base64 string"},
	{TypeString, `0`, []byte{}, ""}, // zarr-python 2 object arrays
	{TypeString, `"x"`, []byte("x"), ""},
	{TypeBytes, `0`, []byte{}, ""},
	{TypeBytes, `"aGk="`, []byte("hi"), ""},
	{typeObj, `0`, []byte("0"), ""},
	{typeObj, `""`, []byte(`""`), ""},
	{typeObj, `{"a": [1, 2.50]}`, []byte(`{"a":[1,2.50]}`), ""},
	{typeObj, `null`, nil, ""},
	{typeM8, `"NaT"`, le64(1 << 63), ""},
	{TypeUint64, `18446744073709551615`, le64(math.MaxUint64), ""},
}

func runFillCases(t *testing.T, parse func(DataType, json.RawMessage) ([]byte, error), cases []fillCase) {
	t.Helper()
	for _, c := range cases {
		got, err := parse(c.d, json.RawMessage(c.raw))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %s: error %v, want one containing %q", c.d, c.raw, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", c.d, c.raw, err)
			continue
		}
		if !bytes.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s %s = %#v, want %#v", c.d, c.raw, got, c.want)
		}
	}
}

func TestParseFillV3(t *testing.T) { runFillCases(t, ParseFillV3, fillV3Cases) }
func TestParseFillV2(t *testing.T) { runFillCases(t, ParseFillV2, fillV2Cases) }

func TestFillErrorsWrapUnknown(t *testing.T) {
	if _, err := ParseFillV3(typeObj, json.RawMessage(`0`)); !errors.Is(err, ErrUnknown) {
		t.Errorf("object fill in v3: %v, want ErrUnknown", err)
	}
	if _, err := FormatFillV3(DataType{Kind: Complex, Size: 6}, make([]byte, 6)); !errors.Is(err, ErrUnknown) {
		t.Errorf("complex48: %v, want ErrUnknown", err)
	}
	for _, d := range []DataType{{Kind: Bool}, {Kind: Int, Size: 3}, {Kind: Int, Size: 1, Bits: 9}, {}} {
		if _, err := FormatFillV3(d, make([]byte, d.Size)); !errors.Is(err, ErrUnknown) {
			t.Errorf("format %#v: %v, want ErrUnknown", d, err)
		}
		if _, err := ParseFillV2(d, json.RawMessage("1")); !errors.Is(err, ErrUnknown) {
			t.Errorf("parse %#v: %v, want ErrUnknown", d, err)
		}
	}
}

func TestFormatFill(t *testing.T) {
	cases := []struct {
		d      DataType
		v      []byte
		v3, v2 string // "error: ..." for an expected error
	}{
		{TypeBool, []byte{1}, `true`, `true`},
		{TypeBool, []byte{2}, `error: byte 2 is not a boolean`, `error: byte 2 is not a boolean`},
		{TypeInt8, []byte{0x80}, `-128`, `-128`},
		{TypeUint64, le64(math.MaxUint64), `18446744073709551615`, `18446744073709551615`},
		{TypeInt64, le64(1 << 63), `-9223372036854775808`, `-9223372036854775808`},
		{typeInt4, []byte{0xf8}, `-8`, `-8`},
		{typeInt4, []byte{0x08}, `error: 8 out of range for int4`, `error: 8 out of range for int4`},
		{typeUint4, []byte{0x10}, `error: 16 out of range for uint4`, `error: 16 out of range for uint4`},
		{TypeFloat32, le32(0x7fc00000), `"NaN"`, `"NaN"`},
		{TypeFloat32, le32(0x7fc00001), `"0x7fc00001"`, `"NaN"`},
		{TypeFloat32, le32(0xffc00000), `"0xffc00000"`, `"NaN"`},
		{TypeFloat32, le32(0x7f800000), `"Infinity"`, `"Infinity"`},
		{TypeFloat32, le32(0xff800000), `"-Infinity"`, `"-Infinity"`},
		{TypeFloat32, le32(math.Float32bits(0.1)), `0.1`, `0.1`},
		{TypeFloat32, le32(0x80000000), `-0.0`, `-0.0`},
		// Floats stay JSON floats, as Python's repr writes them (GDAL reads
		// -100000000000000000000 as an int64).
		{TypeFloat32, le32(math.Float32bits(-1e20)), `-1e+20`, `-1e+20`},
		{TypeFloat32, le32(math.Float32bits(3)), `3.0`, `3.0`},
		{TypeFloat32, le32(math.Float32bits(1.5e-5)), `1.5e-05`, `1.5e-05`},
		{TypeFloat64, le64(0), `0.0`, `0.0`},
		{TypeFloat64, le64(math.Float64bits(1e21)), `1e+21`, `1e+21`},
		{TypeFloat64, le64(math.Float64bits(1e16)), `1e+16`, `1e+16`},
		{TypeFloat64, le64(math.Float64bits(1e15)), `1000000000000000.0`, `1000000000000000.0`},
		{TypeFloat64, le64(math.Float64bits(1e-4)), `0.0001`, `0.0001`},
		{TypeFloat64, le64(math.Float64bits(-1000.5)), `-1000.5`, `-1000.5`},
		{TypeFloat64, le64(math.Float64bits(-9.969209968386869e+36)), `-9.969209968386869e+36`, `-9.969209968386869e+36`}, // netCDF's default
		{TypeFloat16, le16(0x2e66), `0.1`, `0.1`},
		{TypeFloat16, le16(0x63d1), `1000.5`, `1000.5`},
		{TypeFloat16, le16(0x7bff), `65500.0`, `65500.0`}, // shortest that reads back as 65504, as numpy prints it
		{TypeFloat16, le16(0x0001), `6e-08`, `6e-08`},
		{TypeFloat16, le16(0x7e00), `"NaN"`, `"NaN"`},
		{TypeFloat16, le16(0x7e01), `"0x7e01"`, `"NaN"`},
		{TypeComplex64, append(le32(math.Float32bits(1)), le32(0x7fc00001)...), `[1.0,"0x7fc00001"]`, `[1.0,"NaN"]`},
		{typeR16, []byte{1, 255}, `[1,255]`, `"Af8="`},
		{typeS4, []byte("ab\x00\x00"), `"YWI="`, `"YWI="`},
		{typeS4, []byte{0, 0, 0, 0}, `""`, `""`},
		{typeU2, []byte{'a', 0, 0, 0, 0, 0, 0, 0}, `"a"`, `"a"`},
		{typeU2, []byte{0, 0xd8, 0, 0, 0, 0, 0, 0}, `error: code point 0xd800 at byte 0 is not valid Unicode`, `error: code point 0xd800`},
		{TypeString, []byte("<a&b>"), `"<a&b>"`, `"<a&b>"`},
		{TypeString, []byte{0xff}, `error: not valid UTF-8`, `error: not valid UTF-8`},
		{TypeBytes, []byte("hi"), `"aGk="`, `"aGk="`},
		{typeM8, le64(1 << 63), `-9223372036854775808`, `-9223372036854775808`},
		{typeObj, []byte(`{"a": 1}`), `error: object has no zarr v3 form`, `{"a":1}`},
		{typeObj, []byte(`{`), `error: object has no zarr v3 form`, `error: object item is not JSON`},
		{TypeInt16, []byte{1}, `error: fill_value: 1 bytes for int16, want 2`, `error: fill_value: 1 bytes for int16, want 2`},
	}
	for _, c := range cases {
		for _, f := range []struct {
			name   string
			format func(DataType, []byte) (json.RawMessage, error)
			want   string
		}{{"v3", FormatFillV3, c.v3}, {"v2", FormatFillV2, c.v2}} {
			got, err := f.format(c.d, c.v)
			if want, ok := strings.CutPrefix(f.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s %s %x: error %v, want one containing %q", f.name, c.d, c.v, err, want)
				}
				continue
			}
			if err != nil || string(got) != f.want {
				t.Errorf("%s %s %x = %s, %v; want %s", f.name, c.d, c.v, got, err, f.want)
			}
		}
	}
	if got, err := FormatFillV2(TypeInt8, nil); err != nil || string(got) != "null" {
		t.Errorf("FormatFillV2(nil) = %s, %v; want null", got, err)
	}
}

// Every float16 bit pattern, NaN payloads included, survives a v3 round
// trip; every non-NaN one survives v2.
func TestFloat16RoundTripAll(t *testing.T) {
	for u := range 1 << 16 {
		v := le16(uint16(u))
		checkRoundTrip(t, TypeFloat16, v, FormatFillV3, ParseFillV3)
		if x := float16ToFloat64(uint16(u)); !math.IsNaN(x) {
			checkRoundTrip(t, TypeFloat16, v, FormatFillV2, ParseFillV2)
			if back := float64ToFloat16(x); back != uint16(u) {
				t.Fatalf("float16 %#04x -> %v -> %#04x", u, x, back)
			}
		}
	}
}

func TestFillRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []DataType{TypeBool, TypeInt8, TypeInt16, TypeInt32, TypeInt64, TypeUint8, TypeUint16, TypeUint32, TypeUint64,
		TypeFloat32, TypeFloat64, TypeComplex64, TypeComplex128, typeR16, typeM8, TypeBytes}
	for _, d := range types {
		for range 2000 {
			v := make([]byte, d.Size)
			if d.Variable() {
				v = make([]byte, rng.IntN(5))
			}
			for i := range v {
				v[i] = byte(rng.Uint32())
			}
			if d.Kind == Bool {
				v[0] &= 1
			}
			checkRoundTrip(t, d, v, FormatFillV3, ParseFillV3)
		}
	}
}

func checkRoundTrip(t *testing.T, d DataType, v []byte,
	format func(DataType, []byte) (json.RawMessage, error),
	parse func(DataType, json.RawMessage) ([]byte, error)) {
	t.Helper()
	raw, err := format(d, v)
	if err != nil {
		t.Fatalf("%s format %x: %v", d, v, err)
	}
	back, err := parse(d, raw)
	if err != nil || !bytes.Equal(back, v) {
		t.Fatalf("%s %x -> %s -> %x, %v", d, v, raw, back, err)
	}
}
