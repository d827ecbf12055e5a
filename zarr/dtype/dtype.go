// Package dtype models Zarr data types for both format versions: the v3
// names (core and the extensions zarr-python 3 and zarrs write) and the v2
// numpy type strings.
//
// Decoded chunks hold fixed-size elements packed little-endian in C order
// (complex numbers as (real, imag) pairs, bool as one 0/1 byte, sub-byte
// integers as one sign- or zero-extended byte), so a decoded array is
// directly the "little-endian C-order bytes" the fixtures digest.
// Variable-length types (String, Bytes) are held as items, not packed.
package dtype

import (
	"fmt"
	"strconv"
)

// Kind is the family of a data type.
type Kind uint8

// The kinds of data types.
const (
	Bool Kind = iota + 1
	Int
	Uint
	Float
	Complex
	RawBits      // v3 rN, v2 |V<n>: opaque fixed-size bytes
	FixedBytes   // v2 |S<n>, v3 null_terminated_bytes: NUL-padded bytes
	FixedUnicode // v2 <U<n>, v3 fixed_length_utf32: UCS-4 code points, NUL-padded
	String       // variable-length UTF-8 (v3 "string", v2 |O with vlen-utf8)
	Bytes        // variable-length bytes (v3 "bytes", v2 |O with vlen-bytes)
	Datetime     // numpy.datetime64 (int64 ticks)
	Timedelta    // numpy.timedelta64 (int64 ticks)
	// Object is the numpy object type (v2 "|O"): the v2 object codec in the
	// filters decides what the elements are. Items of an Object array hold
	// each value as compact JSON.
	Object
)

var kindNames = [...]string{"", "bool", "int", "uint", "float", "complex", "raw", "fixed-bytes", "fixed-unicode", "string", "bytes", "datetime", "timedelta", "object"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// DataType is one Zarr data type.
type DataType struct {
	Kind Kind
	// Size is the size of one decoded element in bytes; 0 for variable-length types.
	Size int
	// Bits is the significant width of sub-byte integers (int2, int4, uint4...);
	// 0 means 8*Size.
	Bits int
	// Unit is the numpy datetime/timedelta unit, e.g. "ns" or "10s".
	Unit string
}

// Common data types.
var (
	TypeBool       = DataType{Kind: Bool, Size: 1}
	TypeInt8       = DataType{Kind: Int, Size: 1}
	TypeInt16      = DataType{Kind: Int, Size: 2}
	TypeInt32      = DataType{Kind: Int, Size: 4}
	TypeInt64      = DataType{Kind: Int, Size: 8}
	TypeUint8      = DataType{Kind: Uint, Size: 1}
	TypeUint16     = DataType{Kind: Uint, Size: 2}
	TypeUint32     = DataType{Kind: Uint, Size: 4}
	TypeUint64     = DataType{Kind: Uint, Size: 8}
	TypeFloat16    = DataType{Kind: Float, Size: 2}
	TypeFloat32    = DataType{Kind: Float, Size: 4}
	TypeFloat64    = DataType{Kind: Float, Size: 8}
	TypeComplex64  = DataType{Kind: Complex, Size: 8}
	TypeComplex128 = DataType{Kind: Complex, Size: 16}
	TypeString     = DataType{Kind: String}
	TypeBytes      = DataType{Kind: Bytes}
)

// Variable reports whether elements have no fixed size.
func (d DataType) Variable() bool { return d.Kind == String || d.Kind == Bytes || d.Kind == Object }

// SwapSize is the width of the units that change order with endianness:
// the whole element for numbers, each part of a complex number, each code
// point of a UCS-4 string, and 1 (nothing to swap) for bytes-like types.
func (d DataType) SwapSize() int {
	switch d.Kind {
	case Int, Uint, Float, Datetime, Timedelta:
		return d.Size
	case Complex:
		return d.Size / 2
	case FixedUnicode:
		return 4
	}
	return 1
}

// Numeric reports whether elements are numbers (integers, floats, complex, bool).
func (d DataType) Numeric() bool {
	switch d.Kind {
	case Bool, Int, Uint, Float, Complex:
		return true
	}
	return false
}

// String returns the v3 name of the data type (a readable name for types
// whose v3 form is an object).
func (d DataType) String() string {
	switch d.Kind {
	case Bool:
		return "bool"
	case Int, Uint:
		bits := d.Bits
		if bits == 0 {
			bits = 8 * d.Size
		}
		return d.Kind.String() + strconv.Itoa(bits)
	case Float:
		return "float" + strconv.Itoa(8*d.Size)
	case Complex:
		return "complex" + strconv.Itoa(8*d.Size)
	case RawBits:
		return "r" + strconv.Itoa(8*d.Size)
	case FixedBytes:
		return "null_terminated_bytes[" + strconv.Itoa(d.Size) + "]"
	case FixedUnicode:
		return "fixed_length_utf32[" + strconv.Itoa(d.Size) + "]"
	case String:
		return "string"
	case Bytes:
		return "bytes"
	case Datetime:
		return "numpy.datetime64[" + d.Unit + "]"
	case Timedelta:
		return "numpy.timedelta64[" + d.Unit + "]"
	case Object:
		return "object"
	}
	return fmt.Sprintf("invalid(%d)", d.Kind)
}

// Endian is a byte order of stored elements.
type Endian uint8

// Byte orders. NoEndian is used where order does not apply (1-byte types).
const (
	NoEndian Endian = iota
	Little
	Big
)

func (e Endian) String() string {
	switch e {
	case Little:
		return "little"
	case Big:
		return "big"
	}
	return "none"
}
