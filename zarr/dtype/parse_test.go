package dtype

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParseV3Names(t *testing.T) {
	cases := []struct {
		raw  string
		want DataType
	}{
		{`"bool"`, TypeBool},
		{`"int8"`, TypeInt8},
		{`"uint64"`, TypeUint64},
		{`"float16"`, TypeFloat16},
		{`"complex128"`, TypeComplex128},
		{`"int4"`, typeInt4},
		{`"r16"`, typeR16},
		{`"string"`, TypeString},
		{`"variable_length_bytes"`, TypeBytes},
		{`{"name": "raw_bytes", "configuration": {"length_bytes": 2}}`, typeR16},
		{`{"name": "null_terminated_bytes", "configuration": {"length_bytes": 4}}`, typeS4},
		{`{"name": "fixed_length_utf32", "configuration": {"length_bytes": 8}}`, typeU2},
		{`{"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}}`, typeM8},
		{`{"name": "numpy.timedelta64", "configuration": {"unit": "s", "scale_factor": 10}}`, DataType{Kind: Timedelta, Size: 8, Unit: "10s"}},
	}
	for _, c := range cases {
		got, err := ParseV3(json.RawMessage(c.raw))
		if err != nil || got != c.want {
			t.Errorf("ParseV3(%s) = %#v, %v; want %#v", c.raw, got, err, c.want)
			continue
		}
		raw, err := FormatV3(got)
		if err != nil {
			t.Errorf("FormatV3(%v): %v", got, err)
			continue
		}
		if back, err := ParseV3(raw); err != nil || back != got {
			t.Errorf("%s -> %s -> %#v, %v", c.raw, raw, back, err)
		}
	}
	for _, raw := range []string{`"float8"`, `"r12"`, `"r0"`, `{"name": "bfloat16"}`} {
		if _, err := ParseV3(json.RawMessage(raw)); !errors.Is(err, ErrUnknown) {
			t.Errorf("ParseV3(%s) = %v, want ErrUnknown", raw, err)
		}
	}
}

func TestParseV2Typestrs(t *testing.T) {
	cases := []struct {
		typestr string
		want    DataType
		endian  Endian
	}{
		{"|b1", TypeBool, NoEndian},
		{"|i1", TypeInt8, NoEndian},
		{"<i2", TypeInt16, Little},
		{">u8", TypeUint64, Big},
		{"<f2", TypeFloat16, Little},
		{">c16", TypeComplex128, Big},
		{"|S4", typeS4, NoEndian},
		{"<U2", typeU2, Little},
		{">U2", typeU2, Big},
		{"|V2", typeR16, NoEndian},
		{"<M8[ns]", typeM8, Little},
		{"|O", typeObj, NoEndian},
	}
	for _, c := range cases {
		got, e, err := ParseV2(c.typestr)
		if err != nil || got != c.want || e != c.endian {
			t.Errorf("ParseV2(%q) = %#v %v, %v; want %#v %v", c.typestr, got, e, err, c.want, c.endian)
			continue
		}
		if back, err := FormatV2(got, e); err != nil || back != c.typestr {
			t.Errorf("FormatV2(%v, %v) = %q, %v; want %q", got, e, back, err, c.typestr)
		}
	}
	for _, s := range []string{"", "<", "<i3", "<f16", "|i2", "<x4", "*i4", "<M8", "<M4[ns]"} {
		if _, _, err := ParseV2(s); err == nil {
			t.Errorf("ParseV2(%q) succeeded", s)
		}
	}
}
