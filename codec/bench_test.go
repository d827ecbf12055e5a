package codec_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/dtype"
)

// benchSpec is a 4 MiB uint16 volume.
var benchSpec = codec.Spec{Shape: []int{32, 256, 256}, Type: dtype.TypeUint16}

// benchVolume is smooth, slightly noisy data, like a microscopy volume.
func benchVolume() *codec.Chunk {
	c := codec.NewChunk(benchSpec)
	seed := uint32(1)
	i := 0
	for z := range 32 {
		for y := range 256 {
			for x := range 256 {
				seed = seed*1664525 + 1013904223
				v := 2000 + 800*math.Sin(float64(x)/23)*math.Cos(float64(y)/31) + 40*float64(z) + float64(seed>>30)
				binary.LittleEndian.PutUint16(c.Data[2*i:], uint16(v))
				i++
			}
		}
	}
	return c
}

// BenchmarkDecode decodes one 4 MiB chunk per iteration; MB/s are of
// decoded data.
func BenchmarkDecode(b *testing.B) {
	vol := benchVolume()
	blosc := func(cname, shuffle string) string {
		return `[` + le + `,{"name":"blosc","configuration":{"cname":"` + cname + `","clevel":5,"shuffle":"` + shuffle + `","typesize":2,"blocksize":0}}]`
	}
	for _, bc := range []struct{ name, chain string }{
		{"bytes-LE", `[` + le + `]`},
		{"bytes-BE", `[{"name":"bytes","configuration":{"endian":"big"}}]`},
		{"transpose-3D", `[{"name":"transpose","configuration":{"order":[2,1,0]}},` + le + `]`},
		{"transpose-2D", `[{"name":"transpose","configuration":{"order":[0,2,1]}},` + le + `]`},
		{"gzip", `[` + le + `,{"name":"gzip","configuration":{"level":5}}]`},
		{"zstd", `[` + le + `,{"name":"zstd","configuration":{"level":3,"checksum":false}}]`},
		{"blosc-lz4-shuffle", blosc("lz4", "shuffle")},
		{"blosc-zstd-shuffle", blosc("zstd", "shuffle")},
		{"blosc-blosclz-shuffle", blosc("blosclz", "shuffle")},
		{"crc32c", `[` + le + `,{"name":"crc32c"}]`},
		{"numcodecs-lz4", `[` + le + `,{"name":"numcodecs.lz4"}]`},
		{"numcodecs-zlib", `[` + le + `,{"name":"numcodecs.zlib","configuration":{"level":1}}]`},
		{"numcodecs-bz2", `[` + le + `,{"name":"numcodecs.bz2","configuration":{"level":9}}]`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := codec.NewPipeline(chain(b, bc.chain), benchSpec)
			if err != nil {
				b.Fatal(err)
			}
			enc, err := p.Encode(vol)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(vol.Data)))
			for b.Loop() {
				if _, err := p.Decode(enc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(vol.Data))/float64(len(enc)), "ratio")
		})
	}
}

// BenchmarkCopy is the baseline: copying the decoded bytes once.
func BenchmarkCopy(b *testing.B) {
	vol := benchVolume()
	dst := make([]byte, len(vol.Data))
	b.SetBytes(int64(len(vol.Data)))
	for b.Loop() {
		copy(dst, vol.Data)
	}
}
