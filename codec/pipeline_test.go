package codec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

const le = `{"name":"bytes","configuration":{"endian":"little"}}`

func TestPipelineOrdering(t *testing.T) {
	spec := codec.Spec{Shape: []int{4, 4}, Type: dtype.TypeInt16}
	for _, tc := range []struct{ chain, mention string }{
		{`[{"name":"gzip","configuration":{"level":1}},` + le + `]`, "before an array->bytes codec"},
		{`[` + le + `,{"name":"transpose","configuration":{"order":[1,0]}}]`, "after the array->bytes codec"},
		{`[` + le + `,` + le + `]`, "second array->bytes codec"},
		{`[{"name":"transpose","configuration":{"order":[1,0]}}]`, "no array->bytes codec"},
		{`[]`, "no array->bytes codec"},
		{`[{"name":"transpose","configuration":{"order":[0,0]}},` + le + `]`, "not a permutation"},
		{`[{"name":"transpose","configuration":{"order":[0]}},` + le + `]`, "has 1 axes"},
		{`[{"name":"bytes","configuration":{"endian":"middle"}}]`, "endian"},
		{`[{"name":"vlen-utf8"}]`, "vlen-utf8"},
		{`[` + le + `,{"name":"blosc","configuration":{"cname":"lzma","clevel":5,"shuffle":"noshuffle"}}]`, "cname"},
		{`[` + le + `,{"name":"zstd","configuration":{"level":99}}]`, "level"},
		{`[{"name":"numcodecs.delta","configuration":{"dtype":"<i4"}},` + le + `]`, "does not match"},
		{`[{"name":"numcodecs.bitround","configuration":{"keepbits":3}},` + le + `]`, "floats"},
		{`[` + le + `,{"name":"numcodecs.lzma","configuration":{"format":3}}]`, "FORMAT_RAW"},
		{`[` + le + `,{"name":"numcodecs.lzma","configuration":{"filters":[{"id":10},{"id":33}]}}]`, "filter 0xa"},
		{`[` + le + `,{"name":"numcodecs.lzma","configuration":{"filters":[{"id":33},{"id":3}]}}]`, "last"},
		{`[` + le + `,{"name":"numcodecs.lzma","configuration":{"filters":[{"id":3,"dist":0},{"id":33}]}}]`, "dist 0"},
		{`[` + le + `,{"name":"numcodecs.lzma","configuration":{"filters":[{"id":3,"distance":4},{"id":33}]}}]`, "no option"},
		{`[` + le + `,{"name":"numcodecs.lzma","configuration":{"filters":[{"id":4611686018427387905}]}}]`, "lzma1"},
		{`[` + le + `,{"name":"numcodecs.lzma","configuration":{"preset":1,"filters":[{"id":33}]}}]`, "preset and filters"},
		{`[` + le + `,{"name":"numcodecs.lzma","configuration":{"format":0,"filters":[{"id":33}]}}]`, "FORMAT_AUTO"},
		{`[` + le + `,{"name":"numcodecs.blosc","configuration":{"shuffle":"WORD"}}]`, "WORD"},
		{`[` + le + `,{"name":"numcodecs.blosc","configuration":{"clevel":5.5}}]`, "5.5"},
	} {
		_, err := codec.NewPipeline(chain(t, tc.chain), spec)
		if !errors.Is(err, codec.ErrConfig) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: error %v, want ErrConfig mentioning %q", tc.chain, err, tc.mention)
		}
	}
}

func TestUnknownCodec(t *testing.T) {
	_, err := codec.NewPipeline(chain(t, `[`+le+`,{"name":"zfp"}]`), codec.Spec{Shape: []int{2}, Type: dtype.TypeInt16})
	if !errors.Is(err, codec.ErrUnknownCodec) || !strings.Contains(err.Error(), `"zfp"`) {
		t.Fatalf("error %v, want ErrUnknownCodec naming zfp", err)
	}
}

// encodeRandom encodes a random chunk with chainJSON.
func encodeRandom(t *testing.T, spec codec.Spec, chainJSON string) (*codec.Pipeline, []byte) {
	t.Helper()
	p, err := codec.NewPipeline(chain(t, chainJSON), spec)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := p.Encode(smoothChunk(spec))
	if err != nil {
		t.Fatal(err)
	}
	return p, enc
}

// smoothChunk is compressible data of spec's fixed-size type.
func smoothChunk(spec codec.Spec) *codec.Chunk {
	c := codec.NewChunk(spec)
	for i := range c.Data {
		c.Data[i] = byte(i / 7)
	}
	return c
}

func TestChecksumErrors(t *testing.T) {
	spec := codec.Spec{Shape: []int{10, 10}, Type: dtype.TypeUint16}
	for _, tail := range []string{
		`{"name":"crc32c"}`,
		`{"name":"numcodecs.crc32c"}`,
		`{"name":"numcodecs.crc32"}`,
		`{"name":"numcodecs.adler32"}`,
		`{"name":"numcodecs.fletcher32"}`,
		`{"name":"numcodecs.crc32","configuration":{"location":"end"}}`,
	} {
		p, enc := encodeRandom(t, spec, `[`+le+`,`+tail+`]`)
		for _, pos := range []int{0, len(enc) / 2, len(enc) - 1} {
			bad := bytes.Clone(enc)
			bad[pos] ^= 0x10
			if _, err := p.Decode(bad); !errors.Is(err, codec.ErrChecksum) {
				t.Errorf("%s, byte %d flipped: error %v, want ErrChecksum", tail, pos, err)
			}
		}
		if _, err := p.Decode(enc); err != nil {
			t.Errorf("%s: intact data: %v", tail, err)
		}
	}
	// Compressors with their own checksums: flip a byte of the trailer.
	for _, tail := range []string{
		`{"name":"gzip","configuration":{"level":1}}`,
		`{"name":"zstd","configuration":{"level":1,"checksum":true}}`,
		`{"name":"numcodecs.zlib","configuration":{"level":1}}`,
	} {
		p, enc := encodeRandom(t, spec, `[`+le+`,`+tail+`]`)
		bad := bytes.Clone(enc)
		bad[len(bad)-5+boolInt(strings.Contains(tail, "zlib") || strings.Contains(tail, "zstd"))] ^= 1
		if _, err := p.Decode(bad); !errors.Is(err, codec.ErrChecksum) {
			t.Errorf("%s: error %v, want ErrChecksum", tail, err)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestTruncatedIsCorrupt(t *testing.T) {
	spec := codec.Spec{Shape: []int{64, 64}, Type: dtype.TypeUint16}
	for _, tail := range []string{
		`,{"name":"gzip","configuration":{"level":5}}`,
		`,{"name":"zstd","configuration":{"level":3,"checksum":false}}`,
		`,{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"shuffle"}}`,
		`,{"name":"blosc","configuration":{"cname":"zstd","clevel":5,"shuffle":"bitshuffle"}}`,
		`,{"name":"numcodecs.zlib","configuration":{"level":1}}`,
		`,{"name":"numcodecs.lz4"}`,
		`,{"name":"numcodecs.bz2","configuration":{"level":1}}`,
		`,{"name":"numcodecs.lzma"}`,
		`,{"name":"numcodecs.lzma","configuration":{"filters":[{"id":3,"dist":2},{"id":33,"preset":1}]}}`,
		`,{"name":"numcodecs.lzma","configuration":{"format":3,"filters":[{"id":3,"dist":2},{"id":33,"preset":1}]}}`,
		`,{"name":"numcodecs.lzma","configuration":{"format":2}}`,
		`,{"name":"numcodecs.shuffle","configuration":{"elementsize":2}}`,
		``,
	} {
		p, enc := encodeRandom(t, spec, `[`+le+tail+`]`)
		for _, n := range []int{0, 1, 3, len(enc) / 2, len(enc) - 1} {
			if _, err := p.Decode(enc[:n]); !errors.Is(err, codec.ErrCorrupt) {
				t.Errorf("%s cut to %d of %d bytes: error %v, want ErrCorrupt", tail, n, len(enc), err)
			}
		}
	}
	for _, tc := range []struct {
		typ   dtype.DataType
		chain string
	}{
		{dtype.TypeString, `[{"name":"vlen-utf8"}]`},
		{dtype.TypeBytes, `[{"name":"vlen-bytes"}]`},
		{dtype.DataType{Kind: dtype.Object}, `[{"name":"numcodecs.json2"}]`},
	} {
		spec := codec.Spec{Shape: []int{3}, Type: tc.typ}
		p, err := codec.NewPipeline(chain(t, tc.chain), spec)
		if err != nil {
			t.Fatal(err)
		}
		c := codec.NewChunk(spec)
		c.Items = [][]byte{[]byte(`"ab"`), []byte(`"cd"`), []byte(`"ef"`)}
		enc, err := p.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(enc) {
			if _, err := p.Decode(enc[:n]); !errors.Is(err, codec.ErrCorrupt) {
				t.Errorf("%s cut to %d bytes: error %v, want ErrCorrupt", tc.chain, n, err)
			}
		}
	}
}

// TestCheck: Check accepts what Decode accepts and refuses what it
// refuses (cut or flipped bytes), and with a compressor that decodes into
// given memory, checking chunk after chunk allocates about nothing.
func TestCheck(t *testing.T) {
	spec := codec.Spec{Shape: []int{64, 256}, Type: dtype.TypeUint16}
	for _, tc := range []struct {
		tail   string
		reuses bool
	}{
		{`,{"name":"zstd","configuration":{"level":3,"checksum":true}}`, true},
		{`,{"name":"zstd","configuration":{"level":3,"checksum":false}},{"name":"crc32c"}`, true},
		{`,{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"shuffle","typesize":2}}`, true},
		{`,{"name":"blosc","configuration":{"cname":"zstd","clevel":5,"shuffle":"bitshuffle","typesize":2}}`, true},
		{`,{"name":"gzip","configuration":{"level":5}}`, false},
		{``, true},
	} {
		p, enc := encodeRandom(t, spec, `[`+le+tc.tail+`]`)
		if err := p.Check(enc); err != nil {
			t.Fatalf("%s: Check of a valid chunk: %v", tc.tail, err)
		}
		for n := range len(enc) {
			variants := [][]byte{enc[:n], bytes.Clone(enc)}
			variants[1][n] ^= 0x5a
			for _, b := range variants {
				_, derr := p.Decode(b)
				if cerr := p.Check(b); (cerr == nil) != (derr == nil) {
					t.Fatalf("%s, %d bytes: Check says %v where Decode says %v", tc.tail, len(b), cerr, derr)
				}
			}
		}
		if !tc.reuses || raceEnabled {
			continue
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 40
		for range runs {
			if err := p.Check(enc); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > uint64(spec.DecodedSize()/8) {
			t.Errorf("%s: Check allocated %d bytes per chunk of %d", tc.tail, per, spec.DecodedSize())
		}
	}
}

// TestDecompressionBomb: 8 MiB of zeros where the spec says 4 KiB (or the
// bound is 64 KiB) must fail without allocating the 8 MiB.
func TestDecompressionBomb(t *testing.T) {
	big := make([]byte, 8<<20)
	for _, name := range []string{
		`{"name":"gzip","configuration":{"level":1}}`,
		`{"name":"zstd","configuration":{"level":1,"checksum":false}}`,
		`{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"noshuffle","typesize":1}}`,
		`{"name":"numcodecs.zlib","configuration":{"level":1}}`,
		`{"name":"numcodecs.lz4"}`,
		`{"name":"numcodecs.bz2","configuration":{"level":1}}`,
		`{"name":"numcodecs.lzma","configuration":{"preset":0}}`,
		`{"name":"numcodecs.lzma","configuration":{"filters":[{"id":3},{"id":33,"preset":9}]}}`,
		`{"name":"numcodecs.lzma","configuration":{"format":3,"filters":[{"id":4},{"id":4611686018427387905,"preset":9}]}}`,
	} {
		var m meta.Codec
		if err := json.Unmarshal([]byte(name), &m); err != nil {
			t.Fatal(err)
		}
		c, err := codec.New(m, codec.Spec{Shape: []int{len(big)}, Type: dtype.TypeUint8})
		if err != nil {
			t.Fatal(err)
		}
		bb := c.(codec.BytesToBytes)
		bomb, err := bb.Encode(big)
		if err != nil {
			t.Fatal(err)
		}
		// Through a pipeline for 4 KiB chunks, and directly with a bound.
		p, err := codec.NewPipeline([]meta.Codec{{Name: "bytes"}, m}, codec.Spec{Shape: []int{4096}, Type: dtype.TypeUint8})
		if err != nil {
			t.Fatal(err)
		}
		alloc := allocated(func() {
			if _, err := p.Decode(bomb); !errors.Is(err, codec.ErrCorrupt) {
				t.Errorf("%s: pipeline error %v, want ErrCorrupt", m.Name, err)
			}
			if _, err := bb.Decode(bomb, 64<<10); !errors.Is(err, codec.ErrCorrupt) {
				t.Errorf("%s: error %v, want ErrCorrupt", m.Name, err)
			}
		})
		if alloc > 6<<20 {
			t.Errorf("%s: decoding the bomb allocated %d KiB", m.Name, alloc>>10)
		}
	}
}

func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestZstdFrames: frames without a content size (streamed), with
// checksums, and concatenated frames decode, bounded by maxSize; our frames
// always record the content size (numcodecs < 0.15 needs it).
func TestZstdFrames(t *testing.T) {
	zc, err := codec.New(meta.Codec{Name: "zstd", Configuration: json.RawMessage(`{"level":3,"checksum":true}`)}, codec.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	z := zc.(codec.BytesToBytes)
	for _, n := range []int{0, 1, 100, 255, 256, 5000, 3 << 20} {
		data := bytes.Repeat([]byte("zarrfs "), n/7+1)[:n]
		var buf bytes.Buffer
		w, err := zstd.NewWriter(&buf, zstd.WithEncoderCRC(true))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		w.Close()
		streamed := buf.Bytes()
		ours, err := z.Encode(data)
		if err != nil {
			t.Fatal(err)
		}
		var h zstd.Header
		if err := h.Decode(ours); err != nil || !h.HasFCS || h.FrameContentSize != uint64(n) {
			t.Errorf("%d bytes: our frame header %+v (%v) lacks the content size", n, h, err)
		}
		twice := append(bytes.Clone(ours), streamed...)
		for _, tc := range []struct {
			name  string
			frame []byte
			want  []byte
		}{{"streamed", streamed, data}, {"ours", ours, data}, {"concatenated", twice, append(bytes.Clone(data), data...)}} {
			for _, maxSize := range []int{len(tc.want), -1, 1 << 30} {
				got, err := z.Decode(tc.frame, maxSize)
				if err != nil || !bytes.Equal(got, tc.want) {
					t.Errorf("%d bytes %s, maxSize %d: %d bytes, %v", n, tc.name, maxSize, len(got), err)
				}
			}
			if len(tc.want) > 0 {
				if _, err := z.Decode(tc.frame, len(tc.want)-1); !errors.Is(err, codec.ErrCorrupt) {
					t.Errorf("%d bytes %s, maxSize one less: error %v, want ErrCorrupt", n, tc.name, err)
				}
			}
		}
	}
}

// TestDecodeDoesNotModifyInput: decoders that normalise (bool, sub-byte
// integers) or share memory leave the stored bytes alone.
func TestDecodeDoesNotModifyInput(t *testing.T) {
	for _, tc := range []struct {
		typ   dtype.DataType
		chain string
	}{
		{dtype.TypeBool, `[{"name":"bytes"}]`},
		{dtype.DataType{Kind: dtype.Int, Size: 1, Bits: 4}, `[{"name":"bytes"}]`},
		{dtype.TypeUint16, `[{"name":"bytes","configuration":{"endian":"big"}}]`},
		{dtype.TypeUint16, `[{"name":"transpose","configuration":{"order":[1,0]}},` + le + `,{"name":"crc32c"}]`},
	} {
		spec := codec.Spec{Shape: []int{4, 8}, Type: tc.typ}
		p, err := codec.NewPipeline(chain(t, tc.chain), spec)
		if err != nil {
			t.Fatal(err)
		}
		size, _ := p.EncodedSize()
		stored := make([]byte, size)
		for i := range stored {
			stored[i] = byte(i*37 + 3)
		}
		if strings.Contains(tc.chain, "crc32c") {
			c, _ := codec.New(meta.Codec{Name: "crc32c"}, spec)
			stored, _ = c.(codec.BytesToBytes).Encode(stored[:size-4])
		}
		keep := bytes.Clone(stored)
		c, err := p.Decode(stored)
		if err != nil {
			t.Fatalf("%s: %v", tc.chain, err)
		}
		if !bytes.Equal(stored, keep) {
			t.Errorf("%s: decoding modified the stored bytes", tc.chain)
		}
		if tc.typ == dtype.TypeBool {
			for i, x := range c.Data {
				if x > 1 {
					t.Fatalf("bool element %d decoded as %d", i, x)
				}
			}
		}
	}
}

// TestTransposeIdentityShares: a transpose that moves only size-1 axes
// does not copy.
func TestTransposeIdentityShares(t *testing.T) {
	spec := codec.Spec{Shape: []int{1, 5, 1, 3}, Type: dtype.TypeUint32}
	p, err := codec.NewPipeline(chain(t, `[{"name":"transpose","configuration":{"order":[2,1,0,3]}},`+le+`]`), spec)
	if err != nil {
		t.Fatal(err)
	}
	stored := make([]byte, 60)
	c, err := p.Decode(stored)
	if err != nil {
		t.Fatal(err)
	}
	if &c.Data[0] != &stored[0] {
		t.Error("the decoded chunk is a copy")
	}
}

// TestTransposeKnown checks a transpose against a direct computation.
func TestTransposeKnown(t *testing.T) {
	shape := []int{2, 3, 4}
	spec := codec.Spec{Shape: shape, Type: dtype.TypeUint16}
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {0, 2, 1}, {2, 0, 1}, {1, 2, 0}} {
		p, err := codec.NewPipeline(chain(t, fmt.Sprintf(`[{"name":"transpose","configuration":{"order":%s}},%s]`, ints(order), le)), spec)
		if err != nil {
			t.Fatal(err)
		}
		c := codec.NewChunk(spec)
		for i := range 24 {
			c.Data[2*i] = byte(i)
		}
		enc, err := p.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		// Encoded element at index e (C order over the permuted shape) is
		// the decoded element at d with d[order[k]] = e[k].
		es := []int{shape[order[0]], shape[order[1]], shape[order[2]]}
		for e0 := range es[0] {
			for e1 := range es[1] {
				for e2 := range es[2] {
					var d [3]int
					d[order[0]], d[order[1]], d[order[2]] = e0, e1, e2
					want := byte(d[0]*12 + d[1]*4 + d[2])
					if got := enc[2*(e0*es[1]*es[2]+e1*es[2]+e2)]; got != want {
						t.Fatalf("order %v: encoded [%d %d %d] = %d, want %d", order, e0, e1, e2, got, want)
					}
				}
			}
		}
	}
}

// TestTransposeShapes checks transposes of every order of shapes with
// sides on and off the word-sized blocks the fast paths move (1 to 19
// units), for every unit size they treat apart, against a direct
// computation, and that decoding undoes them.
func TestTransposeShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []dtype.DataType{dtype.TypeUint8, dtype.TypeUint16, dtype.TypeUint32, dtype.TypeUint64, dtype.TypeComplex128}
	for trial := range 300 {
		shape := make([]int, 2+trial%3)
		for i := range shape {
			shape[i] = 1 + rng.IntN(19)
		}
		typ := types[trial%len(types)]
		spec := codec.Spec{Shape: shape, Type: typ}
		for _, order := range permutations(len(shape)) {
			p, err := codec.NewPipeline(chain(t, fmt.Sprintf(`[{"name":"transpose","configuration":{"order":%s}},%s]`, ints(order), le)), spec)
			if err != nil {
				t.Fatal(err)
			}
			c := codec.NewChunk(spec)
			for i := range c.Data {
				c.Data[i] = byte(rng.Uint32())
			}
			enc, err := p.Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			// Encoded element e (C order over the permuted shape) is the
			// decoded element d with d[order[k]] = e[k].
			encShape := make([]int, len(shape))
			for k, a := range order {
				encShape[k] = shape[a]
			}
			e, d := make([]int, len(shape)), make([]int, len(shape))
			for i := 0; i < len(enc)/typ.Size; i++ {
				for k, a := range order {
					d[a] = e[k]
				}
				j := 0
				for a := range shape {
					j = j*shape[a] + d[a]
				}
				if !bytes.Equal(enc[i*typ.Size:(i+1)*typ.Size], c.Data[j*typ.Size:(j+1)*typ.Size]) {
					t.Fatalf("%v %v, order %v: encoded %v is not decoded %v", typ, shape, order, e, d)
				}
				for k := len(e) - 1; k >= 0; k-- {
					if e[k]++; e[k] < encShape[k] {
						break
					}
					e[k] = 0
				}
			}
			back, err := p.Decode(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back.Data, c.Data) {
				t.Fatalf("%v %v, order %v: decoding does not undo the encoding", typ, shape, order)
			}
		}
	}
}

// permutations returns every permutation of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var all [][]int
	for _, p := range permutations(n - 1) {
		for i := range n {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			all = append(all, q)
		}
	}
	return all
}

// TestTooLargeToDecode: a chunk whose spec is larger than MaxDecodedSize
// is refused before anything is allocated, and bounds the stored size.
func TestTooLargeToDecode(t *testing.T) {
	spec := codec.Spec{Shape: []int{codec.MaxDecodedSize + 1}, Type: dtype.TypeUint8}
	p, err := codec.NewPipeline([]meta.Codec{{Name: "bytes"}, {Name: "gzip", Configuration: json.RawMessage(`{"level":1}`)}}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Decode([]byte("tiny")); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("decode of a chunk of %d bytes: %v, want ErrTooLarge", spec.Shape[0], err)
	}
	if got, want := p.MaxEncodedSize(), 2*int64(codec.MaxDecodedSize)+1<<20; got != want {
		t.Errorf("MaxEncodedSize = %d, want %d", got, want)
	}
}
