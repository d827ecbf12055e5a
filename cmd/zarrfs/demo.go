package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

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
	fmt.Fprintf(stdout, "wrote a sample sharded Zarr v3 store, an OME-Zarr 0.5 image with labels, to %s:\n", dir)
	fmt.Fprintf(stdout, "  volume                   the image: 3 levels, axes z/y/x in micrometers, one channel\n")
	fmt.Fprintf(stdout, "  volume/0                 uint16 256x256x256 in 128^3 shards of 32^3 inner chunks, zstd\n")
	fmt.Fprintf(stdout, "  volume/1, volume/2       the same downsampled to 128^3 and 64^3, gzip\n")
	fmt.Fprintf(stdout, "  volume/labels/mask       its label image: uint8, 2 levels, sparse (empty inner chunks and missing shards)\n")
	fmt.Fprintf(stdout, "try: %s info %s\n", selfName(), dir)
	return 0
}

// selfName is how to run this zarrfs in a shell: zarrfs when that is it
// on PATH, else its path (make demo runs bin/zarrfs, not installed).
func selfName() string {
	self, err := os.Executable()
	if err != nil {
		return "zarrfs"
	}
	if onPath, err := exec.LookPath("zarrfs"); err == nil {
		if a, b := realPath(onPath), realPath(self); a == b {
			return "zarrfs"
		}
	}
	return self
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// demoLevels are the image's levels: level i is downsampled by 2^i.
const demoLevels, demoLabelLevels = 3, 2

// writeDemo writes the sample store into dir: an OME-Zarr 0.5 image, so
// that the v2 view shows OME-Zarr 0.4 to imaging tools.
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
		{"", `{"description":"zarrfs demo store: a synthetic 3-D image (OME-Zarr 0.5) with a downsampled pyramid and a sparse label mask"}`},
		{"volume", `{"ome":{"version":"0.5","multiscales":[` + multiscale("volume", demoLevels, "gaussian") + `],` +
			`"omero":{"name":"volume","channels":[{"label":"intensity","color":"FFFFFF","active":true,"window":{"min":0,"max":65535,"start":1000,"end":3500}}],"rdefs":{"model":"greyscale"}}}}`},
		{"volume/labels", `{"ome":{"version":"0.5","labels":["mask"]}}`},
		{"volume/labels/mask", `{"ome":{"version":"0.5","multiscales":[` + multiscale("mask", demoLabelLevels, "nearest") + `],` +
			`"image-label":{"colors":[{"label-value":1,"rgba":[255,64,64,255]}],"properties":[{"label-value":1,"class":"sphere"}],"source":{"image":"../../"}}}}`},
	}
	for _, g := range groups {
		if err := zarr.CreateGroup(ctx, s, g.path, 3, json.RawMessage(g.attrs)); err != nil {
			return err
		}
	}
	zstd := meta.Codec{Name: "zstd", Configuration: json.RawMessage(`{"level":3,"checksum":false}`)}
	gzip := meta.Codec{Name: "gzip", Configuration: json.RawMessage(`{"level":5}`)}
	type level struct {
		path       string
		typ        dtype.DataType
		size       int
		compressor meta.Codec
		value      func(z, y, x int) uint16
	}
	var levels []level
	for i := range demoLevels {
		f := 1 << i
		c := gzip
		if i == 0 {
			c = zstd
		}
		levels = append(levels, level{fmt.Sprintf("volume/%d", i), dtype.TypeUint16, 256 / f, c, func(z, y, x int) uint16 { return volume(f*z, f*y, f*x) }})
	}
	for i := range demoLabelLevels {
		f := 1 << i
		levels = append(levels, level{fmt.Sprintf("volume/labels/mask/%d", i), dtype.TypeUint8, 256 / f, zstd, func(z, y, x int) uint16 { return mask(f*z, f*y, f*x) }})
	}
	bytesLE := meta.Codec{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)}
	for _, l := range levels {
		shard := min(l.size, 128)
		m := &meta.ArrayV3{
			Shape: []int{l.size, l.size, l.size}, DataType: l.typ,
			ChunkShape:     []int{shard, shard, shard},
			KeyEncoding:    meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
			FillValue:      make([]byte, l.typ.Size),
			Codecs:         zarr.ShardedCodecs([]int{32, 32, 32}, []meta.Codec{bytesLE, l.compressor}),
			DimensionNames: names("z", "y", "x"),
		}
		a, err := zarr.CreateArrayV3(ctx, s, l.path, m)
		if err != nil {
			return err
		}
		if err := writeBlocks(ctx, a, l.value); err != nil {
			return err
		}
	}
	return nil
}

// multiscale is the OME-Zarr 0.5 multiscales entry of an image whose
// levels 0..n-1 halve each axis: 0.5 micrometer voxels at level 0.
func multiscale(name string, n int, kind string) string {
	var datasets []string
	for i := range n {
		s := 0.5 * float64(int(1)<<i)
		datasets = append(datasets, fmt.Sprintf(`{"path":"%d","coordinateTransformations":[{"type":"scale","scale":[%g,%g,%g]}]}`, i, s, s, s))
	}
	axes := `[{"name":"z","type":"space","unit":"micrometer"},{"name":"y","type":"space","unit":"micrometer"},{"name":"x","type":"space","unit":"micrometer"}]`
	return fmt.Sprintf(`{"name":%q,"axes":%s,"datasets":[%s],"type":%q,"metadata":{"method":"zarrfs demo: every 2nd voxel of the function level 0 samples"}}`,
		name, axes, strings.Join(datasets, ","), kind)
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
