package blosc

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Benchmark datasets, 4 MiB each, shared with testdata/bench_cblosc.py
// (DATASETS there): a smooth uint16 volume with 2 bits of noise, and a
// float32 random walk.
var benchDatasets = []struct {
	name string
	gen  genParams
}{
	{"u16vol", genParams{Kind: "vol16", TS: 2, NBytes: 2 * 128 * 128 * 128, Seed: 1, Shape: []int{128, 128, 128}}},
	{"f32walk", genParams{Kind: "f32walk", TS: 4, NBytes: 4 << 20, Seed: 2, Amp: 3}},
}

var benchInputs = sync.OnceValue(func() map[string][]byte {
	m := map[string][]byte{}
	for _, d := range benchDatasets {
		in, err := genInput(d.gen)
		if err != nil {
			panic(err)
		}
		m[d.name] = in
	}
	return m
})

// BenchmarkDecode decodes frames written by our Compress (level 5, byte
// shuffle, automatic blocks: zarr's usual settings).
func BenchmarkDecode(b *testing.B) {
	for _, d := range benchDatasets {
		src := benchInputs()[d.name]
		for _, cname := range allCnames {
			for _, sh := range []Shuffle{ByteShuffle, BitShuffle} {
				frame, err := Compress(src, Options{Compressor: cname, Level: 5, Shuffle: sh, TypeSize: d.gen.TS})
				if err != nil {
					b.Fatal(err)
				}
				b.Run(fmt.Sprintf("%s/%s/%s", d.name, cname, shuffleName(sh)), func(b *testing.B) {
					benchDecode(b, frame, len(src))
				})
			}
		}
	}
}

func shuffleName(s Shuffle) string {
	return [...]string{"noshuffle", "shuffle", "bitshuffle"}[s]
}

func benchDecode(b *testing.B, frame []byte, n int) {
	dst := make([]byte, n)
	b.SetBytes(int64(n))
	b.ReportMetric(float64(n)/float64(len(frame)), "ratio")
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := Decompress(dst, frame, -1); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0, n)
}

// reportCPU adds "cpuMB/s": bytes per second of process CPU time, a
// measure that other load on the machine does not distort (with -cpu 1 it
// is the single-core speed).
func reportCPU(b *testing.B, cpu0 float64, n int) {
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(n)*float64(b.N)/cpu/1e6, "cpuMB/s")
	}
}

// BenchmarkDecodeCBlosc decodes the frames c-blosc wrote into
// $BLOSC_BENCH_DIR (see testdata/bench_cblosc.py, which runs this and
// compares with c-blosc decoding the same files).
func BenchmarkDecodeCBlosc(b *testing.B) {
	dir := os.Getenv("BLOSC_BENCH_DIR")
	if dir == "" {
		b.Skip("BLOSC_BENCH_DIR not set; run testdata/bench_cblosc.py")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.blosc"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no frames in %s: %v", dir, err)
	}
	sort.Strings(files)
	for _, f := range files {
		frame, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		h, err := ReadHeader(frame)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.TrimSuffix(filepath.Base(f), ".blosc"), func(b *testing.B) {
			benchDecode(b, frame, h.NBytes)
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, d := range benchDatasets {
		src := benchInputs()[d.name]
		for _, cname := range allCnames {
			for _, level := range []int{1, 5} {
				o := Options{Compressor: cname, Level: level, Shuffle: ByteShuffle, TypeSize: d.gen.TS}
				b.Run(fmt.Sprintf("%s/%s/level%d", d.name, cname, level), func(b *testing.B) {
					b.SetBytes(int64(len(src)))
					var n int
					cpu0 := processCPU()
					for b.Loop() {
						frame, err := Compress(src, o)
						if err != nil {
							b.Fatal(err)
						}
						n = len(frame)
					}
					reportCPU(b, cpu0, len(src))
					b.ReportMetric(float64(len(src))/float64(n), "ratio")
				})
			}
		}
	}
}

func BenchmarkUnshuffle(b *testing.B) {
	for _, ts := range []int{2, 3, 4, 8, 12, 16} {
		src := make([]byte, 256<<10)
		dst := make([]byte, len(src))
		b.Run(fmt.Sprintf("ts%d", ts), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			cpu0 := processCPU()
			for b.Loop() {
				unshuffle(dst, src, ts)
			}
			reportCPU(b, cpu0, len(src))
		})
	}
}

func BenchmarkBitunshuffle(b *testing.B) {
	for _, ts := range []int{1, 2, 4, 8} {
		src := make([]byte, 256<<10)
		dst := make([]byte, len(src))
		tmp := make([]byte, len(src))
		b.Run(fmt.Sprintf("ts%d", ts), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			cpu0 := processCPU()
			for b.Loop() {
				bitunshuffle(dst, src, tmp, ts)
			}
			reportCPU(b, cpu0, len(src))
		})
	}
}

// BenchmarkParallelThreshold decodes frames of several sizes with one and
// with all goroutines; parallelMinBytes is set from where parallel wins.
func BenchmarkParallelThreshold(b *testing.B) {
	src := benchInputs()["u16vol"]
	for _, n := range []int{128 << 10, 256 << 10, 512 << 10, 1 << 20, 4 << 20} {
		for _, cname := range []string{"lz4", "zstd"} {
			frame, err := Compress(src[:n], Options{Compressor: cname, Level: 5, Shuffle: ByteShuffle, TypeSize: 2, BlockSize: 32 << 10})
			if err != nil {
				b.Fatal(err)
			}
			for _, w := range []int{1, 0} {
				name := fmt.Sprintf("%dKiB/%s/workers=%d", n>>10, cname, w)
				if w == 0 {
					name = fmt.Sprintf("%dKiB/%s/workers=all", n>>10, cname)
				}
				b.Run(name, func(b *testing.B) {
					defer setForceWorkers(w)()
					benchDecode(b, frame, n)
				})
			}
		}
	}
}

// setForceWorkers makes Decompress use w goroutines (0: GOMAXPROCS) whatever
// the frame size, and returns a function restoring the default.
func setForceWorkers(w int) func() {
	old := forceWorkers
	if w == 0 {
		w = runtime.GOMAXPROCS(0)
	}
	forceWorkers = w
	return func() { forceWorkers = old }
}
