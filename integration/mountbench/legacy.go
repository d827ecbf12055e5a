package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
)

// legacySource is a native Zarr v2 array that workload writes copies into
// the mount with cp -r.
type legacySource struct {
	name       string
	shape      []int
	chunks     []int
	compressor string // the .zarray's compressor, JSON
	desc       string // of its chunks, for the table
}

// legacySources are the native v2 arrays copied in: 1 GiB each (64 MiB
// with -quick) of uint16, in 64 KiB raw chunks and in 512 KiB zstd chunks.
func legacySources(quick bool) []legacySource {
	shape := []int{512, 1024, 1024}
	if quick {
		shape = []int{128, 256, 1024}
	}
	return []legacySource{
		{name: "chunks64k", shape: shape, chunks: []int{32, 32, 32}, compressor: "null", desc: "64 KiB raw"},
		{name: "chunks512k", shape: shape, chunks: []int{64, 64, 64}, compressor: `{"id":"zstd","level":3}`, desc: "512 KiB zstd"},
	}
}

func (s legacySource) zarray() string {
	ints := func(v []int) string { return strings.Join(strings.Fields(fmt.Sprint(v)), ",") }
	return fmt.Sprintf(`{"zarr_format":2,"shape":%s,"chunks":%s,"dtype":"<u2","compressor":%s,"fill_value":0,"order":"C","filters":null}`,
		ints(s.shape), ints(s.chunks), s.compressor)
}

// legacyWrites is workload writes: what legacy writers cost through the v2
// view of a read-write mount of a local store, which stores what they write
// as sharded Zarr v3. cp -r of a native v2 array into MNT/v2/ against cp -r
// of it to the same disk, both until the data is durable (zarrfs: its
// journal is empty, every shard published and fsynced; native: sync -f);
// and zarr-python 2 creating and writing a new array through MNT/v2/
// against a new native v2 array.
func (b *bench) legacyWrites() error {
	ctx := context.Background()
	dir := filepath.Join(b.work, "legacy")
	src, storeDir, native := filepath.Join(dir, "src"), filepath.Join(dir, "store"), filepath.Join(dir, "native")
	mnt := filepath.Join(dir, "mnt")
	if mounted, _ := zfs.Mounted(mnt); mounted {
		return fmt.Errorf("%s is still mounted from an earlier run; unmount it first", mnt)
	}
	sources := legacySources(b.cfg.quick)
	marker := filepath.Join(dir, "src-complete")
	want := fmt.Sprintf("quick=%v\n", b.cfg.quick)
	if got, err := os.ReadFile(marker); err != nil || string(got) != want {
		progress("writing the native v2 arrays to copy")
		if err := os.RemoveAll(src); err != nil {
			return err
		}
		if err := writeLegacySources(ctx, src, sources); err != nil {
			return err
		}
		if err := os.WriteFile(marker, []byte(want), 0o644); err != nil {
			return err
		}
	}
	for _, d := range []string{storeDir, native} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	if err := createEmpty(ctx, storeDir, nil); err != nil {
		return err
	}
	for _, d := range []string{native, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if _, err := b.ms.startZarrfs(b.bin, storeDir, mnt, b.cfg.mountArgs...); err != nil {
		return err
	}
	defer b.ms.stopZarrfs(mnt)
	w := &writeMount{b: b, store: storeDir, native: native, mnt: mnt}
	b.section("writes. legacy writers creating new arrays in MNT/v2/ of a read-write mount (stored as sharded v3, --new-shards default);\n" +
		"   published: zarrfs's journal is empty (every shard written and fsynced); baselines: the same writer to a native v2 copy on the same disk\n" +
		"   (cp -r: then sync -f; the rate is of the chunk files' bytes)")
	for _, s := range sources {
		if err := w.copyIn(filepath.Join(src, s.name), s.desc); err != nil {
			return fmt.Errorf("cp -r %s: %w", s.name, err)
		}
	}
	return w.createWithPython()
}

// writeLegacySources writes the native v2 arrays with the synthetic
// content.
func writeLegacySources(ctx context.Context, dir string, sources []legacySource) error {
	s, err := createStore(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	for _, src := range sources {
		m, err := meta.ParseZarray([]byte(src.zarray()))
		if err != nil {
			return err
		}
		a, err := zarr.CreateArrayV2(ctx, s, src.name, m, nil)
		if err != nil {
			return err
		}
		if err := writeByBlocks(ctx, a); err != nil {
			return fmt.Errorf("native v2 %s: %w", src.name, err)
		}
	}
	return nil
}

// copyIn times cp -r of the native v2 array at src into a new array of
// the v2 view until published, against cp -r of it to a new directory on
// the same disk and sync -f, interleaved; checks that zarr-python reads the
// same from both and that the store holds shards, not one file per chunk.
func (w *writeMount) copyIn(src, desc string) error {
	name := filepath.Base(src)
	nbytes, chunks, _, err := dirSize(src)
	if err != nil {
		return err
	}
	var nativeTimes, published sample
	var storeFiles int
	for round := range w.b.cfg.warmup + w.b.cfg.runs {
		target := fmt.Sprintf("%s-%d", name, round)
		native, mounted := filepath.Join(w.native, target), filepath.Join(w.mnt, "v2", target)
		n, err := timed(func() error {
			if err := runCmd("cp", "-r", src, native); err != nil {
				return err
			}
			return runCmd("sync", "-f", native)
		})
		if err != nil {
			return err
		}
		m, err := timed(func() error {
			if err := runCmd("cp", "-r", src, mounted); err != nil {
				return err
			}
			return waitPublished(w.store)
		})
		if err != nil {
			return err
		}
		if round >= w.b.cfg.warmup {
			nativeTimes, published = append(nativeTimes, n), append(published, m)
		}
		last := round == w.b.cfg.warmup+w.b.cfg.runs-1
		if last {
			// python fails unless both read the same data.
			if _, _, err := w.b.python("zarr", 0, 1, native, mounted); err != nil {
				return err
			}
			if _, _, storeFiles, err = dirSize(filepath.Join(w.store, target)); err != nil {
				return err
			}
		}
		// Deleted through the mount (a delete of what it created), so the
		// disk holds one copy at a time.
		if err := os.RemoveAll(native); err != nil {
			return err
		}
		if err := runCmd("rm", "-r", mounted); err != nil {
			return err
		}
	}
	label := fmt.Sprintf("cp -r %d %s chunks (%s)", chunks, desc, formatBytes(float64(nbytes)))
	w.b.add(row{name: label + ": published",
		zarrfs: rate(nbytes, published.median()), ref: rate(nbytes, nativeTimes.median()),
		ratio: ratio(nativeTimes, published), atLeast: 0.5, spread: max(nativeTimes.spread(), published.spread())})
	// Far fewer files: shards, not one file per chunk.
	fewer := storeFiles*10 <= chunks
	w.b.add(row{name: label + ": store files vs chunks",
		zarrfs: fmt.Sprintf("%d files", storeFiles), ref: fmt.Sprintf("%d chunks", chunks),
		check: "<= chunks/10", pass: &fewer})
	return nil
}

// createWithPython times zarr-python 2 creating a new 256 MiB array
// (32 MiB with -quick; 512 KiB zstd chunks) through the v2 view and
// writing it whole, against the same into a new native v2 array,
// interleaved; then checks both read back the same.
func (w *writeMount) createWithPython() error {
	shape, chunks := "512,512,512", "64,64,64"
	nbytes := int64(512 * 512 * 512 * 2)
	if w.b.cfg.quick {
		shape, nbytes = "256,256,256", 256*256*256*2
	}
	var nativeTimes, acked, published sample
	for round := range w.b.cfg.warmup + w.b.cfg.runs {
		target := fmt.Sprintf("python-%d", round)
		native, mounted := filepath.Join(w.native, target), filepath.Join(w.mnt, "v2", target)
		n, _, err := w.zarrPythonWrite(native, shape, chunks)
		if err != nil {
			return err
		}
		m, returned, err := w.zarrPythonWrite(mounted, shape, chunks)
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
		if round == w.b.cfg.warmup+w.b.cfg.runs-1 {
			if _, _, err := w.b.python("zarr", 0, 1, native, mounted); err != nil {
				return err
			}
		}
		if err := os.RemoveAll(native); err != nil {
			return err
		}
		if err := runCmd("rm", "-r", mounted); err != nil {
			return err
		}
	}
	name := fmt.Sprintf("zarr-python new array, %s, 512 KiB zstd", formatBytes(float64(nbytes)))
	w.b.add(row{name: name + ": acknowledged",
		zarrfs: rate(nbytes, acked.median()), ref: rate(nbytes, nativeTimes.median()),
		ratio: ratio(nativeTimes, acked), atLeast: 0.5, spread: max(nativeTimes.spread(), acked.spread())})
	w.b.add(row{name: name + ": published",
		zarrfs: rate(nbytes, published.median()), ref: rate(nbytes, nativeTimes.median()),
		ratio: ratio(nativeTimes, published), spread: max(nativeTimes.spread(), published.spread())})
	return nil
}

// dirSize is the bytes and count of the chunk files (names not starting
// with a dot) under dir, and the count of all regular files there.
func dirSize(dir string) (chunkBytes int64, chunks, files int, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		files++
		if !strings.HasPrefix(d.Name(), ".") {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			chunkBytes += fi.Size()
			chunks++
		}
		return nil
	})
	return chunkBytes, chunks, files, err
}

// runCmd runs a command, its output in the error.
func runCmd(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
