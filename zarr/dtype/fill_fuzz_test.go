package dtype

import (
	"bytes"
	"encoding/json"
	"testing"
)

// fuzzTypes are the data types the fill value fuzzers pick from.
var fuzzTypes = []DataType{
	TypeBool, TypeInt8, TypeInt16, TypeInt32, TypeInt64, TypeUint8, TypeUint16, TypeUint32, TypeUint64,
	TypeFloat16, TypeFloat32, TypeFloat64, TypeComplex64, TypeComplex128, TypeString, TypeBytes,
	typeInt4, typeUint4, typeInt2, typeR16, typeS4, typeU2, typeM8, typeObj,
	{Kind: FixedBytes, Size: 7}, {Kind: FixedUnicode, Size: 52},
}

func fuzzTypeIndex(d DataType) uint8 {
	for i, t := range fuzzTypes {
		if t == d {
			return uint8(i)
		}
	}
	return 0
}

func fuzzFill(f *testing.F, cases []fillCase,
	parse func(DataType, json.RawMessage) ([]byte, error),
	format func(DataType, []byte) (json.RawMessage, error)) {
	for _, c := range cases {
		f.Add(fuzzTypeIndex(c.d), []byte(c.raw))
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		d := fuzzTypes[int(which)%len(fuzzTypes)]
		v, err := parse(d, raw)
		if err != nil {
			return
		}
		if !d.Variable() && v != nil && len(v) != d.Size {
			t.Fatalf("%s %s: %d bytes, want %d", d, raw, len(v), d.Size)
		}
		out, err := format(d, v)
		if err != nil {
			t.Fatalf("%s %s parsed to %x, which does not format: %v", d, raw, v, err)
		}
		back, err := parse(d, out)
		if err != nil || !bytes.Equal(back, v) || (back == nil) != (v == nil) {
			t.Fatalf("%s %s -> %x -> %s -> %x, %v", d, raw, v, out, back, err)
		}
	})
}

func FuzzParseFillV3(f *testing.F) { fuzzFill(f, fillV3Cases, ParseFillV3, FormatFillV3) }
func FuzzParseFillV2(f *testing.F) { fuzzFill(f, fillV2Cases, ParseFillV2, FormatFillV2) }
