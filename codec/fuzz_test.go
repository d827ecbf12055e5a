package codec_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
)

// fuzzSpec is small, so that a decoder's bound (the exact decoded size in
// a pipeline) is small too.
var fuzzSpec = codec.Spec{Shape: []int{6, 5}, Type: dtype.TypeUint16}

// fuzzPipeline fuzzes Decode of one chain: arbitrary input must give a
// chunk of the spec or an error, never a panic or a hang. Seeds are
// encodings of random chunks.
func fuzzPipeline(f *testing.F, spec codec.Spec, chainJSON string) {
	p, err := codec.NewPipeline(chain(f, chainJSON), spec)
	if err != nil {
		f.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 3 {
		enc, err := p.Encode(randomChunk(rng, spec))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := p.Decode(b)
		if err == nil {
			if err := c.Check(spec); err != nil {
				t.Fatalf("decoded a wrong chunk: %v", err)
			}
		}
		if cerr := p.Check(b); (cerr == nil) != (err == nil) {
			t.Fatalf("Check says %v where Decode says %v", cerr, err)
		}
	})
}

// fuzzBytes fuzzes one bytes->bytes decoder with a small maxSize.
func fuzzBytes(f *testing.F, m string) {
	var md meta.Codec
	if err := json.Unmarshal([]byte(m), &md); err != nil {
		f.Fatal(err)
	}
	c, err := codec.New(md, fuzzSpec)
	if err != nil {
		f.Fatal(err)
	}
	bb := c.(codec.BytesToBytes)
	for _, s := range []string{"", "zarrfs", "zarrfs zarrfs zarrfs zar", string(make([]byte, 3000))} {
		enc, err := bb.Encode([]byte(s))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	const maxSize = 4096
	into, _ := bb.(codec.DecoderInto)
	scratch := make([]byte, 0, 64)
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := bb.Decode(b, maxSize)
		if err == nil && len(out) > maxSize {
			t.Fatalf("decoded %d bytes, more than maxSize %d", len(out), maxSize)
		}
		if into == nil {
			return
		}
		got, ierr := into.DecodeInto(scratch, b, maxSize)
		if (ierr == nil) != (err == nil) || !bytes.Equal(got, out) {
			t.Fatalf("DecodeInto gave %d bytes (%v) where Decode gave %d (%v)", len(got), ierr, len(out), err)
		}
		if cap(got) > cap(scratch) {
			scratch = got[:0] // keep the grown buffer, as Pipeline.Check does
		}
	})
}

func FuzzDecodeBytes(f *testing.F) {
	fuzzPipeline(f, fuzzSpec, `[{"name":"bytes","configuration":{"endian":"big"}}]`)
}

func FuzzDecodeTranspose(f *testing.F) {
	fuzzPipeline(f, codec.Spec{Shape: []int{2, 3, 4}, Type: dtype.TypeBool}, `[{"name":"transpose","configuration":{"order":[2,0,1]}},{"name":"bytes"}]`)
}

func FuzzDecodeGzip(f *testing.F) { fuzzBytes(f, `{"name":"gzip","configuration":{"level":1}}`) }

func FuzzDecodeZlib(f *testing.F) {
	fuzzBytes(f, `{"name":"numcodecs.zlib","configuration":{"level":1}}`)
}

func FuzzDecodeZstd(f *testing.F) {
	fuzzBytes(f, `{"name":"zstd","configuration":{"level":1,"checksum":true}}`)
}

func FuzzDecodeBlosc(f *testing.F) {
	fuzzBytes(f, `{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"shuffle","typesize":2}}`)
}

func FuzzDecodeLZ4(f *testing.F) { fuzzBytes(f, `{"name":"numcodecs.lz4"}`) }

func FuzzDecodeBZ2(f *testing.F) {
	fuzzBytes(f, `{"name":"numcodecs.bz2","configuration":{"level":1}}`)
}

func FuzzDecodeLZMA(f *testing.F) { fuzzBytes(f, `{"name":"numcodecs.lzma"}`) }

func FuzzDecodeLZMAAlone(f *testing.F) {
	fuzzBytes(f, `{"name":"numcodecs.lzma","configuration":{"format":2}}`)
}

func FuzzDecodeCRC32C(f *testing.F) { fuzzBytes(f, `{"name":"crc32c"}`) }

func FuzzDecodeFletcher32(f *testing.F) { fuzzBytes(f, `{"name":"numcodecs.fletcher32"}`) }

func FuzzDecodeShuffle(f *testing.F) {
	fuzzBytes(f, `{"name":"numcodecs.shuffle","configuration":{"elementsize":3}}`)
}

func FuzzDecodeVlenUTF8(f *testing.F) {
	fuzzPipeline(f, codec.Spec{Shape: []int{2, 2}, Type: dtype.TypeString}, `[{"name":"vlen-utf8"}]`)
}

func FuzzDecodeVlenBytes(f *testing.F) {
	fuzzPipeline(f, codec.Spec{Shape: []int{3}, Type: dtype.TypeBytes}, `[{"name":"vlen-bytes"}]`)
}

func FuzzDecodeJSON2(f *testing.F) {
	f.Add([]byte(`[["a",1e400,{"b":[-0,"\ud800"],"b":2}],[null,true,-1.5e-7],"|O",[2,3]]`))
	fuzzPipeline(f, codec.Spec{Shape: []int{2, 3}, Type: dtype.DataType{Kind: dtype.Object}}, `[{"name":"numcodecs.json2"}]`)
}

func FuzzDecodePackBits(f *testing.F) {
	fuzzPipeline(f, codec.Spec{Shape: []int{11}, Type: dtype.TypeBool}, `[{"name":"numcodecs.packbits"},{"name":"bytes"}]`)
}

func FuzzDecodeFilters(f *testing.F) {
	fuzzPipeline(f, codec.Spec{Shape: []int{9}, Type: dtype.TypeFloat32}, `[
		{"name":"numcodecs.delta","configuration":{"dtype":"<f4"}},
		{"name":"numcodecs.fixedscaleoffset","configuration":{"offset":3,"scale":7,"dtype":"<f4","astype":"<i8"}},
		{"name":"numcodecs.astype","configuration":{"encode_dtype":"<f2","decode_dtype":"<i8"}},
		{"name":"bytes","configuration":{"endian":"little"}}]`)
}

// FuzzCheckCompressed runs Pipeline.Check, which decompresses into pooled
// memory, against Decode on chains whose compressors decode into given
// memory, one after another (so the pool's buffers carry over).
func FuzzCheckCompressed(f *testing.F) {
	fuzzPipeline(f, fuzzSpec, `[{"name":"bytes","configuration":{"endian":"little"}},
		{"name":"zstd","configuration":{"level":1,"checksum":true}},{"name":"crc32c"}]`)
}

func FuzzCheckBlosc(f *testing.F) {
	fuzzPipeline(f, fuzzSpec, `[{"name":"bytes","configuration":{"endian":"little"}},
		{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"shuffle","typesize":2}}]`)
}

// FuzzFromV2 feeds arbitrary filter and compressor JSON to FromV2 and the
// resulting chain to NewPipeline and ToV2.
func FuzzFromV2(f *testing.F) {
	f.Add("<i2", byte('C'), `[{"id":"delta","dtype":"<i2"},{"id":"shuffle","elementsize":2}]`, `{"id":"blosc","cname":"lz4","clevel":5,"shuffle":-1}`)
	f.Add("|O", byte('F'), `[{"id":"vlen-utf8"}]`, `{"id":"zstd","level":1,"checksum":true}`)
	f.Add(">f8", byte('F'), `[{"id":"fixedscaleoffset","dtype":">f8","astype":"|u1","scale":2,"offset":1}]`, `null`)
	f.Fuzz(func(t *testing.T, typestr string, order byte, filters, compressor string) {
		d, e, err := dtype.ParseV2(typestr)
		if err != nil {
			return
		}
		var fs []json.RawMessage
		if json.Unmarshal([]byte(filters), &fs) != nil {
			return
		}
		rd, ch, err := codec.FromV2(d, e, order, 2, fs, json.RawMessage(compressor))
		if err != nil {
			return
		}
		p, err := codec.NewPipeline(ch, codec.Spec{Shape: []int{2, 3}, Type: rd})
		if err != nil {
			return
		}
		codec.ToV2(rd, ch, p.Spec().Shape)
	})
}
