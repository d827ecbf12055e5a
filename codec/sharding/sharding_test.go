package sharding_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr/dtype"
)

func config(t testing.TB, chunk []int, inner, index string, location string) json.RawMessage {
	t.Helper()
	s := fmt.Sprintf(`{"chunk_shape":%s,"codecs":%s,"index_codecs":%s,"index_location":%q}`,
		mustJSON(chunk), inner, index, location)
	return json.RawMessage(s)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

const (
	bytesLE    = `[{"name":"bytes","configuration":{"endian":"little"}}]`
	bytesBE    = `[{"name":"bytes","configuration":{"endian":"big"}}]`
	indexCRC   = `[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}]`
	indexBECRC = `[{"name":"bytes","configuration":{"endian":"big"}},{"name":"crc32c"}]`
	gzipInner  = `[{"name":"bytes","configuration":{"endian":"little"}},{"name":"gzip","configuration":{"level":5}}]`
)

func newCodec(t testing.TB, shape, chunk []int, typ dtype.DataType, inner, index, location string) *sharding.Codec {
	t.Helper()
	spec := codec.Spec{Shape: shape, Type: typ, Fill: make([]byte, typ.Size)}
	c, err := sharding.New(config(t, chunk, inner, index, location), spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randomChunk(r *rand.Rand, spec codec.Spec) *codec.Chunk {
	c := codec.NewChunk(spec)
	for i := range c.Data {
		// Leave some elements at the fill value so some inner chunks are empty.
		if r.IntN(3) > 0 {
			c.Data[i] = byte(r.IntN(256))
		}
	}
	return c
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct {
		name         string
		shape, chunk []int
		inner, index string
		location     string
	}{
		{"end-crc", []int{8, 12}, []int{4, 3}, bytesLE, indexCRC, "end"},
		{"start-crc", []int{8, 12}, []int{4, 3}, bytesLE, indexCRC, "start"},
		{"start-nocrc", []int{6, 4, 2}, []int{3, 2, 1}, bytesLE, bytesLE, "start"},
		{"big-endian-index", []int{8}, []int{2}, bytesBE, indexBECRC, "end"},
		{"gzip", []int{16, 16}, []int{8, 4}, gzipInner, indexCRC, "end"},
		{"nested", []int{8, 8}, []int{4, 4},
			`[{"name":"sharding_indexed","configuration":{"chunk_shape":[2,2],"codecs":` + bytesLE + `,"index_codecs":` + indexCRC + `}}]`,
			indexCRC, "end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCodec(t, tc.shape, tc.chunk, dtype.TypeUint16, tc.inner, tc.index, tc.location)
			spec := codec.Spec{Shape: tc.shape, Type: dtype.TypeUint16, Fill: []byte{0, 0}}
			in := randomChunk(r, spec)
			enc, err := c.Encode(in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Decode(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Data, in.Data) {
				t.Fatal("decoded shard differs from the encoded one")
			}
			ix, err := c.ReadIndex(bytes.NewReader(enc), int64(len(enc)))
			if err != nil {
				t.Fatal(err)
			}
			if ix.Len() != c.NumChunks() {
				t.Fatalf("index has %d entries, want %d", ix.Len(), c.NumChunks())
			}
			for i := 0; i < ix.Len(); i++ {
				b, ok, err := c.ReadChunk(bytes.NewReader(enc), ix, i)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					continue
				}
				if _, err := c.Inner().Decode(b); err != nil {
					t.Fatalf("inner chunk %d: %v", i, err)
				}
			}
		})
	}
}

// shardWithCRCIndex hand-builds a shard: chunks stored out of order with gaps,
// index at the given location, to check readers do not assume dense packing.
func TestOutOfOrderWithGaps(t *testing.T) {
	c := newCodec(t, []int{4}, []int{2}, dtype.TypeUint8, bytesLE, indexCRC, "start")
	const indexSize = 2*16 + 4
	shard := make([]byte, indexSize+20)
	copy(shard[indexSize+10:], []byte{3, 4}) // chunk 1 first, after a gap
	copy(shard[indexSize+16:], []byte{1, 2}) // then chunk 0
	entries := []uint64{indexSize + 16, 2, indexSize + 10, 2}
	for i, e := range entries {
		binary.LittleEndian.PutUint64(shard[8*i:], e)
	}
	binary.LittleEndian.PutUint32(shard[32:], crc32.Checksum(shard[:32], crc32.MakeTable(crc32.Castagnoli)))
	out, err := c.Decode(shard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Data, []byte{1, 2, 3, 4}) {
		t.Fatalf("decoded %v", out.Data)
	}
}

func TestEmptyShard(t *testing.T) {
	c := newCodec(t, []int{4, 4}, []int{2, 2}, dtype.TypeUint8, bytesLE, indexCRC, "end")
	b, err := c.EncodeShard(make([][]byte, 4))
	if err != nil || b != nil {
		t.Fatalf("EncodeShard of only empty chunks = %v, %v; want nil, nil", b, err)
	}
	spec := codec.Spec{Shape: []int{4, 4}, Type: dtype.TypeUint8, Fill: []byte{0}}
	enc, err := c.Encode(codec.NewChunk(spec))
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) != c.IndexSize() {
		t.Fatalf("an all-fill shard encodes to %d bytes, want just the %d-byte index", len(enc), c.IndexSize())
	}
	ix, err := c.ReadIndex(bytes.NewReader(enc), int64(len(enc)))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := ix.Stored(); n != 0 {
		t.Fatalf("%d stored chunks, want 0", n)
	}
}

func TestInvalidIndex(t *testing.T) {
	c := newCodec(t, []int{4}, []int{2}, dtype.TypeUint8, bytesLE, bytesLE, "end")
	good, err := c.EncodeShard([][]byte{{1, 2}, {3, 4}})
	if err != nil {
		t.Fatal(err)
	}
	put := func(b []byte, i int, v uint64) []byte {
		b = slices.Clone(b)
		binary.LittleEndian.PutUint64(b[len(b)-32+8*i:], v)
		return b
	}
	for name, shard := range map[string][]byte{
		"beyond end":       put(good, 0, 1000),
		"overflow":         put(put(good, 0, 2), 1, ^uint64(0)-1),
		"half empty":       put(good, 0, sharding.Empty),
		"overlaps index":   put(good, 2, 3),
		"partial overlap":  put(good, 2, 1),
		"wrong fixed size": put(good, 1, 1),
		"truncated":        good[:20],
	} {
		if _, err := c.Decode(shard); !errors.Is(err, sharding.ErrInvalidIndex) {
			t.Errorf("%s: err = %v, want ErrInvalidIndex", name, err)
		}
	}
	// Identical entries may share bytes.
	if _, err := c.Decode(put(put(good, 2, 0), 3, 2)); err != nil {
		t.Errorf("shared identical chunk: %v", err)
	}
}

func TestIndexChecksum(t *testing.T) {
	c := newCodec(t, []int{4}, []int{2}, dtype.TypeUint8, bytesLE, indexCRC, "end")
	shard, err := c.EncodeShard([][]byte{{1, 2}, nil})
	if err != nil {
		t.Fatal(err)
	}
	shard[len(shard)-10] ^= 1
	_, err = c.ReadIndex(bytes.NewReader(shard), int64(len(shard)))
	if !errors.Is(err, sharding.ErrInvalidIndex) || !errors.Is(err, codec.ErrChecksum) {
		t.Fatalf("flipped index byte: %v, want ErrInvalidIndex and ErrChecksum", err)
	}
}

func TestConfigErrors(t *testing.T) {
	spec := codec.Spec{Shape: []int{4, 4}, Type: dtype.TypeUint8, Fill: []byte{0}}
	for name, cfg := range map[string]string{
		"rank":         `{"chunk_shape":[2],"codecs":` + bytesLE + `,"index_codecs":` + indexCRC + `}`,
		"not dividing": `{"chunk_shape":[3,2],"codecs":` + bytesLE + `,"index_codecs":` + indexCRC + `}`,
		"location":     `{"chunk_shape":[2,2],"codecs":` + bytesLE + `,"index_codecs":` + indexCRC + `,"index_location":"middle"}`,
		"no codecs":    `{"chunk_shape":[2,2],"codecs":[],"index_codecs":` + indexCRC + `}`,
		"gzip index":   `{"chunk_shape":[2,2],"codecs":` + bytesLE + `,"index_codecs":` + gzipInner + `}`,
		"unknown":      `{"chunk_shape":[2,2],"codecs":[{"name":"nope"}],"index_codecs":` + indexCRC + `}`,
	} {
		if _, err := sharding.New(json.RawMessage(cfg), spec); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// An index that would not fit in memory (2^36 entries of 16 bytes):
	// refused before it is ever read.
	huge := codec.Spec{Shape: []int{1 << 36}, Type: dtype.TypeUint8, Fill: []byte{0}}
	cfg := `{"chunk_shape":[1],"codecs":` + bytesLE + `,"index_codecs":` + indexCRC + `}`
	if _, err := sharding.New(json.RawMessage(cfg), huge); !errors.Is(err, codec.ErrConfig) || !strings.Contains(err.Error(), "an index larger than") {
		t.Errorf("2^36 inner chunks per shard: %v, want the index refused", err)
	}
}

func FuzzDecodeIndex(f *testing.F) {
	c := newCodec(f, []int{4, 4}, []int{2, 2}, dtype.TypeUint8, gzipInner, indexCRC, "end")
	spec := codec.Spec{Shape: []int{4, 4}, Type: dtype.TypeUint8, Fill: []byte{0}}
	seed, err := c.Encode(randomChunk(rand.New(rand.NewPCG(1, 1)), spec))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-1])
	f.Fuzz(func(t *testing.T, shard []byte) {
		// Any outcome but a panic or hang is fine; decoded shards must be whole.
		out, err := c.Decode(shard)
		if err == nil && len(out.Data) != 16 {
			t.Fatalf("decoded %d bytes", len(out.Data))
		}
	})
}
