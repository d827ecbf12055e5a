package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// arraySpec is one array of the benchmark store: a sharded uint16 volume
// (or, for the metadata workloads, a 1-D uint8 array of tiny chunks).
type arraySpec struct {
	name   string
	typ    dtype.DataType
	shape  []int
	shard  []int
	inner  []int
	codecs []meta.Codec // the inner chain
	// passThrough is false when the v2 view must transcode the chunks.
	passThrough bool
	// readBench marks the arrays the read workloads use; the metadata
	// array only serves stat and ls.
	readBench bool
}

var (
	bytesLE   = meta.Codec{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)}
	zstd3     = meta.Codec{Name: "zstd", Configuration: json.RawMessage(`{"level":3,"checksum":false}`)}
	transpose = meta.Codec{Name: "transpose", Configuration: json.RawMessage(`{"order":[0,2,1]}`)}
)

// arraySpecs returns the arrays of the benchmark store. The full set is
// 1 GiB of logical data: 256 MiB of uncompressed 64 KiB inner chunks,
// 512 MiB of zstd 512 KiB inner chunks, and 256 MiB whose inner chunks are
// transposed in an order Zarr v2 cannot express, so the v2 view
// transcodes them; plus 100k tiny chunks for stat and ls.
func arraySpecs(quick bool) []arraySpec {
	scale := 1
	manyChunks := 100_000
	if quick {
		scale, manyChunks = 2, 10_000
	}
	return []arraySpec{
		{name: "raw", typ: dtype.TypeUint16, shape: []int{512 / scale, 512 / scale, 512 / scale}, shard: []int{128, 128, 128}, inner: []int{32, 32, 32},
			codecs: []meta.Codec{bytesLE}, passThrough: true, readBench: true},
		{name: "zstd", typ: dtype.TypeUint16, shape: []int{512 / scale, 512 / scale, 1024 / scale}, shard: []int{256, 256, 256}, inner: []int{64, 64, 64},
			codecs: []meta.Codec{bytesLE, zstd3}, passThrough: true, readBench: true},
		{name: "transposed", typ: dtype.TypeUint16, shape: []int{256 / scale, 512 / scale, 1024 / scale}, shard: []int{128, 256, 256}, inner: []int{32, 64, 64},
			codecs: []meta.Codec{transpose, bytesLE}, readBench: true},
		{name: "many", typ: dtype.TypeUint8, shape: []int{manyChunks * 64}, shard: []int{64 * 1000}, inner: []int{64},
			codecs: []meta.Codec{bytesLE}, passThrough: true},
	}
}

// elementBytes is the logical size of an array.
func (s arraySpec) elementBytes() int64 { return int64(nd.Size(s.shape)) * int64(s.typ.Size) }

// fillSynthetic fills data, the box [start, start+count) of an array with
// elements of size bytes, with the synthetic content: smooth gradients plus
// 6 bits of noise, so zstd compresses it about as much as real microscopy
// data, never to nothing, and no inner chunk equals the fill value (every
// chunk is stored). Elements depend only on their coordinates, so every
// copy of an array holds the same data.
func fillSynthetic(data []byte, size int, start, count []int) {
	weight := func(d int) int { return 3 + 2*d }
	key := func(d int) int { return []int{1299709, 104729, 7919}[d%3] }
	last := len(count) - 1
	outer := count[:last]
	local := make([]int, last)
	i := 0
	for r := range nd.Size(outer) {
		nd.Unravel(r, outer, local)
		smooth, noise := 0, 0
		for d, c := range local {
			smooth += (start[d] + c) * weight(d)
			noise ^= (start[d] + c) * key(d)
		}
		for x := start[last]; x < start[last]+count[last]; x++ {
			v := uint16(1 + (smooth+x*weight(last))/4 + ((noise^x*key(last))>>3)&63)
			switch size {
			case 1:
				data[i] = byte(v)
			case 2:
				binary.LittleEndian.PutUint16(data[i:], v)
			default: // the 4-byte types of workload 1b
				binary.LittleEndian.PutUint32(data[i:], uint32(v))
			}
			i += size
		}
	}
}

// writeStore writes the sharded Zarr v3 store.
func writeStore(ctx context.Context, dir string, specs []arraySpec) error {
	s, err := createStore(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := zarr.CreateGroup(ctx, s, "", 3, json.RawMessage(`{"title":"zarrfs mount benchmark"}`)); err != nil {
		return err
	}
	for _, spec := range specs {
		m := &meta.ArrayV3{
			Shape: spec.shape, DataType: spec.typ, ChunkShape: spec.shard,
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
			FillValue:   make([]byte, spec.typ.Size),
			Codecs:      zarr.ShardedCodecs(spec.inner, spec.codecs),
		}
		a, err := zarr.CreateArrayV3(ctx, s, spec.name, m)
		if err != nil {
			return err
		}
		if err := writeByBlocks(ctx, a); err != nil {
			return fmt.Errorf("%s: %w", spec.name, err)
		}
	}
	return nil
}

// writeNativeV2 writes the arrays as plain Zarr v2 with the metadata the
// mount's v2 view shows (read from zarray), for the zarr-python baselines;
// arrays the view transcodes are compressed as a user converting them
// with zarr-python 2 would, with its default compressor (blosc lz4), so
// that the baseline does not depend on --v2-transcode.
func writeNativeV2(ctx context.Context, dir string, specs []arraySpec, zarray func(name string) ([]byte, error)) error {
	return writeV2Copy(ctx, dir, specs, zarray, false)
}

// writeServedV2 writes the arrays the v2 view transcodes as it serves
// them (the view's metadata as it is): the bytes a mount moves, without
// the work of making them, for a floor of the transcoded reads.
func writeServedV2(ctx context.Context, dir string, specs []arraySpec, zarray func(name string) ([]byte, error)) error {
	return writeV2Copy(ctx, dir, specs, zarray, true)
}

func writeV2Copy(ctx context.Context, dir string, specs []arraySpec, zarray func(name string) ([]byte, error), served bool) error {
	s, err := createStore(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := zarr.CreateGroup(ctx, s, "", 2, nil); err != nil {
		return err
	}
	for _, spec := range specs {
		if !spec.readBench || served && spec.passThrough {
			continue
		}
		doc, err := zarray(spec.name)
		if err != nil {
			return err
		}
		m, err := meta.ParseZarray(doc)
		if err != nil {
			return fmt.Errorf("%s/.zarray of the v2 view: %w", spec.name, err)
		}
		if !spec.passThrough && !served {
			m.Compressor = json.RawMessage(`{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1,"blocksize":0}`)
		}
		a, err := zarr.CreateArrayV2(ctx, s, spec.name, m, nil)
		if err != nil {
			return err
		}
		if err := writeByBlocks(ctx, a); err != nil {
			return fmt.Errorf("native v2 %s: %w", spec.name, err)
		}
	}
	return nil
}

func createStore(dir string) (*store.Dir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return store.OpenDir(dir, false)
}

// writeByBlocks writes the synthetic content one block of whole chunks
// (shards, for sharded arrays) at a time, so memory stays at one block.
// Blocks are at least 8 MiB so the tiny chunks of a v2 copy do not cost a
// region write each.
func writeByBlocks(ctx context.Context, a *zarr.Array) error {
	block := slices.Clone(a.ChunkShape)
	for d := 0; nd.Size(block)*a.Type.Size < 8<<20 && d < len(block); d++ {
		block[d] = a.Shape[d]
	}
	grid := nd.Grid(a.Shape, block)
	pos := make([]int, len(grid))
	for {
		start, count := make([]int, len(block)), make([]int, len(block))
		for d := range start {
			start[d] = pos[d] * block[d]
			count[d] = min(block[d], a.Shape[d]-start[d])
		}
		data := codec.NewChunk(codec.Spec{Shape: count, Type: a.Type, Fill: a.Fill()})
		fillSynthetic(data.Data, a.Type.Size, start, count)
		if err := a.WriteRegion(ctx, start, data); err != nil {
			return err
		}
		if !nd.Next(pos, grid) {
			return nil
		}
	}
}

// writeNativeDir creates n files of size bytes named 0..n-1, the native
// counterpart of a directory of n chunk files.
func writeNativeDir(dir string, n, size int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	content := make([]byte, size)
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// chunk is one stored inner chunk: where its bytes are in the store and
// where its files are in the two views.
type chunk struct {
	shard  string // absolute path of the shard file
	off, n int64
	v3, v2 string // paths relative to the view roots
}

// openShardedArray opens the sharded array name of the store in storeDir,
// read-only; the caller closes the store.
func openShardedArray(ctx context.Context, storeDir, name string) (*zarr.Array, *store.Dir, error) {
	s, err := store.OpenDir(storeDir, true)
	if err != nil {
		return nil, nil, err
	}
	h, err := zarr.Open(ctx, s)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	node, ok := h.Node(name)
	if !ok || node.Array == nil || node.Array.Sharding() == nil {
		s.Close()
		return nil, nil, fmt.Errorf("%s is not a sharded array of the store", name)
	}
	return node.Array, s, nil
}

// listChunks returns every stored inner chunk of an array in C order of
// the inner chunk grid, which is the order of its keys in both views.
func listChunks(ctx context.Context, storeDir, name string) ([]chunk, error) {
	a, s, err := openShardedArray(ctx, storeDir, name)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	sh := a.Sharding()
	per := sh.Grid()
	innerGrid := nd.Grid(a.Shape, sh.ChunkShape())
	v2Keys := meta.KeyEncoding{Name: meta.KeyEncodingV2, Separator: "."}
	var out []chunk
	coords := make([]int, len(innerGrid))
	shardCoords := make([]int, len(innerGrid))
	local := make([]int, len(innerGrid))
	var (
		lastKey string
		index   *sharding.Index
	)
	for {
		for d, c := range coords {
			shardCoords[d], local[d] = c/per[d], c%per[d]
		}
		key := a.ChunkKey(shardCoords)
		if key != lastKey {
			f, err := store.Open(ctx, s, key)
			if err != nil {
				return nil, err
			}
			ix, err := sh.ReadIndex(f, f.Info().Size)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			index, lastKey = ix, key
		}
		if off, n, ok := index.Chunk(nd.Linear(local, per)); ok {
			out = append(out, chunk{
				shard: filepath.Join(storeDir, filepath.FromSlash(key)),
				off:   off, n: n,
				v3: name + "/" + a.Keys.Key(coords),
				v2: name + "/" + v2Keys.Key(coords),
			})
		}
		if !nd.Next(coords, innerGrid) {
			return out, nil
		}
	}
}
