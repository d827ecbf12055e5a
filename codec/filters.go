package codec

import (
	"encoding/binary"
	"encoding/json"
	"math"

	"github.com/zarrfs/zarrfs/zarr/dtype"
)

// The numcodecs filters (array->array codecs in v3 terms). numcodecs views
// the chunk's bytes as the filter's dtype; here the decoded chunk is read as
// that dtype too, which must have the chunk's element size.

func init() {
	Register("numcodecs.delta", newDelta)
	Register("numcodecs.fixedscaleoffset", newFixedScaleOffset)
	Register("numcodecs.astype", newAsType)
	Register("numcodecs.quantize", newQuantize)
	Register("numcodecs.bitround", newBitRound)
	Register("numcodecs.packbits", newPackBits)
	Register("numcodecs.shuffle", newShuffle)
}

// filterCodec is an elementwise array->array codec given by two functions
// over whole buffers.
type filterCodec struct {
	dec, enc Spec
	// encode and decode fill dst from src; nil means the bytes are
	// unchanged (only the data type label changes).
	encode, decode func(dst, src []byte) error
}

func (f *filterCodec) EncodedSpec() Spec { return f.enc }

func (f *filterCodec) Encode(c *Chunk) (*Chunk, error) {
	if err := c.Check(f.dec); err != nil {
		return nil, err
	}
	return run(f.encode, c.Data, f.enc)
}

func (f *filterCodec) Decode(c *Chunk) (*Chunk, error) {
	if err := c.Check(f.enc); err != nil {
		return nil, err
	}
	return run(f.decode, c.Data, f.dec)
}

func run(fn func(dst, src []byte) error, src []byte, to Spec) (*Chunk, error) {
	out := &Chunk{Shape: to.Shape, Type: to.Type, Data: src}
	if fn != nil {
		out.Data = make([]byte, to.DecodedSize())
		if err := fn(out.Data, src); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// filterTypes parses a filter's dtype (how it reads the decoded chunk) and
// astype (what it produces; dtype when empty), and makes the encoded spec.
func filterTypes(spec Spec, dt, at string, ok func(dtype.DataType) bool) (d, a dtype.DataType, enc Spec, err error) {
	if spec.Type.Variable() {
		return d, a, enc, configError("numcodecs filters cannot read variable-length %s elements", spec.Type)
	}
	if dt == "" {
		d = spec.Type
	} else if d, _, err = parseNumpyDType(dt); err != nil {
		return d, a, enc, err
	}
	a = d
	if at != "" {
		if a, _, err = parseNumpyDType(at); err != nil {
			return d, a, enc, err
		}
	}
	if d.Size != spec.Type.Size {
		return d, a, enc, configError("dtype %s does not match the chunk's %s", d, spec.Type)
	}
	if !ok(d) || !ok(a) {
		return d, a, enc, configError("dtype %s / astype %s is not supported by this filter", d, a)
	}
	return d, a, encodedSpec(spec, a), nil
}

// encodedSpec is spec with elements cast to t (the fill value too).
func encodedSpec(spec Spec, t dtype.DataType) Spec {
	enc := Spec{Shape: spec.Shape, Type: t}
	if len(spec.Fill) == spec.Type.Size {
		enc.Fill = make([]byte, t.Size)
		castAll(enc.Fill, t, spec.Fill, spec.Type)
	}
	return enc
}

func isNumber(t dtype.DataType) bool {
	return t.Kind == dtype.Int || t.Kind == dtype.Uint || t.Kind == dtype.Float
}

func isReal(t dtype.DataType) bool { return t.Kind == dtype.Float }

// ---- delta: first element, then differences ----

func newDelta(config json.RawMessage, spec Spec) (any, error) {
	var cfg struct {
		DType  string `json:"dtype"`
		AsType string `json:"astype"`
	}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	d, a, enc, err := filterTypes(spec, cfg.DType, cfg.AsType, isNumber)
	if err != nil {
		return nil, err
	}
	ds, as := d.Size, a.Size
	return &filterCodec{dec: spec, enc: enc,
		encode: func(dst, src []byte) error {
			var prev num
			for i, j := 0, 0; i < len(src); i, j = i+ds, j+as {
				cur := loadNum(src[i:i+ds], d)
				diff := cur
				if i > 0 {
					diff = subtract(cur, prev, d)
				}
				storeNum(dst[j:j+as], a, diff)
				prev = cur
			}
			return nil
		},
		decode: func(dst, src []byte) error {
			// numpy's cumsum accumulates in the encoded type (integers in
			// 64 bits), casting each sum to the decoded type.
			acc := num{isFloat: a.Kind == dtype.Float}
			for i, j := 0, 0; j < len(src); i, j = i+ds, j+as {
				e := loadNum(src[j:j+as], a)
				if acc.isFloat {
					acc.f = roundTo(acc.f+e.f, as)
				} else {
					acc.i += e.i
					acc.unsigned = e.unsigned
				}
				storeNum(dst[i:i+ds], d, acc)
			}
			return nil
		},
	}, nil
}

// subtract is x - y in type t: integers wrap at t's width, floats round to
// t's precision.
func subtract(x, y num, t dtype.DataType) num {
	if t.Kind == dtype.Float {
		return floatNum(roundTo(x.f-y.f, t.Size))
	}
	shift := 64 - 8*uint(t.Size)
	v := (x.i - y.i) << shift
	if t.Kind == dtype.Int {
		return num{i: uint64(int64(v) >> shift)}
	}
	return num{i: v >> shift, unsigned: true}
}

// ---- fixedscaleoffset: round((x - offset) * scale) ----

func newFixedScaleOffset(config json.RawMessage, spec Spec) (any, error) {
	var cfg struct {
		Offset float64 `json:"offset"`
		Scale  float64 `json:"scale"`
		DType  string  `json:"dtype"`
		AsType string  `json:"astype"`
	}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	if cfg.Scale == 0 || math.IsNaN(cfg.Scale) {
		return nil, configError("fixedscaleoffset scale must be nonzero, got %v", cfg.Scale)
	}
	d, a, enc, err := filterTypes(spec, cfg.DType, cfg.AsType, isNumber)
	if err != nil {
		return nil, err
	}
	ds, as := d.Size, a.Size
	// numpy computes in the float type of the array operand, and in float64
	// for integer arrays.
	precision := func(t dtype.DataType) int {
		if t.Kind == dtype.Float {
			return t.Size
		}
		return 8
	}
	pe, pd := precision(d), precision(a)
	offset, scale := cfg.Offset, cfg.Scale
	return &filterCodec{dec: spec, enc: enc,
		encode: func(dst, src []byte) error {
			for i, j := 0, 0; i < len(src); i, j = i+ds, j+as {
				x := loadNum(src[i:i+ds], d).float(8)
				x = roundTo(roundTo(x-offset, pe)*scale, pe)
				storeNum(dst[j:j+as], a, floatNum(math.RoundToEven(x)))
			}
			return nil
		},
		decode: func(dst, src []byte) error {
			for i, j := 0, 0; j < len(src); i, j = i+ds, j+as {
				x := loadNum(src[j:j+as], a).float(8)
				x = roundTo(roundTo(x/scale, pd)+offset, pd)
				storeNum(dst[i:i+ds], d, floatNum(x))
			}
			return nil
		},
	}, nil
}

// ---- astype: a cast ----

func newAsType(config json.RawMessage, spec Spec) (any, error) {
	var cfg struct {
		EncodeDType string `json:"encode_dtype"`
		DecodeDType string `json:"decode_dtype"`
	}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	if cfg.EncodeDType == "" {
		return nil, configError("astype needs encode_dtype")
	}
	d, a, enc, err := filterTypes(spec, cfg.DecodeDType, cfg.EncodeDType, func(t dtype.DataType) bool { return t.Numeric() })
	if err != nil {
		return nil, err
	}
	return &filterCodec{dec: spec, enc: enc,
		encode: func(dst, src []byte) error { castAll(dst, a, src, d); return nil },
		decode: func(dst, src []byte) error { castAll(dst, d, src, a); return nil },
	}, nil
}

// ---- quantize: lossy rounding to a number of decimal digits; decoding is a cast ----

func newQuantize(config json.RawMessage, spec Spec) (any, error) {
	var cfg struct {
		Digits pyInt  `json:"digits"`
		DType  string `json:"dtype"`
		AsType string `json:"astype"`
	}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	d, a, enc, err := filterTypes(spec, cfg.DType, cfg.AsType, isReal)
	if err != nil {
		return nil, err
	}
	// numcodecs: the power of two at least as fine as 10^-digits.
	exp := math.Log(math.Pow(10, -float64(cfg.Digits))) / math.Log(10)
	if exp < 0 {
		exp = math.Floor(exp)
	} else {
		exp = math.Ceil(exp)
	}
	scale := math.Pow(2, math.Ceil(math.Log(math.Pow(10, -exp))/math.Log(2)))
	ds, as := d.Size, a.Size
	return &filterCodec{dec: spec, enc: enc,
		encode: func(dst, src []byte) error {
			for i, j := 0, 0; i < len(src); i, j = i+ds, j+as {
				x := roundTo(math.RoundToEven(roundTo(scale*loadNum(src[i:i+ds], d).f, ds))/scale, ds)
				storeNum(dst[j:j+as], a, floatNum(x))
			}
			return nil
		},
		decode: func(dst, src []byte) error { castAll(dst, d, src, a); return nil },
	}, nil
}

// ---- bitround: keep the top keepbits mantissa bits; decoding is the identity ----

func newBitRound(config json.RawMessage, spec Spec) (any, error) {
	var cfg struct {
		KeepBits *pyInt `json:"keepbits"`
	}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	if spec.Type.Kind != dtype.Float {
		return nil, configError("bitround rounds floats, not %s", spec.Type)
	}
	mantissa := map[int]int{2: 10, 4: 23, 8: 52}[spec.Type.Size]
	if cfg.KeepBits == nil || *cfg.KeepBits < 0 || int(*cfg.KeepBits) > mantissa {
		return nil, configError("bitround keepbits must be in 0..%d for %s", mantissa, spec.Type)
	}
	f := &filterCodec{dec: spec, enc: spec}
	if drop := uint(mantissa - int(*cfg.KeepBits)); drop > 0 {
		size := spec.Type.Size
		f.encode = func(dst, src []byte) error {
			for i := 0; i < len(src); i += size {
				// Round half to even at the kept precision, then mask.
				var u uint64
				for k := size - 1; k >= 0; k-- {
					u = u<<8 | uint64(src[i+k])
				}
				u += (u>>drop)&1 + (1<<(drop-1) - 1)
				u &^= 1<<drop - 1
				for k := 0; k < size; k++ {
					dst[i+k] = byte(u >> (8 * k))
				}
			}
			return nil
		}
	}
	return f, nil
}

// ---- packbits: bools as bits, most significant first, after a byte that
// counts the padding bits ----

func newPackBits(_ json.RawMessage, spec Spec) (any, error) {
	if spec.Type.Kind != dtype.Bool {
		return nil, configError("packbits packs bool, not %s", spec.Type)
	}
	n := spec.NumElements()
	enc := Spec{Shape: []int{1 + (n+7)/8}, Type: dtype.TypeUint8}
	pad := byte((8 - n%8) % 8)
	return &filterCodec{dec: spec, enc: enc,
		encode: func(dst, src []byte) error {
			dst[0] = pad
			for i, x := range src {
				if x != 0 {
					dst[1+i/8] |= 0x80 >> (i % 8)
				}
			}
			return nil
		},
		decode: func(dst, src []byte) error {
			if src[0] != pad {
				return corrupt("packbits: %d padding bits, want %d for %d elements", src[0], pad, n)
			}
			for i := range dst {
				dst[i] = src[1+i/8] >> (7 - i%8) & 1
			}
			return nil
		},
	}, nil
}

// ---- shuffle (numcodecs): byte k of every element together, for each k ----

type shuffleCodec struct{ size int }

func newShuffle(config json.RawMessage, _ Spec) (any, error) {
	cfg := struct {
		ElementSize pyInt `json:"elementsize"`
	}{4}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	return &shuffleCodec{int(max(cfg.ElementSize, 1))}, nil
}

func (*shuffleCodec) EncodedSize(n int) (int, bool) { return n, true }

func (s *shuffleCodec) Encode(b []byte) ([]byte, error) {
	if len(b)%s.size != 0 {
		return nil, configError("shuffle: %d bytes is not a multiple of elementsize %d", len(b), s.size)
	}
	return byteShuffle(b, s.size, false), nil
}

func (s *shuffleCodec) Decode(b []byte, maxSize int) ([]byte, error) {
	if maxSize >= 0 && len(b) > maxSize {
		return nil, sizeExceeded(maxSize)
	}
	if len(b)%s.size != 0 {
		return nil, corrupt("shuffle: %d bytes is not a multiple of elementsize %d", len(b), s.size)
	}
	return byteShuffle(b, s.size, true), nil
}

// byteShuffle transposes b as an (elements x size) byte matrix, or back
// when inverse. size 1 returns b.
func byteShuffle(b []byte, size int, inverse bool) []byte {
	if size == 1 {
		return b
	}
	n := len(b) / size
	out := make([]byte, len(b))
	if size == 2 && !inverse {
		lo, hi := out[:n], out[n:]
		for i := range n {
			v := binary.LittleEndian.Uint16(b[2*i:])
			lo[i], hi[i] = byte(v), byte(v>>8)
		}
		return out
	}
	if size == 2 {
		lo, hi := b[:n], b[n:]
		for i := range n {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(lo[i])|uint16(hi[i])<<8)
		}
		return out
	}
	for k := 0; k < size; k++ {
		plane := out[k*n : (k+1)*n]
		if inverse {
			plane = b[k*n : (k+1)*n]
		}
		for i := range plane {
			if inverse {
				out[i*size+k] = plane[i]
			} else {
				plane[i] = b[i*size+k]
			}
		}
	}
	return out
}
