package codec

import (
	"strings"

	"github.com/zarrfs/zarrfs/zarr/dtype"
)

// numpyNames are the numpy dtype names and one-character codes that
// numcodecs configurations use besides type strings ("<i4").
var numpyNames = map[string]string{
	"bool": "|b1", "?": "|b1",
	"int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
	"uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
	"float16": "<f2", "float32": "<f4", "float64": "<f8",
	"complex64": "<c8", "complex128": "<c16",
	"b": "|i1", "B": "|u1", "h": "<i2", "H": "<u2", "i": "<i4", "I": "<u4",
	"l": "<i8", "L": "<u8", "q": "<i8", "Q": "<u8",
	"e": "<f2", "f": "<f4", "d": "<f8", "F": "<c8", "D": "<c16",
	"half": "<f2", "single": "<f4", "double": "<f8", "float": "<f8", "int": "<i8",
}

// parseNumpyDType parses a numpy dtype as numcodecs configurations write it:
// a type string ("<i4", "|u1", ">f8"), one without byte order ("i4",
// native, taken as little-endian), or a name ("int32", "float64").
func parseNumpyDType(s string) (dtype.DataType, dtype.Endian, error) {
	if t, ok := numpyNames[s]; ok {
		s = t
	} else if s != "" && !strings.ContainsAny(s[:1], "<>|=") {
		s = "=" + s
	}
	d, e, err := dtype.ParseV2(s)
	if err != nil {
		return d, e, configError("dtype %q: %v", s, err)
	}
	if d.SwapSize() > 1 && e == dtype.NoEndian {
		e = dtype.Little
	}
	return d, e, nil
}
