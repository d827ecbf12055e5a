package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zarrfs/zarrfs/zarr/nd"
)

// readCase is one array read through one view.
type readCase struct {
	spec arraySpec
	view string // "v3" or "v2"
}

func (c readCase) passThrough() bool { return c.view == "v3" || c.spec.passThrough }

func (c readCase) String() string {
	kind := "pass-through"
	if !c.passThrough() {
		kind = "transcoded"
	}
	return fmt.Sprintf("%s/%s (%s, %s)", c.view, c.spec.name, c.spec.innerSize(), kind)
}

func (s arraySpec) innerSize() string { return formatBytes(float64(s.innerBytes())) }

// innerBytes is the decoded size of an inner chunk.
func (s arraySpec) innerBytes() int { return nd.Size(s.inner) * s.typ.Size }

// readCases are the pass-through arrays in both views and the transcoded
// array in the v2 view.
func (b *bench) readCases() []readCase {
	var out []readCase
	for _, s := range b.specs {
		if !s.readBench {
			continue
		}
		if s.passThrough {
			out = append(out, readCase{s, "v3"})
		}
		out = append(out, readCase{s, "v2"})
	}
	return out
}

// path is where a chunk's file is in the mount.
func (c readCase) path(mnt string, ch chunk) string {
	if c.view == "v3" {
		return filepath.Join(mnt, "v3", ch.v3)
	}
	return filepath.Join(mnt, "v2", ch.v2)
}

// readChunkFiles reads the files of chunks through the mount, one after
// the other, and returns the bytes read.
func (b *bench) readChunkFiles(c readCase, chunks []chunk) (int64, error) {
	return readMountFiles(b.mnt, c, chunks)
}

// readMountFiles reads the files of chunks through the mount at mnt.
func readMountFiles(mnt string, c readCase, chunks []chunk) (int64, error) {
	buf := make([]byte, 1<<20)
	var total int64
	for _, ch := range chunks {
		n, err := readFile(c.path(mnt, ch), buf)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// preadChunks is the native baseline: the same byte ranges read from the
// shard files.
func preadChunks(chunks []chunk) error {
	p := newPreader()
	defer p.close()
	for _, ch := range chunks {
		if err := p.read(ch); err != nil {
			return err
		}
	}
	return nil
}

// readNativeFiles reads the chunks' files of the native v2 copy in dir
// as cat does.
func readNativeFiles(dir string, chunks []chunk) (int64, error) {
	buf := make([]byte, 1<<20)
	var total int64
	for _, ch := range chunks {
		n, err := readFile(filepath.Join(dir, ch.v2), buf)
		if err != nil {
			return total, err
		}
		total += int64(n)
	}
	return total, nil
}

func storedBytes(chunks []chunk) (n int64) {
	for _, ch := range chunks {
		n += ch.n
	}
	return n
}

// readAll is workload 1: every chunk file read whole through the mount, in
// key order. Warm: page cache and the mount's caches hold everything
// (after a warm-up round); the baseline is the native v2 copy's files of
// the same chunks, read directly: what reading a file per chunk costs
// without FUSE. Cold: caches dropped and zarrfs remounted before every
// run; the baseline is the same files through bindfs, a FUSE pass-through
// of the converted copy, what a user could mount instead. Both are set
// against pread of the same ranges of the shard files too, as information.
func (b *bench) readAll(cold bool) error {
	state := "warm"
	if cold {
		state = "cold"
		if err := b.ms.startBindfs(b.nativeV2, b.bindMnt, false); err != nil {
			return err
		}
		defer b.ms.stopBindfs(b.bindMnt)
		if err := b.ms.startBindfs(b.servedV2, b.servedMnt, false); err != nil {
			return err
		}
		defer b.ms.stopBindfs(b.servedMnt)
	}
	baseline := map[bool]string{false: "the native v2 copy's files", true: "bindfs over the native v2 copy"}[cold]
	b.section(fmt.Sprintf("1. read every chunk file, %s (open+read+close each, in key order; baseline: %s; pread of the same ranges of the shards as information)", state, baseline))
	for _, c := range b.readCases() {
		chunks := b.chunks[c.spec.name]
		var served, copied int64
		mountRun := func() (time.Duration, error) {
			return timed(func() (err error) {
				served, err = b.readChunkFiles(c, chunks)
				return err
			})
		}
		nativeRun := func() (time.Duration, error) { return timed(func() error { return preadChunks(chunks) }) }
		filesRun := func(dir string) func() (time.Duration, error) {
			return func() (time.Duration, error) {
				return timed(func() (err error) {
					copied, err = readNativeFiles(dir, chunks)
					return err
				})
			}
		}
		var native, mount, files, servedFiles sample
		var servedCopy int64 // bytes of the copy of what the mount serves
		if cold {
			type step struct {
				s       *sample
				remount bool
				run     func() (time.Duration, error)
			}
			steps := []step{{&native, false, nativeRun}, {&files, false, filesRun(b.bindMnt)}, {&mount, true, mountRun}}
			if !c.passThrough() {
				steps = append(steps, step{&servedFiles, false, func() (time.Duration, error) {
					return timed(func() (err error) {
						servedCopy, err = readNativeFiles(b.servedMnt, chunks)
						return err
					})
				}})
			}
			for range b.cfg.runs {
				for _, step := range steps {
					if step.remount {
						if err := b.remount(); err != nil {
							return err
						}
					}
					if err := dropCaches(); err != nil {
						return err
					}
					d, err := step.run()
					if err != nil {
						return err
					}
					*step.s = append(*step.s, d)
				}
			}
		} else {
			s, err := interleave(b.cfg.warmup, b.cfg.runs, nativeRun, mountRun, filesRun(b.nativeV2))
			if err != nil {
				return err
			}
			native, mount, files = s[0], s[1], s[2]
		}
		stored := storedBytes(chunks)
		if c.passThrough() && served != stored {
			return fmt.Errorf("%s: the mount served %d bytes, the shards store %d", c, served, stored)
		}
		target := map[bool]float64{false: 0.95, true: 1.0}[cold]
		b.add(row{
			name:   fmt.Sprintf("%s %s", state, c),
			zarrfs: rate(served, mount.median()), ref: rate(copied, files.median()),
			ratio: ratio(files, mount), atLeast: target, spread: max(files.spread(), mount.spread()),
		})
		if servedFiles != nil {
			if servedCopy != served {
				return fmt.Errorf("%s: the copy of what the mount serves has %d bytes, the mount served %d", c, servedCopy, served)
			}
			b.add(row{
				name:   fmt.Sprintf("floor: bindfs over a copy of the bytes %s serves, vs bindfs over the converted copy", c),
				zarrfs: rate(served, servedFiles.median()), ref: rate(copied, files.median()),
				ratio: ratio(files, servedFiles), spread: max(files.spread(), servedFiles.spread()),
			})
		}
		b.add(row{
			name:   fmt.Sprintf("%s %s vs pread", state, c.spec.name),
			zarrfs: rate(served, mount.median()), ref: rate(stored, native.median()),
			ratio: ratio(native, mount), spread: max(native.spread(), mount.spread()),
		})
	}
	return nil
}

//go:embed zarr_read.py
var zarrReadPy []byte

// pythonRead is one read of a directory by zarr_read.py.
type pythonRead struct {
	Path     string  `json:"path"`
	Seconds  float64 `json:"seconds"`
	NBytes   int64   `json:"nbytes"`
	Checksum uint64  `json:"checksum"`
}

// python runs zarr_read.py in mode for warmup+runs rounds over paths and
// returns the measured durations by path and the bytes each read got. The
// copies must read the same data.
func (b *bench) python(mode string, warmup, runs int, paths ...string) (map[string]sample, int64, error) {
	script := filepath.Join(b.work, "zarr_read.py")
	if err := os.WriteFile(script, zarrReadPy, 0o644); err != nil {
		return nil, 0, err
	}
	args := append([]string{script, mode, strconv.Itoa(warmup + runs)}, paths...)
	cmd := exec.Command(b.cfg.python, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, 0, fmt.Errorf("python %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	times := map[string]sample{}
	checksums := map[uint64]bool{}
	var nbytes int64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for i := 0; sc.Scan(); i++ {
		var r pythonRead
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, 0, fmt.Errorf("python printed %q: %v", sc.Text(), err)
		}
		checksums[r.Checksum], nbytes = true, r.NBytes
		if i/len(paths) >= warmup {
			times[r.Path] = append(times[r.Path], time.Duration(r.Seconds*float64(time.Second)))
		}
	}
	if len(checksums) != 1 {
		return nil, 0, fmt.Errorf("python (%s) read different data from %s", mode, strings.Join(paths, ", "))
	}
	return times, nbytes, nil
}

// zarrPythonReads is workloads 2 and 3: zarr-python 2 reading whole arrays
// through the mount's v2 view, from a native v2 copy on disk, and from the
// native copy through bindfs, interleaved, all caches warm. Then the same
// read right after mounting (kernel caches of the mount cold, shards in
// the page cache), and plain Python reads of the chunk files, which show
// what a buffered open costs on any FUSE mount.
func (b *bench) zarrPythonReads() error {
	b.section("2+3. zarr-python 2.13 reads whole arrays (warm); baselines: a native v2 copy on disk, and the copy through bindfs (FUSE pass-through)")
	if err := b.ms.startBindfs(b.nativeV2, b.bindMnt, false); err != nil {
		return err
	}
	defer b.ms.stopBindfs(b.bindMnt)
	for _, s := range b.specs {
		if !s.readBench {
			continue
		}
		mount := filepath.Join(b.mnt, "v2", s.name)
		native := filepath.Join(b.nativeV2, s.name)
		bind := filepath.Join(b.bindMnt, s.name)
		times, nbytes, err := b.python("zarr", b.cfg.warmup, b.cfg.runs, native, mount, bind)
		if err != nil {
			return err
		}
		kind := "pass-through"
		if !s.passThrough {
			kind = "transcoded"
		}
		name := fmt.Sprintf("v2/%s (%s, %s)", s.name, s.innerSize(), kind)
		// Chunks of 256 KiB and more amortize a FUSE round trip: zarrfs
		// must keep up with the native copy. Smaller ones cost what any
		// FUSE file system costs per file: it must keep up with bindfs.
		large := s.innerBytes() >= 256<<10
		b.add(row{
			name:   "vs native copy " + name,
			zarrfs: rate(nbytes, times[mount].median()), ref: rate(nbytes, times[native].median()),
			ratio: ratio(times[native], times[mount]), atLeast: map[bool]float64{true: 0.9}[large], spread: max(times[native].spread(), times[mount].spread()),
		})
		b.add(row{
			name:   "vs bindfs      " + name,
			zarrfs: rate(nbytes, times[mount].median()), ref: rate(nbytes, times[bind].median()),
			ratio: ratio(times[bind], times[mount]), atLeast: map[bool]float64{false: 1.0}[large], spread: max(times[bind].spread(), times[mount].spread()),
		})
		// What the same read costs through a FUSE pass-through of the
		// native files: the ceiling for reading a file per chunk here.
		b.add(row{
			name:   "bindfs vs native copy " + name,
			zarrfs: rate(nbytes, times[bind].median()), ref: rate(nbytes, times[native].median()),
			ratio: ratio(times[native], times[bind]), spread: max(times[native].spread(), times[bind].spread()),
		})
		// Right after mounting: every lookup and read reaches zarrfs. The
		// baseline is the first read of the native copy by a new process,
		// as the read of the fresh mount is; the warm rounds above as
		// information.
		fresh, firstNative, err := b.freshMountReads(mount, native, false)
		if err != nil {
			return err
		}
		b.add(row{
			name:   "fresh mount    " + name,
			zarrfs: rate(nbytes, fresh.median()), ref: rate(nbytes, firstNative.median()),
			ratio: ratio(firstNative, fresh), atLeast: 0.5, spread: max(firstNative.spread(), fresh.spread()),
		})
		b.add(row{
			name:   "fresh mount vs warm rounds " + name,
			zarrfs: rate(nbytes, fresh.median()), ref: rate(nbytes, times[native].median()),
			ratio: ratio(times[native], fresh), spread: max(times[native].spread(), fresh.spread()),
		})
		if s.name != "raw" {
			continue
		}
		for _, mode := range []string{"files", "files-unbuffered"} {
			times, nbytes, err := b.python(mode, b.cfg.warmup, b.cfg.runs, native, mount)
			if err != nil {
				return err
			}
			open := map[string]string{"files": `open(p, "rb")`, "files-unbuffered": `open(p, "rb", buffering=0)`}[mode]
			b.add(row{
				name:   fmt.Sprintf("%s+read each chunk file v2/%s", open, s.name),
				zarrfs: rate(nbytes, times[mount].median()), ref: rate(nbytes, times[native].median()),
				ratio: ratio(times[native], times[mount]), spread: max(times[native].spread(), times[mount].spread()),
			})
		}
	}
	return nil
}

// metadata is workload 4: stat every chunk file of a 100k-chunk directory
// and list it, against a native directory of as many files.
func (b *bench) metadata() error {
	spec := b.specs[len(b.specs)-1] // "many"
	n := spec.shape[0] / spec.inner[0]
	b.section(fmt.Sprintf("4. metadata of a directory of %d chunk files; baseline: a native directory of %d files, and bindfs over it (ls: getdents; ls -l: getdents+lstat each; stat: lstat each by name)", n, n))
	names := make([]string, n)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	dirs := []struct{ view, dir string }{
		{"v2", filepath.Join(b.mnt, "v2", spec.name)},
		{"v3", filepath.Join(b.mnt, "v3", spec.name, "c")},
	}
	// bindfs over the native directory: what a user could mount instead.
	bindDir := filepath.Join(b.work, "bindfs-dir")
	if err := os.MkdirAll(bindDir, 0o755); err != nil {
		return err
	}
	defer b.ms.stopBindfs(bindDir)
	remountBindfs := func() error {
		b.ms.stopBindfs(bindDir)
		return b.ms.startBindfs(b.nativeDir, bindDir, false)
	}
	for _, d := range dirs {
		// First listing and first stats: kernel caches empty, page cache too.
		var coldLs, coldLsNative, coldLsl, coldLslNative, coldStat, coldStatNative, coldStatBindfs sample
		var entries int
		for range b.cfg.runs {
			for _, step := range []struct {
				s       *sample
				remount func() error
				fn      func() error
			}{
				{&coldLsNative, nil, func() error { _, err := readDir(b.nativeDir, false); return err }},
				{&coldLs, b.remountDefault, func() (err error) { entries, err = readDir(d.dir, false); return err }},
				{&coldLslNative, nil, func() error { _, err := readDir(b.nativeDir, true); return err }},
				{&coldLsl, b.remountDefault, func() error { _, err := readDir(d.dir, true); return err }},
				{&coldStatNative, nil, func() error { return statAll(b.nativeDir, names) }},
				{&coldStatBindfs, remountBindfs, func() error { return statAll(bindDir, names) }},
				{&coldStat, b.remountDefault, func() error { return statAll(d.dir, names) }},
			} {
				if step.remount != nil {
					if err := step.remount(); err != nil {
						return err
					}
				}
				if err := dropCaches(); err != nil {
					return err
				}
				t, err := timed(step.fn)
				if err != nil {
					return err
				}
				*step.s = append(*step.s, t)
			}
		}
		if entries < n {
			return fmt.Errorf("%s lists %d entries, want at least %d", d.dir, entries, n)
		}
		b.add(row{name: fmt.Sprintf("first ls, cold        %s (%d entries)", d.view, entries),
			zarrfs: perSecond(entries, coldLs.median(), "entries"), ref: perSecond(entries, coldLsNative.median(), "entries"),
			ratio: ratio(coldLsNative, coldLs), minRate: 200e3, rateValue: float64(entries) / coldLs.median().Seconds(), spread: coldLs.spread()})
		b.add(row{name: fmt.Sprintf("first ls -l, cold     %s", d.view),
			zarrfs: perSecond(entries, coldLsl.median(), "entries"), ref: perSecond(entries, coldLslNative.median(), "entries"),
			ratio: ratio(coldLslNative, coldLsl), spread: coldLsl.spread()})
		b.add(row{name: fmt.Sprintf("first stat each, cold %s vs bindfs", d.view),
			zarrfs: perSecond(n, coldStat.median(), "stats"), ref: perSecond(n, coldStatBindfs.median(), "stats"),
			ratio: ratio(coldStatBindfs, coldStat), atLeast: 1.0, spread: max(coldStat.spread(), coldStatBindfs.spread())})
		b.add(row{name: fmt.Sprintf("first stat each, cold %s vs native", d.view),
			zarrfs: perSecond(n, coldStat.median(), "stats"), ref: perSecond(n, coldStatNative.median(), "stats"),
			ratio: ratio(coldStatNative, coldStat), spread: coldStat.spread()})
		// Warm: after a listing and a stat of everything.
		if _, err := readDir(d.dir, false); err != nil {
			return err
		}
		s, err := interleave(b.cfg.warmup, b.cfg.runs,
			func() (time.Duration, error) {
				return timed(func() error { _, err := readDir(b.nativeDir, false); return err })
			},
			func() (time.Duration, error) {
				return timed(func() error { _, err := readDir(d.dir, false); return err })
			},
			func() (time.Duration, error) { return timed(func() error { return statAll(b.nativeDir, names) }) },
			func() (time.Duration, error) { return timed(func() error { return statAll(d.dir, names) }) },
		)
		if err != nil {
			return err
		}
		b.add(row{name: fmt.Sprintf("ls again, warm        %s", d.view),
			zarrfs: perSecond(entries, s[1].median(), "entries"), ref: perSecond(entries, s[0].median(), "entries"),
			ratio: ratio(s[0], s[1]), spread: max(s[0].spread(), s[1].spread())})
		b.add(row{name: fmt.Sprintf("stat each, warm       %s", d.view),
			zarrfs: perSecond(n, s[3].median(), "stats"), ref: perSecond(n, s[2].median(), "stats"),
			ratio: ratio(s[2], s[3]), atLeast: 0.6, spread: max(s[2].spread(), s[3].spread())})
	}
	return nil
}

// randomReads is workload 5: 1% of the chunks, picked at random, read
// right after mounting (the shards are in the page cache) against pread
// of the same ranges.
func (b *bench) randomReads() error {
	b.section("5. random 1% of the chunks, fresh mount, shards in the page cache; baseline: pread of the same ranges")
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range b.readCases() {
		if !c.passThrough() {
			continue
		}
		all := b.chunks[c.spec.name]
		picked := make([]chunk, max(1, len(all)/100))
		for i, k := range rng.Perm(len(all))[:len(picked)] {
			picked[i] = all[k]
		}
		var native, mount sample
		for range b.cfg.warmup + b.cfg.runs {
			dn, err := timed(func() error { return preadChunks(picked) })
			if err != nil {
				return err
			}
			if err := b.remount(); err != nil {
				return err
			}
			dm, err := timed(func() error { _, err := b.readChunkFiles(c, picked); return err })
			if err != nil {
				return err
			}
			native, mount = append(native, dn), append(mount, dm)
		}
		native, mount = native[b.cfg.warmup:], mount[b.cfg.warmup:]
		b.add(row{name: fmt.Sprintf("%d chunks of %s", len(picked), c),
			zarrfs: perSecond(len(picked), mount.median(), "files"), ref: perSecond(len(picked), native.median(), "reads"),
			ratio: ratio(native, mount), spread: max(native.spread(), mount.spread())})
	}
	return nil
}

// peakMemory is workload 6: the peak RSS of zarrfs, mounted with a 64 MiB
// cache, while two readers read every chunk file of the read arrays
// through both views, transcoded ones included.
func (b *bench) peakMemory() error {
	const cacheBytes = 64 << 20
	b.section("6. peak RSS of zarrfs --cache-size 64MiB while two readers read every chunk through both views; bound: cache + 64 MiB")
	if err := b.remount("--cache-size", strconv.Itoa(cacheBytes)); err != nil {
		return err
	}
	var logical int64
	for _, s := range b.specs {
		if s.readBench {
			logical += s.elementBytes()
		}
	}
	cases := b.readCases()
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			// The two readers go through the cases in opposite orders.
			for i := range cases {
				c := cases[i]
				if w == 1 {
					c = cases[len(cases)-1-i]
				}
				if _, err := b.readChunkFiles(c, b.chunks[c.spec.name]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	peak, err := peakRSS(b.zarrfs.Pid())
	if err != nil {
		return err
	}
	b.stats, _ = os.ReadFile(filepath.Join(b.mnt, ".zarrfs", "stats"))
	bound := int64(cacheBytes + 64<<20)
	ok := peak <= bound
	b.add(row{name: fmt.Sprintf("VmHWM reading %s of arrays through v3/ and v2/", formatBytes(float64(logical))),
		zarrfs: formatBytes(float64(peak)), ref: "bound " + formatBytes(float64(bound)), pass: &ok, check: "<= bound"})
	// The next workloads mount with the default cache again.
	return b.remount()
}

// freshMountReads times zarr-python reading the array at path (in b.mnt)
// right after remounting, every lookup and read reaching zarrfs; with
// cold, the page cache is dropped too. Each read is a new Python process
// (interpreter start-up not timed). With a native path, every run also
// times a new process's read of it (after the same drop of caches):
// a first read pays for its fresh memory, which this VM backs only when
// first touched (0.3-0.7 s for the 256 MiB array, against 0.27 s once a
// process has the memory), so only a first read is a fair baseline.
func (b *bench) freshMountReads(path, native string, cold bool) (fresh, firstNative sample, err error) {
	read := func(p string, s *sample) error {
		if cold {
			if err := dropCaches(); err != nil {
				return err
			}
		}
		times, _, err := b.python("zarr", 0, 1, p)
		*s = append(*s, times[p]...)
		return err
	}
	for range b.cfg.runs {
		if native != "" {
			if err := read(native, &firstNative); err != nil {
				return nil, nil, err
			}
		}
		if err := b.remount(); err != nil {
			return nil, nil, err
		}
		if err := read(path, &fresh); err != nil {
			return nil, nil, err
		}
	}
	return fresh, firstNative, nil
}
