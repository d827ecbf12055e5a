package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
)

// unseen is workload 1b: the cold read, through v2/, of a store drawn at
// random at every run (its seed and layout are printed), so that no tuning
// can have seen it: one array whose inner chunks are transposed in an order
// Zarr v2 cannot express and compressed, so the view transcodes every
// chunk. The baseline is bindfs over a converted copy, compressed as
// zarr-python 2 would write it (blosc lz4): what a user could mount
// instead of zarrfs.
func (b *bench) unseen() error {
	ctx := context.Background()
	seed := b.cfg.seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	spec := randomSpec(seed, b.cfg.quick)
	b.section(fmt.Sprintf("1b. a store never seen before, read cold through v2/ (seed %d: %s %v in %v shards of %v inner chunks, %s); baseline: bindfs over a converted copy",
		seed, spec.typ, spec.shape, spec.shard, spec.inner, describeCodecs(spec.codecs)))
	work := filepath.Join(b.work, "unseen")
	storeDir, copyDir := filepath.Join(work, "store"), filepath.Join(work, "native-v2")
	mnt, bindMnt := filepath.Join(work, "mnt"), filepath.Join(work, "bindfs")
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	for _, d := range []string{mnt, bindMnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	progress("writing a never-seen store")
	if err := writeStore(ctx, storeDir, []arraySpec{spec}); err != nil {
		return err
	}
	var mounted *integration.Mount
	mount := func(args ...string) (err error) {
		if err := b.ms.stopZarrfs(mnt); err != nil {
			return err
		}
		mounted, err = b.ms.startZarrfs(b.bin, storeDir, mnt, append(append([]string{"--ro"}, b.cfg.mountArgs...), args...)...)
		return err
	}
	defer b.ms.stopZarrfs(mnt)
	if err := mount(); err != nil {
		return err
	}
	zarray := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(mnt, "v2", name, ".zarray")) }
	if err := writeNativeV2(ctx, copyDir, []arraySpec{spec}, zarray); err != nil {
		return err
	}
	chunks, err := listChunks(ctx, storeDir, spec.name)
	if err != nil {
		return err
	}
	if err := b.ms.startBindfs(copyDir, bindMnt, false); err != nil {
		return err
	}
	defer b.ms.stopBindfs(bindMnt)
	c := readCase{spec, "v2"}
	var floor sample // bindfs's reads, as mounted
	var floorBytes int64
	// As mounted (the target), and with the transcoded chunks compressed
	// as the converted copy is (information: what compact copies cost).
	for _, encoding := range []struct {
		name string
		args []string
	}{{"", nil}, {", --v2-transcode blosc-lz4", []string{"--v2-transcode", "blosc-lz4"}}} {
		var times, bound, busy sample
		var served, copied int64
		for range b.cfg.runs {
			if err := dropCaches(); err != nil {
				return err
			}
			d, err := timed(func() (err error) { copied, err = readNativeFiles(bindMnt, chunks); return err })
			if err != nil {
				return err
			}
			bound = append(bound, d)
			if err := mount(encoding.args...); err != nil {
				return err
			}
			if err := dropCaches(); err != nil {
				return err
			}
			before, err := cpuTimes(mounted.Pid())
			if err != nil {
				return err
			}
			if d, err = timed(func() (err error) { served, err = readMountFiles(mnt, c, chunks); return err }); err != nil {
				return err
			}
			after, err := cpuTimes(mounted.Pid())
			if err != nil {
				return err
			}
			times = append(times, d)
			busy = append(busy, (after-before)/time.Duration(runtime.NumCPU()))
		}
		r := row{
			name:   fmt.Sprintf("cold %s%s, every chunk file in key order", c, encoding.name),
			zarrfs: rate(served, times.median()), ref: rate(copied, bound.median()),
			ratio: ratio(bound, times), spread: max(bound.spread(), times.spread()),
		}
		if encoding.args == nil {
			r.atLeast = 1.0
		}
		b.add(r)
		// What the same work would take with every CPU busy all along.
		b.add(row{
			name:   fmt.Sprintf("floor: the CPU time of zarrfs and this reader%s, spread over all CPUs, vs the same bindfs reads", encoding.name),
			zarrfs: rate(served, busy.median()), ref: rate(copied, bound.median()),
			ratio: ratio(bound, busy), spread: busy.spread(),
		})
		if encoding.args == nil {
			floor, floorBytes = bound, copied
		}
	}
	// The floor of any view that serves these chunks: v2 cannot express
	// their order, so each must at least be decoded.
	decode, err := decodeFloor(ctx, storeDir, spec.name, chunks, b.cfg.runs)
	if err != nil {
		return err
	}
	b.add(row{
		name:   "floor: decoding every stored chunk, in memory on all CPUs, no FUSE, vs the same bindfs reads",
		zarrfs: rate(spec.elementBytes(), decode.median()), ref: rate(floorBytes, floor.median()),
		ratio: ratio(floor, decode), spread: decode.spread(),
	})
	return nil
}

// decodeFloor times decoding every stored chunk of the array, its stored
// bytes read into memory first, with as many goroutines as CPUs: what
// serving them decoded costs at the least, before any FUSE request.
func decodeFloor(ctx context.Context, storeDir, name string, chunks []chunk, runs int) (sample, error) {
	a, s, err := openShardedArray(ctx, storeDir, name)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	inner := a.Sharding().Inner()
	stored := make([][]byte, len(chunks))
	p := newPreader()
	defer p.close()
	for i, ch := range chunks {
		if err := p.read(ch); err != nil {
			return nil, err
		}
		stored[i] = bytes.Clone(p.buf[:ch.n])
	}
	var times sample
	for range runs {
		d, err := timed(func() error {
			next := make(chan []byte)
			errs := make([]error, runtime.GOMAXPROCS(0))
			var wg sync.WaitGroup
			for w := range errs {
				wg.Go(func() {
					for b := range next {
						if _, err := inner.Decode(b); err != nil && errs[w] == nil {
							errs[w] = err
						}
					}
				})
			}
			for _, b := range stored {
				next <- b
			}
			close(next)
			wg.Wait()
			return errors.Join(errs...)
		})
		if err != nil {
			return nil, err
		}
		times = append(times, d)
	}
	return times, nil
}

// randomSpec draws a 3-D array of about 128 MiB (16 with quick): a data
// type, inner chunks of 64 KiB to 1 MiB, shards of 2 to 4 inner chunks a
// side, a transpose order v2 cannot express and a compressor.
func randomSpec(seed uint64, quick bool) arraySpec {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	typ := []dtype.DataType{dtype.TypeUint8, dtype.TypeUint16, dtype.TypeInt32}[r.IntN(3)]
	var inner []int
	for {
		inner = []int{16 << r.IntN(4), 16 << r.IntN(4), 16 << r.IntN(4)}
		if n := nd.Size(inner) * typ.Size; n >= 64<<10 && n <= 1<<20 {
			break
		}
	}
	total := 128 << 20
	if quick {
		total = 16 << 20
	}
	shard, shape := make([]int, 3), make([]int, 3)
	for d := range inner {
		shard[d] = inner[d] * (2 + r.IntN(3))
		shape[d] = shard[d]
	}
	for d := 0; nd.Size(shape)*typ.Size < total; d = (d + 1) % 3 {
		shape[d] += shard[d]
	}
	// Orders that are neither C (identity) nor F (reversed).
	orders := [][]int{{0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}}
	order, _ := json.Marshal(map[string][]int{"order": orders[r.IntN(len(orders))]})
	compressors := []meta.Codec{
		{Name: "zstd", Configuration: json.RawMessage(fmt.Sprintf(`{"level":%d,"checksum":false}`, 1+r.IntN(5)))},
		{Name: "gzip", Configuration: json.RawMessage(fmt.Sprintf(`{"level":%d}`, 1+r.IntN(6)))},
		{Name: "blosc", Configuration: json.RawMessage(fmt.Sprintf(`{"cname":"%s","clevel":5,"shuffle":"shuffle","typesize":%d,"blocksize":0}`,
			[]string{"lz4", "zstd", "blosclz"}[r.IntN(3)], typ.Size))},
	}
	return arraySpec{
		name: "unseen", typ: typ, shape: shape, shard: shard, inner: inner,
		codecs:    []meta.Codec{{Name: "transpose", Configuration: order}, bytesLE, compressors[r.IntN(len(compressors))]},
		readBench: true,
	}
}

func describeCodecs(codecs []meta.Codec) string {
	var parts []string
	for _, c := range codecs {
		parts = append(parts, c.Name+string(c.Configuration))
	}
	return strings.Join(parts, " + ")
}

// cpuTimes is the CPU time (user and system) used so far by the process
// pid and by this one, which reads the mount.
func cpuTimes(pid int) (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields 14 and 15 (utime, stime, in clock ticks of 10 ms) follow the
	// command name, which ends with the last ')'.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(f))
	}
	for _, s := range f[11:13] {
		ticks, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
		}
		total += time.Duration(ticks) * 10 * time.Millisecond
	}
	return total, nil
}
