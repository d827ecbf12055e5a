package zarrtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Generated is an array written by WriteV3Store or WriteV2Store.
type Generated struct {
	Path   string
	Format int
	// Digest is the content digest of the data written (see Digest).
	Digest string
	// Sharded arrays hold inner chunks in shards.
	Sharded bool
	// ZarritaReads is false for layouts the zarrita oracle cannot read
	// (nested sharding, complex numbers, 0-d arrays).
	ZarritaReads bool
}

// C builds a meta.Codec from a name and a JSON configuration ("" for none).
func C(name, config string) meta.Codec {
	m := meta.Codec{Name: name}
	if config != "" {
		m.Configuration = json.RawMessage(config)
	}
	return m
}

// Common codecs.
var (
	BytesLE = C("bytes", `{"endian":"little"}`)
	BytesBE = C("bytes", `{"endian":"big"}`)
	CRC32C  = C("crc32c", "")
	Zstd    = C("zstd", `{"level":3,"checksum":false}`)
	Gzip    = C("gzip", `{"level":5}`)
)

// Sharding returns a sharding_indexed codec.
func Sharding(inner []int, codecs, index []meta.Codec, location string) meta.Codec {
	cfg, err := json.Marshal(map[string]any{"chunk_shape": inner, "codecs": codecs, "index_codecs": index, "index_location": location})
	if err != nil {
		panic(err)
	}
	return meta.Codec{Name: "sharding_indexed", Configuration: cfg}
}

type v3Case struct {
	path        string
	typ         dtype.DataType
	shape       []int
	chunk       []int
	keys        meta.KeyEncoding
	fill        string // v3 fill_value JSON
	codecs      []meta.Codec
	sharded     bool
	scramble    bool // rewrite shards with chunks out of order and gaps
	zarritaSkip bool
}

var defaultKeys = meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}

// v3Cases are layouts the shared fixtures lack, from the fixture catalog's
// list of gaps: index at the start without checksum, big-endian indexes,
// inner zstd/crc32c/big-endian chunks, v2 and "." chunk keys on shards,
// nested sharding, out-of-order chunks with gaps, missing shards.
func v3Cases() []v3Case {
	idx := []meta.Codec{BytesLE, CRC32C}
	return []v3Case{
		{path: "uint16_zstd_end", typ: dtype.TypeUint16, shape: []int{37, 29}, chunk: []int{16, 16}, keys: defaultKeys, fill: "0",
			codecs: []meta.Codec{Sharding([]int{4, 8}, []meta.Codec{BytesLE, Zstd}, idx, "end")}, sharded: true},
		{path: "int32_gzip_start_nocrc", typ: dtype.TypeInt32, shape: []int{20, 12}, chunk: []int{8, 6}, keys: defaultKeys, fill: "-1",
			codecs: []meta.Codec{Sharding([]int{2, 3}, []meta.Codec{BytesLE, Gzip}, []meta.Codec{BytesLE}, "start")}, sharded: true},
		{path: "float32_bigendian", typ: dtype.TypeFloat32, shape: []int{30}, chunk: []int{10}, keys: defaultKeys, fill: `"NaN"`,
			codecs: []meta.Codec{Sharding([]int{5}, []meta.Codec{BytesBE, CRC32C}, []meta.Codec{BytesBE, CRC32C}, "end")}, sharded: true},
		{path: "float64_blosc_lz4", typ: dtype.TypeFloat64, shape: []int{16, 16}, chunk: []int{8, 16}, keys: defaultKeys, fill: "0.5",
			codecs: []meta.Codec{Sharding([]int{4, 4}, []meta.Codec{BytesLE, C("blosc", `{"cname":"lz4","clevel":5,"shuffle":"shuffle","typesize":8,"blocksize":0}`)}, idx, "end")}, sharded: true},
		{path: "uint8_transpose_blosc_zstd", typ: dtype.TypeUint8, shape: []int{6, 8, 10}, chunk: []int{6, 4, 10}, keys: defaultKeys, fill: "7",
			codecs: []meta.Codec{Sharding([]int{3, 2, 5}, []meta.Codec{C("transpose", `{"order":[2,1,0]}`), BytesLE, C("blosc", `{"cname":"zstd","clevel":3,"shuffle":"bitshuffle","typesize":1,"blocksize":0}`)}, idx, "start")}, sharded: true},
		{path: "int64_v2keys", typ: dtype.TypeInt64, shape: []int{9, 9}, chunk: []int{6, 6}, keys: meta.KeyEncoding{Name: meta.KeyEncodingV2, Separator: "."}, fill: "0",
			codecs: []meta.Codec{Sharding([]int{3, 3}, []meta.Codec{BytesLE, C("zstd", `{"level":1,"checksum":true}`)}, idx, "end")}, sharded: true},
		{path: "int16_dotkeys", typ: dtype.TypeInt16, shape: []int{8, 8}, chunk: []int{4, 4}, keys: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "."}, fill: "0",
			codecs: []meta.Codec{Sharding([]int{2, 2}, []meta.Codec{BytesLE}, idx, "end")}, sharded: true},
		{path: "uint16_scrambled", typ: dtype.TypeUint16, shape: []int{16, 16}, chunk: []int{8, 8}, keys: defaultKeys, fill: "0",
			codecs: []meta.Codec{Sharding([]int{2, 4}, []meta.Codec{BytesLE, Gzip}, idx, "end")}, sharded: true, scramble: true},
		{path: "complex64_crc", typ: dtype.TypeComplex64, shape: []int{8}, chunk: []int{4}, keys: defaultKeys, fill: "[0, 0]",
			codecs: []meta.Codec{Sharding([]int{2}, []meta.Codec{BytesLE, CRC32C}, idx, "end")}, sharded: true, zarritaSkip: true},
		{path: "bool_nested", typ: dtype.TypeBool, shape: []int{16, 16}, chunk: []int{8, 8}, keys: defaultKeys, fill: "false",
			codecs: []meta.Codec{Sharding([]int{4, 4}, []meta.Codec{Sharding([]int{2, 2}, []meta.Codec{BytesLE}, idx, "end")}, idx, "end")}, sharded: true, zarritaSkip: true},
		{path: "string_vlen", typ: dtype.TypeString, shape: []int{10}, chunk: []int{4}, keys: defaultKeys, fill: `""`,
			codecs: []meta.Codec{Sharding([]int{2}, []meta.Codec{C("vlen-utf8", "")}, idx, "end")}, sharded: true},
		{path: "group/float16_unsharded", typ: dtype.TypeFloat16, shape: []int{7, 5}, chunk: []int{3, 2}, keys: defaultKeys, fill: "0",
			codecs: []meta.Codec{BytesLE, Gzip}},
		{path: "group/int8_scalar", typ: dtype.TypeInt8, shape: []int{}, chunk: []int{}, keys: defaultKeys, fill: "0",
			codecs: []meta.Codec{BytesLE}, zarritaSkip: true},
	}
}

// WriteV3Store writes a v3 hierarchy of generated arrays into dir and
// returns them. Every array has a few empty inner chunks and, where the
// grid allows, a missing shard.
func WriteV3Store(t testing.TB, dir string) []Generated {
	t.Helper()
	ctx := context.Background()
	s := OpenStore(t, dir)
	defer s.Close()
	must(t, zarr.CreateGroup(ctx, s, "", 3, json.RawMessage(`{"title":"zarrfs generated store"}`)))
	must(t, zarr.CreateGroup(ctx, s, "group", 3, nil))
	var out []Generated
	for _, c := range v3Cases() {
		m := &meta.ArrayV3{Shape: c.shape, DataType: c.typ, ChunkShape: c.chunk, KeyEncoding: c.keys, Codecs: c.codecs}
		fill, err := dtype.ParseFillV3(c.typ, json.RawMessage(c.fill))
		must(t, err)
		m.FillValue = fill
		a, err := zarr.CreateArrayV3(ctx, s, c.path, m)
		must(t, err)
		data := Pattern(a, 1)
		must(t, a.Write(ctx, data))
		if c.scramble {
			must(t, ScrambleShards(ctx, s, a))
		}
		out = append(out, Generated{Path: c.path, Format: 3, Digest: Digest(data), Sharded: c.sharded, ZarritaReads: !c.zarritaSkip})
	}
	return out
}

// WriteV2Store writes a v2 hierarchy of generated arrays into dir.
func WriteV2Store(t testing.TB, dir string) []Generated {
	t.Helper()
	ctx := context.Background()
	s := OpenStore(t, dir)
	defer s.Close()
	must(t, zarr.CreateGroup(ctx, s, "", 2, json.RawMessage(`{"title":"zarrfs generated v2 store"}`)))
	cases := []struct {
		path, dtype, sep string
		order            byte
		shape, chunks    []int
		compressor       string
		filters          []string
		fill             []byte // explicit: zarr-python 2 leaves missing chunks of a null fill value uninitialised
	}{
		{"i2_blosc", "<i2", ".", 'C', []int{30, 20}, []int{8, 8}, `{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1,"blocksize":0}`, nil, []byte{0, 0}},
		{"f8_zlib_F_nested", ">f8", "/", 'F', []int{10, 9, 4}, []int{4, 4, 4}, `{"id":"zlib","level":1}`, nil, []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}},
		{"u1_raw", "|u1", ".", 'C', []int{100}, []int{30}, ``, nil, []byte{9}},
		{"i4_delta_zstd", "<i4", ".", 'C', []int{64}, []int{16}, `{"id":"zstd","level":1}`, []string{`{"id":"delta","dtype":"<i4"}`}, []byte{1, 0, 0, 0}},
		{"b1_gzip", "|b1", ".", 'C', []int{5, 5}, []int{2, 2}, `{"id":"gzip","level":1}`, nil, []byte{0}},
	}
	var out []Generated
	for _, c := range cases {
		typ, endian, err := dtype.ParseV2(c.dtype)
		must(t, err)
		m := &meta.ArrayV2{Shape: c.shape, Chunks: c.chunks, DataType: typ, Endian: endian, Order: c.order,
			DimensionSeparator: c.sep, FillValue: c.fill}
		if c.compressor != "" {
			m.Compressor = json.RawMessage(c.compressor)
		}
		for _, f := range c.filters {
			m.Filters = append(m.Filters, json.RawMessage(f))
		}
		a, err := zarr.CreateArrayV2(ctx, s, c.path, m, json.RawMessage(`{"units":"none"}`))
		must(t, err)
		data := Pattern(a, 2)
		must(t, a.Write(ctx, data))
		out = append(out, Generated{Path: c.path, Format: 2, Digest: Digest(data), ZarritaReads: true})
	}
	return out
}

// OpenStore opens the store directory dir for writing.
func OpenStore(t testing.TB, dir string) *store.Dir {
	t.Helper()
	s, err := store.OpenDir(dir, false)
	must(t, err)
	return s
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Pattern returns deterministic content for a: distinct values, with the
// first inner chunk (or chunk) and, when the grid has more than one chunk,
// the last chunk left at the fill value, so stores have empty inner chunks
// and missing shards.
func Pattern(a *zarr.Array, seed int) *codec.Chunk {
	spec := codec.Spec{Shape: a.Shape, Type: a.Type, Fill: a.Fill()}
	c := codec.NewChunk(spec)
	n := nd.Size(a.Shape)
	for i := 0; i < n; i++ {
		setElement(c, i, i*(seed+2)+seed)
	}
	fillBox := func(start, count []int) {
		coords := make([]int, len(start))
		for {
			g := make([]int, len(start))
			inside := true
			for d := range g {
				g[d] = start[d] + coords[d]
				inside = inside && g[d] < a.Shape[d]
			}
			if inside {
				i := nd.Linear(g, a.Shape)
				if a.Type.Variable() {
					c.Items[i] = a.Fill()
				} else {
					copy(c.Data[i*a.Type.Size:], a.Fill())
				}
			}
			if !nd.Next(coords, count) {
				return
			}
		}
	}
	if len(a.Shape) == 0 {
		return c
	}
	unit := a.ChunkShape
	if sh := a.Sharding(); sh != nil {
		unit = sh.ChunkShape()
	}
	fillBox(make([]int, len(unit)), unit)
	if grid := a.Grid(); nd.Size(grid) > 1 {
		last := make([]int, len(grid))
		for d := range grid {
			last[d] = (grid[d] - 1) * a.ChunkShape[d]
		}
		fillBox(last, a.ChunkShape)
	}
	return c
}

// setElement stores a value derived from v at element i.
func setElement(c *codec.Chunk, i, v int) {
	t := c.Type
	if t.Variable() {
		c.Items[i] = fmt.Appendf(nil, "s%d-é", v)
		return
	}
	b := c.Data[i*t.Size : (i+1)*t.Size]
	switch t.Kind {
	case dtype.Bool:
		b[0] = byte((v / 3) % 2)
	case dtype.Int, dtype.Uint:
		x := uint64(v)
		if t.Kind == dtype.Int && v%3 == 0 {
			x = uint64(-v)
		}
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		copy(b, w[:])
	case dtype.Float:
		f := float64(v) * 0.25
		switch t.Size {
		case 2:
			binary.LittleEndian.PutUint16(b, float16Bits(float32(f)))
		case 4:
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(f)))
		case 8:
			binary.LittleEndian.PutUint64(b, math.Float64bits(f))
		}
	case dtype.Complex:
		half := t.Size / 2
		re, im := float64(v), -float64(v)/2
		if half == 4 {
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(re)))
			binary.LittleEndian.PutUint32(b[4:], math.Float32bits(float32(im)))
		} else {
			binary.LittleEndian.PutUint64(b, math.Float64bits(re))
			binary.LittleEndian.PutUint64(b[8:], math.Float64bits(im))
		}
	default:
		for j := range b {
			b[j] = byte(v + j)
		}
	}
}

// float16Bits converts small exactly-representable values to IEEE half
// precision (the pattern only uses multiples of 0.25 below 2048).
func float16Bits(f float32) uint16 {
	if f == 0 {
		return 0
	}
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int((bits>>23)&0xff) - 127 + 15
	mant := uint16((bits >> 13) & 0x3ff)
	return sign | uint16(exp)<<10 | mant
}

// ScrambleShards rewrites every shard of a sharded array with its inner
// chunks in reverse order and garbage gaps between them, a valid layout
// that no writer in the fixtures uses.
func ScrambleShards(ctx context.Context, s store.Store, a *zarr.Array) error {
	sh := a.Sharding()
	grid := a.Grid()
	coords := make([]int, len(grid))
	for {
		key := a.ChunkKey(coords)
		old, err := store.ReadAll(ctx, s, key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil {
			ix, err := sh.ReadIndex(bytes.NewReader(old), int64(len(old)))
			if err != nil {
				return err
			}
			var body bytes.Buffer
			if sh.IndexAtStart() {
				body.Write(make([]byte, sh.IndexSize()))
			}
			for i := ix.Len() - 1; i >= 0; i-- {
				off, n, ok := ix.Chunk(i)
				if !ok {
					continue
				}
				body.WriteString("gap!")
				ix.Set(i, int64(body.Len()), n)
				body.Write(old[off : off+n])
			}
			body.WriteString("tail gap")
			enc, err := sh.EncodeIndex(ix)
			if err != nil {
				return err
			}
			out := body.Bytes()
			if sh.IndexAtStart() {
				copy(out, enc)
			} else {
				out = append(out, enc...)
			}
			if err := store.Write(ctx, s, key, out); err != nil {
				return err
			}
		}
		if !nd.Next(coords, grid) {
			return nil
		}
	}
}
