package codec

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
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
	"p": "<i8", "P": "<u8", "bool_": "|b1", "byte": "|i1", "ubyte": "|u1", "short": "<i2", "ushort": "<u2",
	"intc": "<i4", "uintc": "<u4", "long": "<i8", "ulong": "<u8", "longlong": "<i8", "ulonglong": "<u8",
	"int_": "<i8", "uint": "<u8", "intp": "<i8", "uintp": "<u8", "float_": "<f8",
	"csingle": "<c8", "cdouble": "<c16", "complex_": "<c16", "complex": "<c16",
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

// pyInt is an integer of a numcodecs configuration in the forms numcodecs
// takes and writes back (get_config returns what the codec was given): a
// JSON integer, a float with an integral value (5.0) or a boolean
// (Python's bool is an int).
type pyInt int

func (n *pyInt) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	switch s {
	case "null":
		return nil
	case "true":
		*n = 1
		return nil
	case "false":
		*n = 0
		return nil
	}
	if i, err := strconv.ParseInt(s, 10, 0); err == nil {
		*n = pyInt(i)
		return nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		*n = pyInt(f)
		return nil
	}
	return fmt.Errorf("%s is not an integer", s)
}
