package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", "DIR", stderr)
	if code, ok := parse(fs, args, 1, 1); !ok {
		return code
	}
	dir := fs.Arg(0)
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fail(stderr, fmt.Errorf("%s is not empty; the demo writes a new store", dir))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(stderr, err)
	}
	if err := writeDemo(ctx, dir); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "wrote a sample sharded Zarr v3 store to %s:\n", dir)
	fmt.Fprintf(stdout, "  volume/0     uint16 256x256x256 in 128^3 shards of 32^3 inner chunks, zstd\n")
	fmt.Fprintf(stdout, "  volume/1     uint16 128x128x128, the same downsampled, gzip\n")
	fmt.Fprintf(stdout, "  labels/mask  uint8  256x256x256, sparse: empty inner chunks and missing shards\n")
	fmt.Fprintf(stdout, "try: zarrfs info %s\n", dir)
	return 0
}

// writeDemo writes the sample store into dir.
func writeDemo(ctx context.Context, dir string) error {
	s, err := store.OpenDir(dir, false)
	if err != nil {
		return err
	}
	defer s.Close()
	groups := []struct {
		path  string
		attrs string
	}{
		{"", `{"description":"zarrfs demo store: a synthetic 3-D volume with a downsampled level and a sparse label mask"}`},
		{"volume", `{"multiscales":[{"version":"0.4","name":"volume","axes":[{"name":"z","type":"space"},{"name":"y","type":"space"},{"name":"x","type":"space"}],"datasets":[{"path":"0"},{"path":"1"}]}]}`},
		{"labels", `{"note":"1 inside a sphere, 0 elsewhere; all-zero inner chunks are not stored"}`},
	}
	for _, g := range groups {
		if err := zarr.CreateGroup(ctx, s, g.path, 3, json.RawMessage(g.attrs)); err != nil {
			return err
		}
	}
	zstd := meta.Codec{Name: "zstd", Configuration: json.RawMessage(`{"level":3,"checksum":false}`)}
	gzip := meta.Codec{Name: "gzip", Configuration: json.RawMessage(`{"level":5}`)}
	bytesLE := meta.Codec{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)}
	arrays := []struct {
		path        string
		typ         dtype.DataType
		size, shard int
		compressor  meta.Codec
		value       func(z, y, x int) uint16
	}{
		{"volume/0", dtype.TypeUint16, 256, 128, zstd, func(z, y, x int) uint16 { return volume(z, y, x) }},
		{"volume/1", dtype.TypeUint16, 128, 64, gzip, func(z, y, x int) uint16 { return volume(2*z, 2*y, 2*x) }},
		{"labels/mask", dtype.TypeUint8, 256, 128, zstd, mask},
	}
	for _, spec := range arrays {
		m := &meta.ArrayV3{
			Shape: []int{spec.size, spec.size, spec.size}, DataType: spec.typ,
			ChunkShape:     []int{spec.shard, spec.shard, spec.shard},
			KeyEncoding:    meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
			FillValue:      make([]byte, spec.typ.Size),
			Codecs:         zarr.ShardedCodecs([]int{32, 32, 32}, []meta.Codec{bytesLE, spec.compressor}),
			DimensionNames: names("z", "y", "x"),
		}
		a, err := zarr.CreateArrayV3(ctx, s, spec.path, m)
		if err != nil {
			return err
		}
		if err := writeBlocks(ctx, a, spec.value); err != nil {
			return err
		}
	}
	return nil
}

// writeBlocks writes the array one shard at a time, so memory stays at one shard.
func writeBlocks(ctx context.Context, a *zarr.Array, value func(z, y, x int) uint16) error {
	grid := a.Grid()
	coords := make([]int, 3)
	for {
		start := make([]int, 3)
		for d := range start {
			start[d] = coords[d] * a.ChunkShape[d]
		}
		block := codec.NewChunk(codec.Spec{Shape: a.ChunkShape, Type: a.Type, Fill: a.Fill()})
		size := a.Type.Size
		i := 0
		for z := 0; z < a.ChunkShape[0]; z++ {
			for y := 0; y < a.ChunkShape[1]; y++ {
				for x := 0; x < a.ChunkShape[2]; x++ {
					v := value(start[0]+z, start[1]+y, start[2]+x)
					if size == 2 {
						binary.LittleEndian.PutUint16(block.Data[i:], v)
					} else {
						block.Data[i] = byte(v)
					}
					i += size
				}
			}
		}
		if err := a.WriteRegion(ctx, start, block); err != nil {
			return err
		}
		if !nd.Next(coords, grid) {
			return nil
		}
	}
}

// volume is a smooth synthetic intensity with texture, so it compresses
// like real microscopy data rather than to nothing.
func volume(z, y, x int) uint16 {
	fz, fy, fx := float64(z), float64(y), float64(x)
	v := 2000 + 800*math.Sin(fx/17)*math.Cos(fy/23) + 600*math.Sin((fz+fx)/31) + 5*fz
	noise := uint16((x*7919 + y*104729 + z*1299709) % 64)
	return uint16(v) + noise
}

// mask is 1 inside a sphere in one octant of the volume, 0 elsewhere.
func mask(z, y, x int) uint16 {
	dz, dy, dx := z-80, y-80, x-80
	if dz*dz+dy*dy+dx*dx < 60*60 {
		return 1
	}
	return 0
}

func names(ns ...string) []*string {
	out := make([]*string, len(ns))
	for i := range ns {
		out[i] = &ns[i]
	}
	return out
}
