package codec_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/dtype"
)

// testTypes are the data types round-trip tests cover.
var testTypes = []dtype.DataType{
	dtype.TypeBool,
	dtype.TypeInt8, dtype.TypeInt16, dtype.TypeInt32, dtype.TypeInt64,
	dtype.TypeUint8, dtype.TypeUint16, dtype.TypeUint32, dtype.TypeUint64,
	dtype.TypeFloat16, dtype.TypeFloat32, dtype.TypeFloat64,
	dtype.TypeComplex64, dtype.TypeComplex128,
	{Kind: dtype.RawBits, Size: 1}, {Kind: dtype.RawBits, Size: 2}, {Kind: dtype.RawBits, Size: 3},
	{Kind: dtype.FixedBytes, Size: 7}, {Kind: dtype.FixedUnicode, Size: 12},
	{Kind: dtype.Datetime, Size: 8, Unit: "ns"}, {Kind: dtype.Timedelta, Size: 8, Unit: "10s"},
	{Kind: dtype.Int, Size: 1, Bits: 4}, {Kind: dtype.Uint, Size: 1, Bits: 2},
	dtype.TypeString, dtype.TypeBytes, {Kind: dtype.Object},
}

// randomShape has rank 0..4 and dimensions 0..6 (rarely 0).
func randomShape(rng *rand.Rand) []int {
	shape := make([]int, rng.IntN(5))
	for i := range shape {
		shape[i] = 1 + rng.IntN(6)
		if rng.IntN(40) == 0 {
			shape[i] = 0
		}
	}
	return shape
}

// randomChunk fills a chunk of spec with random valid elements: any bits
// for fixed-size types (NaN payloads included), valid bool and sub-byte
// values, random UTF-8, bytes or JSON values.
func randomChunk(rng *rand.Rand, spec codec.Spec) *codec.Chunk {
	c := &codec.Chunk{Shape: slices.Clone(spec.Shape), Type: spec.Type}
	n := spec.NumElements()
	t := spec.Type
	switch t.Kind {
	case dtype.String, dtype.Bytes, dtype.Object:
		c.Items = make([][]byte, n)
		for i := range c.Items {
			c.Items[i] = randomItem(rng, t.Kind)
		}
		return c
	}
	c.Data = make([]byte, n*t.Size)
	for i := range c.Data {
		c.Data[i] = byte(rng.Uint32())
	}
	switch {
	case t.Kind == dtype.Bool:
		for i := range c.Data {
			c.Data[i] &= 1
		}
	case t.Bits > 0 && t.Bits < 8:
		shift := 8 - t.Bits
		for i, x := range c.Data {
			if t.Kind == dtype.Int {
				c.Data[i] = byte(int8(x<<shift) >> shift)
			} else {
				c.Data[i] = x << shift >> shift
			}
		}
	}
	return c
}

var sampleJSON = []string{`null`, `true`, `1`, `-7`, `2.5`, `1e+16`, `"x"`, `"é😀"`, `[1,"a",null]`, `{"a":[2.0],"b":1}`, `NaN`, `-Infinity`}

func randomItem(rng *rand.Rand, k dtype.Kind) []byte {
	switch k {
	case dtype.Object:
		return []byte(sampleJSON[rng.IntN(len(sampleJSON))])
	case dtype.String:
		runes := []rune("aZ0 é世🚀\n\"\\")
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteRune(runes[rng.IntN(len(runes))])
		}
		return []byte(sb.String())
	}
	b := make([]byte, rng.IntN(20))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// smallFloats is a float chunk of small multiples of 1/100, for lossy
// filters that need values in range.
func smallFloats(rng *rand.Rand, spec codec.Spec) *codec.Chunk {
	c := &codec.Chunk{Shape: slices.Clone(spec.Shape), Type: spec.Type, Data: make([]byte, spec.NumElements()*spec.Type.Size)}
	for i := 0; i < len(c.Data); i += spec.Type.Size {
		v := float64(rng.IntN(20000)-10000) / 100
		switch spec.Type.Size {
		case 4:
			binary.LittleEndian.PutUint32(c.Data[i:], math.Float32bits(float32(v)))
		case 8:
			binary.LittleEndian.PutUint64(c.Data[i:], math.Float64bits(v))
		}
	}
	return c
}

// bytesToBytes are chains after the array->bytes step; %d is the element
// size. The slow ones run on fewer cases.
var bytesToBytes = []string{
	``,
	`,{"name":"gzip","configuration":{"level":1}}`,
	`,{"name":"zstd","configuration":{"level":3,"checksum":true}}`,
	`,{"name":"zstd","configuration":{"level":0,"checksum":false}}`,
	`,{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"shuffle","blocksize":0}}`,
	`,{"name":"blosc","configuration":{"cname":"zstd","clevel":1,"shuffle":"bitshuffle","typesize":%d,"blocksize":0}}`,
	`,{"name":"blosc","configuration":{"cname":"blosclz","clevel":9,"shuffle":"noshuffle","blocksize":0}}`,
	`,{"name":"crc32c"}`,
	`,{"name":"numcodecs.zlib","configuration":{"level":1}}`,
	`,{"name":"numcodecs.gzip","configuration":{"level":1}}`,
	`,{"name":"numcodecs.zstd","configuration":{"level":1}}`,
	`,{"name":"numcodecs.lz4","configuration":{"acceleration":1}}`,
	`,{"name":"numcodecs.blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":-1,"blocksize":0}}`,
	`,{"name":"numcodecs.shuffle","configuration":{"elementsize":%d}}`,
	`,{"name":"numcodecs.crc32"},{"name":"numcodecs.adler32","configuration":{"location":"end"}}`,
	`,{"name":"numcodecs.crc32c"},{"name":"numcodecs.fletcher32"}`,
	`,{"name":"numcodecs.bz2","configuration":{"level":1}}`,
	`,{"name":"numcodecs.lzma"}`,
	`,{"name":"numcodecs.lzma","configuration":{"format":2,"preset":1}}`,
	`,{"name":"numcodecs.lzma","configuration":{"filters":[{"id":3,"dist":2},{"id":4},{"id":33,"preset":1}],"check":10}}`,
	`,{"name":"numcodecs.lzma","configuration":{"format":3,"filters":[{"id":7,"start_offset":64},{"id":4611686018427387905,"lc":1,"lp":1}]}}`,
	`,{"name":"numcodecs.blosc","configuration":{"cname":"zstd","clevel":3.0,"shuffle":"BIT","blocksize":0}}`,
}

func slow(b2b string) bool {
	return strings.Contains(b2b, "bz2") || strings.Contains(b2b, "lzma")
}

// arrayToBytes is the serialising step for a type.
func arrayToBytes(t dtype.DataType, big bool) string {
	switch t.Kind {
	case dtype.String:
		return `{"name":"vlen-utf8"}`
	case dtype.Bytes:
		return `{"name":"vlen-bytes"}`
	case dtype.Object:
		return `{"name":"numcodecs.json2"}`
	}
	if big {
		return `{"name":"bytes","configuration":{"endian":"big"}}`
	}
	return `{"name":"bytes","configuration":{"endian":"little"}}`
}

// TestRoundTrip: decode(encode(c)) == c for every codec, every data type and
// random shapes.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range testTypes {
		t.Run(typ.String(), func(t *testing.T) {
			for trial := range 6 {
				spec := codec.Spec{Shape: randomShape(rng), Type: typ}
				var heads []string
				heads = append(heads, arrayToBytes(typ, false), arrayToBytes(typ, true))
				if len(spec.Shape) > 1 {
					perm := rng.Perm(len(spec.Shape))
					heads = append(heads, fmt.Sprintf(`{"name":"transpose","configuration":{"order":%s}},%s`, ints(perm), arrayToBytes(typ, trial%2 == 0)))
				}
				heads = append(heads, filterHeads(typ)...)
				for _, head := range heads {
					for _, tail := range bytesToBytes {
						if slow(tail) && trial > 0 {
							continue
						}
						if strings.Contains(tail, "%d") {
							tail = fmt.Sprintf(tail, max(typ.Size, 1))
						}
						roundTrip(t, rng, spec, "["+head+tail+"]")
					}
				}
			}
		})
	}
}

func ints(p []int) string {
	s := make([]string, len(p))
	for i, x := range p {
		s[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// filterHeads are exactly invertible numcodecs filter chains for a type.
func filterHeads(t dtype.DataType) []string {
	le := `{"name":"bytes","configuration":{"endian":"little"}}`
	switch {
	case t.Kind == dtype.Bool:
		return []string{`{"name":"numcodecs.packbits"},{"name":"bytes"}`, `{"name":"numcodecs.astype","configuration":{"encode_dtype":"<i4","decode_dtype":"|b1"}},` + le}
	case (t.Kind == dtype.Int || t.Kind == dtype.Uint) && t.Bits == 0:
		name := fmt.Sprintf("%s%d", map[dtype.Kind]string{dtype.Int: "int", dtype.Uint: "uint"}[t.Kind], 8*t.Size)
		heads := []string{
			fmt.Sprintf(`{"name":"numcodecs.delta","configuration":{"dtype":%q}},%s`, name, le),
			fmt.Sprintf(`{"name":"numcodecs.delta","configuration":{"dtype":%q}},{"name":"bytes","configuration":{"endian":"big"}}`, name),
		}
		if t.Size < 8 {
			wide := map[dtype.Kind]string{dtype.Int: "<i8", dtype.Uint: "<u8"}[t.Kind]
			heads = append(heads, fmt.Sprintf(`{"name":"numcodecs.astype","configuration":{"encode_dtype":%q,"decode_dtype":%q}},%s`, wide, name, le))
		}
		return heads
	case t == dtype.TypeFloat32 || t == dtype.TypeFloat16:
		return []string{fmt.Sprintf(`{"name":"numcodecs.astype","configuration":{"encode_dtype":"<f8","decode_dtype":"<f%d"}},%s`, t.Size, le)}
	}
	return nil
}

func roundTrip(t *testing.T, rng *rand.Rand, spec codec.Spec, chainJSON string) {
	t.Helper()
	p, err := codec.NewPipeline(chain(t, chainJSON), spec)
	if err != nil {
		t.Fatalf("%v %s: %v", spec.Shape, chainJSON, err)
	}
	c := randomChunk(rng, spec)
	if strings.Contains(chainJSON, "astype") && spec.Type.Kind == dtype.Float {
		c = smallFloats(rng, spec) // NaN payloads do not survive casts
	}
	keep := cloneChunk(c)
	enc, err := p.Encode(c)
	if err != nil {
		t.Fatalf("%v %s: encode: %v", spec.Shape, chainJSON, err)
	}
	if size, fixed := p.EncodedSize(); fixed && size != len(enc) {
		t.Fatalf("%v %s: encoded %d bytes, EncodedSize says %d", spec.Shape, chainJSON, len(enc), size)
	}
	got, err := p.Decode(enc)
	if err != nil {
		t.Fatalf("%v %s: decode: %v", spec.Shape, chainJSON, err)
	}
	if !equalChunks(got, keep) {
		t.Fatalf("%v %s: round trip differs", spec.Shape, chainJSON)
	}
	if !equalChunks(c, keep) {
		t.Fatalf("%v %s: encoding modified its input", spec.Shape, chainJSON)
	}
}

func cloneChunk(c *codec.Chunk) *codec.Chunk {
	out := &codec.Chunk{Shape: slices.Clone(c.Shape), Type: c.Type, Data: slices.Clone(c.Data)}
	for _, it := range c.Items {
		out.Items = append(out.Items, slices.Clone(it))
	}
	return out
}

func equalChunks(a, b *codec.Chunk) bool {
	if !slices.Equal(a.Shape, b.Shape) || a.Type != b.Type || !bytes.Equal(a.Data, b.Data) || len(a.Items) != len(b.Items) {
		return false
	}
	for i := range a.Items {
		if !bytes.Equal(a.Items[i], b.Items[i]) {
			return false
		}
	}
	return true
}

// TestLossyFiltersIdempotent: fixedscaleoffset, quantize and bitround lose
// precision once, then decode(encode(x)) == x.
func TestLossyFiltersIdempotent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	le := `{"name":"bytes","configuration":{"endian":"little"}}`
	for _, tc := range []struct {
		typ   dtype.DataType
		chain string
		tol   float64 // how far a value may move
	}{
		{dtype.TypeFloat64, `[{"name":"numcodecs.fixedscaleoffset","configuration":{"offset":0,"scale":100,"dtype":"<f8","astype":"<i4"}},` + le + `]`, 0.005},
		{dtype.TypeFloat32, `[{"name":"numcodecs.fixedscaleoffset","configuration":{"offset":10,"scale":10,"dtype":"<f4","astype":"<i2"}},` + le + `]`, 0.0501},
		{dtype.TypeFloat64, `[{"name":"numcodecs.quantize","configuration":{"digits":1,"dtype":"<f8","astype":"<f4"}},` + le + `]`, 0.05},
		{dtype.TypeFloat32, `[{"name":"numcodecs.quantize","configuration":{"digits":3,"dtype":"<f4"}},` + le + `]`, 0.001},
		{dtype.TypeFloat32, `[{"name":"numcodecs.bitround","configuration":{"keepbits":10}},` + le + `]`, 0.1},
		{dtype.TypeFloat64, `[{"name":"numcodecs.bitround","configuration":{"keepbits":3}},` + le + `]`, 20},
		{dtype.TypeFloat16, `[{"name":"numcodecs.bitround","configuration":{"keepbits":10}},` + le + `]`, 0},
	} {
		spec := codec.Spec{Shape: []int{7, 9}, Type: tc.typ}
		p, err := codec.NewPipeline(chain(t, tc.chain), spec)
		if err != nil {
			t.Fatal(err)
		}
		var c *codec.Chunk
		if tc.typ == dtype.TypeFloat16 {
			c = randomChunk(rng, spec)
		} else {
			c = smallFloats(rng, spec)
		}
		once := decodeEncode(t, p, c)
		twice := decodeEncode(t, p, once)
		if !equalChunks(once, twice) {
			t.Errorf("%s: not idempotent", tc.chain)
		}
		for i := 0; i < len(c.Data); i += tc.typ.Size {
			a, b := floatAt(c.Data[i:], tc.typ.Size), floatAt(once.Data[i:], tc.typ.Size)
			if math.Abs(a-b) > tc.tol && !(math.IsNaN(a) && math.IsNaN(b)) {
				t.Fatalf("%s: %v became %v", tc.chain, a, b)
			}
		}
	}
}

func decodeEncode(t *testing.T, p *codec.Pipeline, c *codec.Chunk) *codec.Chunk {
	t.Helper()
	enc, err := p.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func floatAt(b []byte, size int) float64 {
	switch size {
	case 2:
		return 0 // float16: checked for idempotence only
	case 4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}
