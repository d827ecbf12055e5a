package keyspace

import (
	"slices"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
)

// TestShardNew: the shard shape of a new array holds whole inner chunks up
// to the policy's bytes (at most maxInnerPerShard), along the last axis
// first and no more than the array has; a negative policy and 0-d arrays
// stay unsharded.
func TestShardNew(t *testing.T) {
	cases := []struct {
		name          string
		policy        int64
		typ           dtype.DataType
		shape, chunks []int
		want          []int // nil: unsharded
	}{
		{"whole small array", 0, dtype.TypeInt32, []int{100, 80}, []int{10, 16}, []int{100, 80}},
		{"last axis first", 1 << 20, dtype.TypeFloat64, []int{1000, 2048}, []int{64, 512}, []int{64, 2048}},
		{"then the next axes", 1 << 20, dtype.TypeUint8, []int{100, 10, 10}, []int{1, 10, 10}, []int{100, 10, 10}},
		{"a budget spread over axes", 2 << 10, dtype.TypeUint8, []int{64, 64}, []int{8, 8}, []int{32, 64}},
		{"chunks larger than the target", 1 << 10, dtype.TypeFloat32, []int{100, 100}, []int{50, 50}, []int{50, 50}},
		{"an index of at most 65536 chunks", 0, dtype.TypeUint8, []int{1 << 20}, []int{1}, []int{maxInnerPerShard}},
		{"an empty axis", 0, dtype.TypeInt16, []int{0, 30}, []int{5, 10}, []int{5, 30}},
		{"unsharded", -1, dtype.TypeInt32, []int{100, 80}, []int{10, 16}, nil},
		{"0-d", 0, dtype.TypeInt32, []int{}, []int{}, nil},
	}
	for _, c := range cases {
		f := &FS{opts: Options{NewShardBytes: c.policy}}
		a := &meta.ArrayV3{Shape: c.shape, DataType: c.typ, ChunkShape: c.chunks, FillValue: make([]byte, c.typ.Size),
			Codecs: []meta.Codec{{Name: "bytes"}}, KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}}
		got := f.shardNew(a)
		sharded := len(got.Codecs) == 1 && got.Codecs[0].Name == "sharding_indexed"
		switch {
		case c.want == nil && (sharded || !slices.Equal(got.ChunkShape, c.chunks)):
			t.Errorf("%s: chunks %v, codecs %s; want unsharded", c.name, got.ChunkShape, meta.ChainString(got.Codecs))
		case c.want != nil && (!sharded || !slices.Equal(got.ChunkShape, c.want)):
			t.Errorf("%s: shard shape %v, codecs %s; want %v, sharding_indexed", c.name, got.ChunkShape, meta.ChainString(got.Codecs), c.want)
		}
	}
}
