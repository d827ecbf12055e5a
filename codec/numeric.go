package codec

import (
	"encoding/binary"
	"math"

	"github.com/zarrfs/zarrfs/zarr/dtype"
)

// num is one numeric element, read from its little-endian form, so that
// numcodecs filters can do numpy's arithmetic and casts on any data type.
type num struct {
	isFloat bool
	// i is an integer as 64-bit two's complement; unsigned marks a uint
	// (it matters for values >= 2^63 cast to float).
	i        uint64
	unsigned bool
	f, im    float64 // a float, or a complex number's parts
}

func floatNum(f float64) num { return num{isFloat: true, f: f} }

// loadNum reads element b (t.Size bytes) of type t.
func loadNum(b []byte, t dtype.DataType) num {
	switch t.Kind {
	case dtype.Float:
		return floatNum(loadFloat(b, t.Size))
	case dtype.Complex:
		h := t.Size / 2
		return num{isFloat: true, f: loadFloat(b, h), im: loadFloat(b[h:], h)}
	}
	var u uint64
	for k := t.Size - 1; k >= 0; k-- {
		u = u<<8 | uint64(b[k])
	}
	if t.Kind == dtype.Uint || t.Kind == dtype.Bool {
		return num{i: u, unsigned: true}
	}
	shift := 64 - 8*uint(t.Size)
	return num{i: uint64(int64(u<<shift) >> shift)}
}

func loadFloat(b []byte, size int) float64 {
	switch size {
	case 2:
		return f16ToF64(binary.LittleEndian.Uint16(b))
	case 4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// storeNum writes v as an element of type t with numpy's casting (C casts):
// integers wrap, floats truncate toward zero into integers, complex loses
// its imaginary part, anything nonzero is true.
func storeNum(b []byte, t dtype.DataType, v num) {
	switch t.Kind {
	case dtype.Bool:
		nz := v.i != 0
		if v.isFloat {
			nz = v.f != 0 || v.im != 0
		}
		b[0] = 0
		if nz {
			b[0] = 1
		}
		return
	case dtype.Float:
		storeFloat(b, t.Size, v.float(t.Size))
		return
	case dtype.Complex:
		h := t.Size / 2
		storeFloat(b, h, v.float(h))
		storeFloat(b[h:], h, roundTo(v.im, h))
		return
	}
	u := v.i
	if v.isFloat {
		switch {
		case v.f < 0 || t.Kind != dtype.Uint:
			u = uint64(int64(v.f))
		default:
			u = uint64(v.f)
		}
	}
	for k := 0; k < t.Size; k++ {
		b[k] = byte(u)
		u >>= 8
	}
}

// float is v as a float of size bytes, rounded once.
func (v num) float(size int) float64 {
	if v.isFloat {
		return roundTo(v.f, size)
	}
	if size == 4 {
		if v.unsigned {
			return float64(float32(v.i))
		}
		return float64(float32(int64(v.i)))
	}
	f := float64(int64(v.i))
	if v.unsigned {
		f = float64(v.i)
	}
	return roundTo(f, size)
}

func storeFloat(b []byte, size int, f float64) {
	switch size {
	case 2:
		binary.LittleEndian.PutUint16(b, f64ToF16(f))
	case 4:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(f)))
	default:
		binary.LittleEndian.PutUint64(b, math.Float64bits(f))
	}
}

// roundTo rounds f to the precision of a float of size bytes, as numpy
// arithmetic in that type does (half precision is computed in single
// precision and rounded).
func roundTo(f float64, size int) float64 {
	switch size {
	case 2:
		return f16ToF64(f64ToF16(float64(float32(f))))
	case 4:
		return float64(float32(f))
	}
	return f
}

// castAll converts every element of src (type st) into dst (type dt).
func castAll(dst []byte, dt dtype.DataType, src []byte, st dtype.DataType) {
	if dt == st {
		copy(dst, src)
		return
	}
	for i, j := 0, 0; i < len(src); i, j = i+st.Size, j+dt.Size {
		storeNum(dst[j:j+dt.Size], dt, loadNum(src[i:i+st.Size], st))
	}
}

// f16ToF64 converts IEEE 754 binary16 bits to a float64 (exactly).
func f16ToF64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(mant, -24)
	case 0x1f:
		if mant != 0 {
			return math.Float64frombits(0x7ff8000000000000 | uint64(h&0x8000)<<48 | uint64(h&0x3ff)<<42)
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1024+mant, exp-25)
}

// f64ToF16 rounds a float64 to the nearest binary16 (ties to even).
func f64ToF16(f float64) uint16 {
	bits := math.Float64bits(f)
	sign := uint16(bits>>48) & 0x8000
	exp := int(bits>>52) & 0x7ff
	mant := bits & (1<<52 - 1)
	if exp == 0x7ff {
		if mant != 0 { // NaN: keep the top payload bits, stay a NaN
			return sign | 0x7c00 | 0x200 | uint16(mant>>42)
		}
		return sign | 0x7c00
	}
	e := exp - 1023 + 15 // biased half exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	var m uint64 // 53-bit significand to shift
	var shift uint
	if e <= 0 {
		if e < -10 {
			return sign // below half the smallest subnormal
		}
		m, shift = mant|1<<52, uint(43-e)
		e = 0
	} else {
		m, shift = mant, 42
	}
	half := uint64(1) << (shift - 1)
	rem := m & (1<<shift - 1)
	q := m >> shift
	if rem > half || rem == half && q&1 == 1 {
		q++ // may carry into the exponent, up to infinity: still correct
	}
	return sign | (uint16(e)<<10 + uint16(q))
}
