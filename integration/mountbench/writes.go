package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// writeSpecs are the arrays of the write workload's store, created empty:
// a volume zarr-python fills through the v2 view (256 MiB, 1/8 with
// -quick), and arrays with one shard per measured round for writing a
// shard's inner chunks one by one (64 KiB and 512 KiB inner chunks).
func (b *bench) writeSpecs() []arraySpec {
	volume := []int{512, 512, 512}
	if b.cfg.quick {
		volume = []int{256, 256, 256}
	}
	rounds := b.cfg.warmup + b.cfg.runs
	shards := []int{128 * rounds, 128, 128}
	return []arraySpec{
		{name: "volume", typ: dtype.TypeUint16, shape: volume, shard: []int{256, 256, 256}, inner: []int{64, 64, 64}, codecs: []meta.Codec{bytesLE, zstd3}},
		{name: "shards_raw", typ: dtype.TypeUint16, shape: shards, shard: []int{128, 128, 128}, inner: []int{32, 32, 32}, codecs: []meta.Codec{bytesLE}},
		{name: "shards_zstd", typ: dtype.TypeUint16, shape: shards, shard: []int{128, 128, 128}, inner: []int{32, 32, 32}, codecs: []meta.Codec{bytesLE, zstd3}},
		{name: "shards_large", typ: dtype.TypeUint16, shape: []int{256 * rounds, 256, 256}, shard: []int{256, 256, 256}, inner: []int{64, 64, 64}, codecs: []meta.Codec{bytesLE}},
	}
}

// writeMount is the write workload's read-write mount of its own store.
type writeMount struct {
	b             *bench
	store, native string // the sharded store, and native copies
	mnt           string
	bindfs        string // a writable bindfs mount over a native directory
}

// writes is workload 7: zarr-python 2 writing a whole array through the
// v2 view against writing a native v2 copy, and the inner chunks of one
// shard written one by one through the v3 view against writing the shard
// natively, and against writing the same files through bindfs (what
// writing small files through any FUSE file system costs here). zarrfs
// acknowledges a write once it is in its journal and
// publishes shards in the background: both times are shown, the targets
// apply to the user's (acknowledged) time for zarr-python and to the time
// until the shard is published (fsynced) for the shard.
func (b *bench) writes() error {
	w := &writeMount{b: b, store: filepath.Join(b.work, "write-store"), native: filepath.Join(b.work, "write-native"), mnt: filepath.Join(b.work, "write-mnt"), bindfs: filepath.Join(b.work, "write-bindfs")}
	specs := b.writeSpecs()
	bindfsDir := filepath.Join(b.work, "write-bindfs-dir")
	for _, d := range []string{w.store, w.native, bindfsDir} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	if err := createEmpty(context.Background(), w.store, specs); err != nil {
		return err
	}
	for _, d := range []string{w.mnt, w.bindfs, bindfsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := b.ms.startBindfs(bindfsDir, w.bindfs, true); err != nil {
		return err
	}
	defer b.ms.stopBindfs(w.bindfs)
	if _, err := b.ms.startZarrfs(b.bin, w.store, w.mnt, b.cfg.mountArgs...); err != nil {
		return err
	}
	defer b.ms.stopZarrfs(w.mnt)
	b.section("7. writes through a read-write mount (acknowledged: the writes returned; published: zarrfs has rewritten and fsynced the shards);\n" +
		"   baselines: zarr-python writing a native v2 copy; the shard written natively as one file (open, write, fsync or not, close);\n" +
		"   the same chunk files written through bindfs (FUSE pass-through) to a native directory")
	if err := w.zarrPython(specs[0]); err != nil {
		return err
	}
	for _, s := range specs[1:] {
		if err := w.oneShard(s); err != nil {
			return err
		}
	}
	return nil
}

// createEmpty writes the metadata of empty sharded arrays.
func createEmpty(ctx context.Context, dir string, specs []arraySpec) error {
	s, err := createStore(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		return err
	}
	for _, spec := range specs {
		m := &meta.ArrayV3{
			Shape: spec.shape, DataType: spec.typ, ChunkShape: spec.shard,
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
			FillValue:   make([]byte, spec.typ.Size),
			Codecs:      zarr.ShardedCodecs(spec.inner, spec.codecs),
		}
		if _, err := zarr.CreateArrayV3(ctx, s, spec.name, m); err != nil {
			return err
		}
	}
	return nil
}

//go:embed zarr_write.py
var zarrWritePy []byte

// zarrPythonWrite runs zarr_write.py on one array (creating it when given
// its shape and chunks) and returns how long the write took and when it
// had returned.
func (w *writeMount) zarrPythonWrite(array string, create ...string) (took time.Duration, returned time.Time, err error) {
	script := filepath.Join(w.b.work, "zarr_write.py")
	if err := os.WriteFile(script, zarrWritePy, 0o644); err != nil {
		return 0, time.Time{}, err
	}
	cmd := exec.Command(w.b.cfg.python, append([]string{script, array}, create...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, time.Time{}, err
	}
	if err := cmd.Start(); err != nil {
		return 0, time.Time{}, err
	}
	// The line comes as soon as the write returned; what follows (the
	// interpreter exiting) is not the write's.
	line, readErr := bufio.NewReader(stdout).ReadBytes('\n')
	returned = time.Now()
	if err := cmd.Wait(); err != nil || readErr != nil {
		return 0, time.Time{}, fmt.Errorf("zarr-python writing %s: %v %v\n%s", array, err, readErr, stderr.String())
	}
	var r struct{ Seconds float64 }
	if err := json.Unmarshal(line, &r); err != nil {
		return 0, time.Time{}, fmt.Errorf("zarr-python printed %q: %v", line, err)
	}
	return time.Duration(r.Seconds * float64(time.Second)), returned, nil
}

// zarrPython times zarr-python writing the whole array through the v2 view
// and into a native v2 copy with the same metadata, interleaved, then
// checks both read back the same through zarr-python.
func (w *writeMount) zarrPython(spec arraySpec) error {
	mounted := filepath.Join(w.mnt, "v2", spec.name)
	native := filepath.Join(w.native, spec.name)
	zarray, err := os.ReadFile(filepath.Join(mounted, zarr.ZArray))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(native, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(native, zarr.ZArray), zarray, 0o644); err != nil {
		return err
	}
	var nativeTimes, acked, published sample
	for round := range w.b.cfg.warmup + w.b.cfg.runs {
		n, _, err := w.zarrPythonWrite(native)
		if err != nil {
			return err
		}
		m, returned, err := w.zarrPythonWrite(mounted)
		if err != nil {
			return err
		}
		if err := waitPublished(w.store); err != nil {
			return err
		}
		if round >= w.b.cfg.warmup {
			nativeTimes, acked = append(nativeTimes, n), append(acked, m)
			published = append(published, m+time.Since(returned))
		}
	}
	// python fails unless both read the same data.
	if _, _, err := w.b.python("zarr", 0, 1, native, mounted); err != nil {
		return err
	}
	nbytes := spec.elementBytes()
	name := fmt.Sprintf("zarr-python: v2/%s (%s, %s zstd)", spec.name, formatBytes(float64(nbytes)), spec.innerSize())
	w.b.add(row{name: name + ": acknowledged",
		zarrfs: rate(nbytes, acked.median()), ref: rate(nbytes, nativeTimes.median()),
		ratio: ratio(nativeTimes, acked), atLeast: 0.5, spread: max(nativeTimes.spread(), acked.spread())})
	w.b.add(row{name: name + ": published",
		zarrfs: rate(nbytes, published.median()), ref: rate(nbytes, nativeTimes.median()),
		ratio: ratio(nativeTimes, published), spread: max(nativeTimes.spread(), published.spread())})
	return nil
}

// oneShard times writing every inner chunk of one shard as a file of the
// v3 view (open with O_TRUNC, write, close each), a new shard per round,
// against writing the same shard natively as one file, with and without
// fsync, and against writing the same chunk files through bindfs.
func (w *writeMount) oneShard(spec arraySpec) error {
	s, err := store.OpenDir(w.store, true)
	if err != nil {
		return err
	}
	defer s.Close()
	h, err := zarr.Open(context.Background(), s)
	if err != nil {
		return err
	}
	node, _ := h.Node(spec.name)
	a := node.Array
	sh := a.Sharding()
	nativeDir := filepath.Join(w.native, spec.name)
	if err := os.MkdirAll(nativeDir, 0o755); err != nil {
		return err
	}
	var synced, unsynced, acked, published, viaBindfs sample
	var shardBytes int64
	for round := range w.b.cfg.warmup + w.b.cfg.runs {
		shard := []int{round, 0, 0}
		files, chunks, err := shardChunks(a, shard, w.mnt)
		if err != nil {
			return err
		}
		value, err := sh.EncodeShard(chunks)
		if err != nil {
			return err
		}
		shardBytes = int64(len(value))
		native := filepath.Join(nativeDir, fmt.Sprint(round))
		withSync, err := timed(func() error { return writeFile(native+".fsync", value, true) })
		if err != nil {
			return err
		}
		without, err := timed(func() error { return writeFile(native, value, false) })
		if err != nil {
			return err
		}
		start := time.Now()
		for i, f := range files {
			if err := writeFile(f, chunks[i], false); err != nil {
				return err
			}
		}
		ack := time.Since(start)
		if err := waitPublished(w.store); err != nil {
			return err
		}
		pub := time.Since(start)
		bindfsRound := filepath.Join(w.bindfs, spec.name, fmt.Sprint(round))
		if err := os.MkdirAll(bindfsRound, 0o755); err != nil {
			return err
		}
		bound, err := timed(func() error {
			for i, c := range chunks {
				if err := writeFile(filepath.Join(bindfsRound, fmt.Sprint(i)), c, false); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		got, err := os.ReadFile(filepath.Join(w.store, filepath.FromSlash(a.ChunkKey(shard))))
		if err != nil || !bytes.Equal(got, value) {
			return fmt.Errorf("%s: the published shard differs from the one written natively (%v)", a.ChunkKey(shard), err)
		}
		if round >= w.b.cfg.warmup {
			synced, unsynced = append(synced, withSync), append(unsynced, without)
			acked, published = append(acked, ack), append(published, pub)
			viaBindfs = append(viaBindfs, bound)
		}
	}
	name := fmt.Sprintf("%d chunk files of one shard, %s %s", sh.NumChunks(), spec.innerSize(), spec.codecs[len(spec.codecs)-1].Name)
	// compare adds the row of measured against baseline (times of the
	// same shard's bytes).
	compare := func(label string, measured, baseline sample, atLeast float64) {
		w.b.add(row{name: name + ": " + label,
			zarrfs: rate(shardBytes, measured.median()), ref: rate(shardBytes, baseline.median()),
			ratio: ratio(baseline, measured), atLeast: atLeast, spread: max(baseline.spread(), measured.spread())})
	}
	compare("published vs fsynced", published, synced, 1.0/3)
	compare("published vs written", published, unsynced, 0)
	compare("acknowledged vs written", acked, unsynced, 0)
	compare("acknowledged vs bindfs writing them", acked, viaBindfs, 0)
	// What a FUSE file system costs before doing any work of its own: a
	// design that also has to write and fsync the shard cannot do better
	// than this ratio.
	compare("bindfs writing them vs fsynced shard", viaBindfs, synced, 0)
	return nil
}

// shardChunks encodes the synthetic content of every inner chunk of the
// shard at grid coordinates of a, and returns them with their files in
// the v3 view of the mount at mnt.
func shardChunks(a *zarr.Array, shard []int, mnt string) (files []string, chunks [][]byte, err error) {
	sh := a.Sharding()
	inner := sh.ChunkShape()
	for local := range sh.NumChunks() {
		coords := a.InnerCoords(shard, local)
		start := make([]int, len(coords))
		for d := range coords {
			start[d] = coords[d] * inner[d]
		}
		c := codec.NewChunk(sh.Inner().Spec())
		fillSynthetic(c.Data, a.Type.Size, start, inner)
		b, err := sh.Inner().Encode(c)
		if err != nil {
			return nil, nil, err
		}
		chunks = append(chunks, b)
		files = append(files, filepath.Join(mnt, "v3", a.Path, filepath.FromSlash(a.Keys.Key(coords))))
	}
	return files, chunks, nil
}

// writeFile writes a whole file as `cat >` does (open with O_TRUNC, write,
// close), with fsync before closing if sync is set.
func writeFile(path string, data []byte, sync bool) error {
	fd, err := retry(func() (int, error) {
		return unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	})
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	for rest := data; len(rest) > 0; {
		n, err := retry(func() (int, error) { return unix.Write(fd, rest) })
		if err != nil {
			unix.Close(fd)
			return &os.PathError{Op: "write", Path: path, Err: err}
		}
		rest = rest[n:]
	}
	if sync {
		if err := unix.Fsync(fd); err != nil {
			unix.Close(fd)
			return &os.PathError{Op: "fsync", Path: path, Err: err}
		}
	}
	// A chunk file is committed on close: its error is the write's.
	if err := unix.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: path, Err: err}
	}
	return nil
}

// waitPublished waits until zarrfs has published everything it
// acknowledged: it empties its journal (STORE/.zarrfs/journal/*/*.wal)
// once no record in it is unpublished.
func waitPublished(storeDir string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		segments, err := filepath.Glob(filepath.Join(storeDir, store.StateDir, "journal", "*", "*.wal"))
		if err != nil {
			return err
		}
		var pending int64
		for _, s := range segments {
			if fi, err := os.Stat(s); err == nil {
				pending += fi.Size()
			}
		}
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zarrfs has not published %d journaled bytes within 5 minutes", pending)
		}
		time.Sleep(time.Millisecond)
	}
}
