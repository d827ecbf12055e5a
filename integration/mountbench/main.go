// Command mountbench measures a real zarrfs mount against native access to
// the same data and prints one table of medians, with the ratio to native
// and PASS/MISS against the project's performance targets (`make bench`
// runs it).
//
// It writes its own datasets with the zarr writer (a sharded v3 store of
// 1 GiB logical data, a native v2 copy and a native directory of as many
// files as a 100k-chunk directory), mounts them with the zarrfs binary and
// runs, interleaving zarrfs with its baseline to even out machine noise:
//
//  0. the time of one FUSE request through zarrfs and bindfs, free and
//     pinned to one CPU (what every request of the other workloads costs),
//     as mounted and over io_uring (--fuse-transport io_uring);
//  1. every chunk file read whole through v3/ and v2/ (pass-through and
//     transcoded) vs the same chunks' files of a native v2 copy, with warm
//     caches (read directly) and cold (caches dropped, zarrfs remounted;
//     the copy read through bindfs, a FUSE pass-through); pread of the
//     same ranges of the shard files as information;
//     1b. the same, cold, through v2/ of a store drawn at random at every
//     run (transposed and compressed inner chunks, so every chunk is
//     transcoded) vs bindfs over a converted copy;
//  2. zarr-python 2 reading whole arrays through v2/ vs a native v2 copy,
//     warm and right after mounting;
//  3. the same vs the native copy through bindfs;
//  4. stat of every file and listing of a 100k-chunk directory vs native
//     and (first stat) vs bindfs over the native directory;
//  5. 1% of the chunks at random on a fresh mount vs pread;
//  6. the peak RSS of zarrfs --cache-size 64MiB reading everything;
//  7. writes through a read-write mount of a second store (writes.go):
//     zarr-python 2 writing a 256 MiB array through v2/ vs a native v2
//     copy, and every inner chunk of one shard written one by one through
//     v3/ vs the shard written natively, with and without fsync;
//     writes. legacy writers into a read-write mount (legacy.go): cp -r of a
//     1 GiB native v2 array (64 KiB raw and 512 KiB zstd chunks) into v2/
//     until published vs cp -r and sync to the same disk, and the files
//     the store holds after; zarr-python 2 creating and writing a new
//     256 MiB array through v2/ vs a new native v2 array;
//  8. remote, cold (remote.go): the 256 MiB raw array in a real S3 server
//     (versitygw) behind a proxy adding 20 ms per request, read by
//     zarr-python 2 through MNT/v2 of an s3:// mount and by reading every
//     chunk file in key order, vs zarrita.js reading the same store over
//     HTTP through the same latency; with the requests of each; and by
//     zarr-python through a gs:// mount of a GCS emulator (fake-gcs-server)
//     behind the same latency.
//
// compare. issue 30's table (compare.go): a 256 MiB array of 16 shards of
// 1024 raw 256 KiB inner chunks in S3 behind the same latency, read by
// zarr-python 2, zarrita (also with 16 threads), cat of every file, 200
// random chunks and warm, through zarrfs (/dev/fuse and io_uring), rclone
// mount --vfs-cache-mode full and s3fs, each against zarrita reading the
// bucket directly in the same round, with requests, bytes fetched and the
// mount's peak RSS.
//
// Usage:
//
//	go run ./integration/mountbench [flags]
//
// Flags:
//
//	-quick          small datasets (1/8 of the volume, 10k-chunk directory) and 3 runs
//	-runs N         measured runs per case (default 5, 3 with -quick)
//	-warmup N       unmeasured warm-up rounds before warm measurements (default 1)
//	-bin PATH       zarrfs binary (default: built from this repository)
//	-dir DIR        work directory, kept and reused across runs (default: a temporary one, removed)
//	-only LIST      comma-separated workloads: rtt,read,cold,unseen,python,meta,random,rss,write,writes,remote,compare (default: all)
//	-rows LIST      compare: comma-separated rows: python,zarrita,uv16,cat,random,warm-zarrita,warm-python (default: all; a warm row runs its cold one first)
//	-contenders L   compare: comma-separated mounts: dev,io_uring,rclone,s3fs (default: all)
//	-count-fuse     compare: count the FUSE requests of the zarrfs mounts by opcode, their garbage collections and CPU time (through --metrics-listen)
//	-mount-args S   extra `zarrfs mount` flags, space-separated, for every mount of zarrfs (read mounts always have --ro)
//	-python PATH    Python with zarr-python 2 (default /usr/bin/python3, Debian's python3-zarr)
//	-seed N         seed of the never-seen store (workload unseen), to draw the same one again
//	-out FILE       also write the table to FILE, and draw it as a chart beside it (FILE with .png for its extension)
//
// It needs root (FUSE mounts, dropping the page cache) and bindfs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/integration"
)

type config struct {
	quick     bool
	runs      int
	warmup    int
	bin       string
	dir       string
	only      map[string]bool
	mountArgs []string
	python    string
	seed      uint64          // of the never-seen store; 0: drawn from the time
	out       string          // file of the table; its chart beside it
	rows      map[string]bool // of compare; nil: all
	mounts    map[string]bool // compare's contenders; nil: all
	countFUSE bool            // compare: FUSE requests by opcode
}

var workloads = []string{"rtt", "read", "cold", "unseen", "python", "meta", "random", "rss", "write", "writes", "remote", "compare"}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "mountbench:", err)
		os.Exit(2)
	}
	ms := newMounts()
	// Unmount on signals too; the mount processes share our process group,
	// so a Ctrl-C reaches them as well and they unmount themselves.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "mountbench: %v: unmounting\n", s)
		ms.stopAll()
		os.Exit(1)
	}()
	err = run(cfg, ms, os.Stdout)
	ms.stopAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mountbench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("mountbench", flag.ContinueOnError)
	var cfg config
	var only, mountArgs, rows, mounts string
	fs.BoolVar(&cfg.quick, "quick", false, "small datasets (1/8 of the volume, 10k-chunk directory) and 3 runs")
	fs.IntVar(&cfg.runs, "runs", 0, "measured runs per case (default 5, 3 with -quick)")
	fs.IntVar(&cfg.warmup, "warmup", 1, "unmeasured warm-up rounds before warm measurements")
	fs.StringVar(&cfg.bin, "bin", "", "zarrfs binary (default: built from this repository)")
	fs.StringVar(&cfg.dir, "dir", "", "work directory, kept and reused across runs (default: a temporary one, removed)")
	fs.StringVar(&only, "only", strings.Join(workloads, ","), "comma-separated workloads to run")
	fs.StringVar(&mountArgs, "mount-args", "", "extra `zarrfs mount` flags, space-separated")
	fs.StringVar(&cfg.python, "python", "/usr/bin/python3", "Python with zarr-python 2")
	fs.StringVar(&cfg.out, "out", "", "also write the table to this file, and its chart as a PNG beside it (the file with .png for its extension)")
	fs.StringVar(&rows, "rows", "", "compare: comma-separated rows ("+strings.Join(compareRowKeys[:], ",")+"; default: all)")
	fs.StringVar(&mounts, "contenders", "", "compare: comma-separated mounts ("+strings.Join(compareMounts, ",")+"; default: all)")
	fs.BoolVar(&cfg.countFUSE, "count-fuse", false, "compare: count the FUSE requests of the zarrfs mounts by opcode, their garbage collections and CPU time (through --metrics-listen)")
	fs.Uint64Var(&cfg.seed, "seed", 0, "seed of the never-seen store of workload unseen, to draw one again (default: from the time)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.runs <= 0 {
		cfg.runs = 5
		if cfg.quick {
			cfg.runs = 3
		}
	}
	cfg.only = map[string]bool{}
	for w := range strings.SplitSeq(only, ",") {
		if !slices.Contains(workloads, w) {
			return cfg, fmt.Errorf("-only: unknown workload %q (have %s)", w, strings.Join(workloads, ","))
		}
		cfg.only[w] = true
	}
	var err error
	if cfg.rows, err = choices("-rows", rows, compareRowKeys[:]); err != nil {
		return cfg, err
	}
	if cfg.mounts, err = choices("-contenders", mounts, compareMounts); err != nil {
		return cfg, err
	}
	cfg.mountArgs = strings.Fields(mountArgs)
	return cfg, nil
}

// choices parses the comma-separated list of flag, each one of valid;
// nil when list is empty (all).
func choices(flag, list string, valid []string) (map[string]bool, error) {
	if list == "" {
		return nil, nil
	}
	m := map[string]bool{}
	for c := range strings.SplitSeq(list, ",") {
		if !slices.Contains(valid, c) {
			return nil, fmt.Errorf("%s: unknown %q (have %s)", flag, c, strings.Join(valid, ","))
		}
		m[c] = true
	}
	return m, nil
}

// bench is one run of the harness.
type bench struct {
	cfg       config
	ms        *mounts
	bin       string
	work      string
	storeDir  string // the sharded v3 store
	nativeV2  string // its arrays as native Zarr v2
	servedV2  string // the arrays v2/ transcodes, as it serves them
	nativeDir string // a directory of as many files as the 100k-chunk array has chunks
	mnt       string // the zarrfs mount point
	bindMnt   string // bindfs over nativeV2
	servedMnt string // bindfs over servedV2
	specs     []arraySpec
	chunks    map[string][]chunk // by array
	zarrfs    *integration.Mount
	rows      []row
	stats     []byte // the mount's .zarrfs/stats after the memory workload
}

func run(cfg config, ms *mounts, out io.Writer) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it mounts with FUSE and drops the page cache")
	}
	if err := integration.CanMount(); err != nil {
		return err
	}
	b := &bench{cfg: cfg, ms: ms, specs: arraySpecs(cfg.quick), chunks: map[string][]chunk{}}
	if b.work = cfg.dir; b.work == "" {
		if b.work, err = os.MkdirTemp("", "zarrfs-mountbench-"); err != nil {
			return err
		}
		defer os.RemoveAll(b.work)
	}
	b.storeDir = filepath.Join(b.work, "store")
	b.nativeV2 = filepath.Join(b.work, "native-v2")
	b.nativeDir = filepath.Join(b.work, "native-dir")
	b.mnt = filepath.Join(b.work, "mnt")
	b.bindMnt = filepath.Join(b.work, "bindfs")
	b.servedV2 = filepath.Join(b.work, "served-v2")
	b.servedMnt = filepath.Join(b.work, "bindfs-served")
	for _, d := range []string{b.mnt, b.bindMnt, b.servedMnt} {
		if mounted, _ := zfs.Mounted(d); mounted {
			return fmt.Errorf("%s is still mounted from an earlier run; unmount it first", d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if b.bin = cfg.bin; b.bin == "" {
		progress("building zarrfs")
		root, err := repoRoot()
		if err != nil {
			return err
		}
		if b.bin, err = integration.Build(root, b.work, false); err != nil {
			return err
		}
	}
	loadBefore := loadAverage()
	start := time.Now()
	if err := b.prepare(); err != nil {
		return err
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"rtt", b.roundTrips},
		{"read", func() error { return b.readAll(false) }},
		{"cold", func() error { return b.readAll(true) }},
		{"unseen", b.unseen},
		{"python", b.zarrPythonReads},
		{"meta", b.metadata},
		{"random", b.randomReads},
		{"rss", b.peakMemory},
		{"write", b.writes},
		{"writes", b.legacyWrites},
		{"remote", b.remote},
		{"compare", b.compare},
	}
	// A workload that fails ends the run, but what the others measured
	// is still printed (and written): a run can take an hour.
	var failed error
	for _, s := range steps {
		if !cfg.only[s.name] {
			continue
		}
		t := time.Now()
		if err := s.fn(); err != nil {
			failed = fmt.Errorf("%s: %w", s.name, err)
			b.add(row{name: "workload " + failed.Error(), check: "completes", pass: new(bool)})
			break
		}
		progress(fmt.Sprintf("%s done in %s", s.name, time.Since(t).Round(time.Second)))
	}
	if cfg.out == "" {
		b.print(out, loadBefore, time.Since(start))
		return failed
	}
	f, err := os.Create(cfg.out)
	if err != nil {
		return err
	}
	b.print(io.MultiWriter(out, f), loadBefore, time.Since(start))
	if err := f.Close(); err != nil {
		return err
	}
	if failed != nil {
		return failed
	}
	chart := strings.TrimSuffix(cfg.out, filepath.Ext(cfg.out)) + ".png"
	title := fmt.Sprintf("zarrfs mount benchmark, %s: medians of %d runs; %s", start.Format("2006-01-02"), cfg.runs, machine())
	if err := writeChart(chart, b.rows, title); err != nil {
		return err
	}
	progress("wrote " + cfg.out + " and " + chart)
	return nil
}

// prepare writes the datasets (unless a kept work directory has them),
// mounts the store and lists the chunks.
func (b *bench) prepare() error {
	ctx := context.Background()
	marker := filepath.Join(b.work, "datasets-complete")
	want := fmt.Sprintf("quick=%v served-copy\n", b.cfg.quick)
	if got, err := os.ReadFile(marker); err != nil || string(got) != want {
		progress("writing the datasets")
		for _, d := range []string{b.storeDir, b.nativeV2, b.servedV2, b.nativeDir} {
			if err := os.RemoveAll(d); err != nil {
				return err
			}
		}
		if err := writeStore(ctx, b.storeDir, b.specs); err != nil {
			return err
		}
		if err := b.mount(); err != nil {
			return err
		}
		zarray := func(name string) ([]byte, error) {
			return os.ReadFile(filepath.Join(b.mnt, "v2", name, ".zarray"))
		}
		if err := writeNativeV2(ctx, b.nativeV2, b.specs, zarray); err != nil {
			return err
		}
		if err := writeServedV2(ctx, b.servedV2, b.specs, zarray); err != nil {
			return err
		}
		many := b.specs[len(b.specs)-1]
		if err := writeNativeDir(b.nativeDir, many.shape[0]/many.inner[0], many.inner[0]*many.typ.Size); err != nil {
			return err
		}
		if err := os.WriteFile(marker, []byte(want), 0o644); err != nil {
			return err
		}
	} else if err := b.mount(); err != nil {
		return err
	}
	for _, s := range b.specs {
		if !s.readBench {
			continue
		}
		chunks, err := listChunks(ctx, b.storeDir, s.name)
		if err != nil {
			return err
		}
		b.chunks[s.name] = chunks
	}
	return nil
}

// mount mounts the store read-only at b.mnt.
func (b *bench) mount(args ...string) error {
	argv := append(append([]string{"--ro"}, b.cfg.mountArgs...), args...)
	m, err := b.ms.startZarrfs(b.bin, b.storeDir, b.mnt, argv...)
	if err != nil {
		return err
	}
	b.zarrfs = m
	return nil
}

// remount restarts zarrfs, emptying its caches and the kernel's caches of
// the mount.
// remountDefault remounts zarrfs with the run's mount flags.
func (b *bench) remountDefault() error { return b.remount() }

func (b *bench) remount(args ...string) error {
	if err := b.ms.stopZarrfs(b.mnt); err != nil {
		return err
	}
	return b.mount(args...)
}

// repoRoot finds the module root above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run from the repository or pass -bin")
		}
		dir = parent
	}
}

func progress(msg string) {
	fmt.Fprintf(os.Stderr, "mountbench %s: %s\n", time.Now().Format("15:04:05"), msg)
}

// row is one line of the table.
type row struct {
	section     string // set on section headings only
	name        string
	zarrfs, ref string
	ratio       float64 // baseline time / zarrfs time; 0 when not compared
	spread      float64 // the larger relative range of the runs of the two sides
	// A target: a minimum ratio, a minimum rate, or a custom check.
	atLeast   float64
	minRate   float64
	rateValue float64
	check     string
	pass      *bool
}

func (b *bench) section(title string) { b.rows = append(b.rows, row{section: title}) }
func (b *bench) add(r row)            { b.rows = append(b.rows, r) }

func (r row) result() (target string, pass *bool) {
	switch {
	case r.atLeast > 0:
		ok := r.ratio >= r.atLeast
		return fmt.Sprintf(">= %.2fx", r.atLeast), &ok
	case r.minRate > 0:
		ok := r.rateValue >= r.minRate
		return ">= " + strings.TrimSuffix(formatCount(r.minRate), " ") + "/s", &ok
	}
	return r.check, r.pass
}

func (b *bench) print(w io.Writer, loadBefore string, elapsed time.Duration) {
	fmt.Fprintf(w, "\nzarrfs mount benchmark: medians of %d runs (warm cases after %d warm-up round); ratio = baseline time / zarrfs time\n", b.cfg.runs, b.cfg.warmup)
	fmt.Fprintf(w, "machine: %s; load average %s at start, %s at end; took %s\n", machine(), loadBefore, loadAverage(), elapsed.Round(time.Second))
	// The write workloads mount read-write, every other one read-only.
	args := append([]string{"[--ro]"}, b.cfg.mountArgs...)
	fmt.Fprintf(w, "zarrfs:  %s mount %s STORE MNT (--ro except in workloads write and writes)\n", b.bin, strings.Join(args, " "))
	fmt.Fprintf(w, "store:   %s\n", b.describeStore())
	const format = "%-66s %14s %14s %7s %10s %6s %6s\n"
	fmt.Fprintf(w, "\n"+format, "case", "zarrfs", "baseline", "ratio", "target", "result", "spread")
	passed, missed := 0, 0
	for _, r := range b.rows {
		if r.section != "" {
			fmt.Fprintf(w, "%s\n", r.section)
			continue
		}
		ratio := "-"
		if r.ratio > 0 {
			ratio = fmt.Sprintf("%.2f", r.ratio)
		}
		spread := "-"
		if r.spread > 0 {
			spread = fmt.Sprintf("%.0f%%", 100*r.spread)
		}
		target, pass := r.result()
		result := ""
		if pass != nil {
			if result = "MISS"; *pass {
				result = "PASS"
				passed++
			} else {
				missed++
			}
		}
		fmt.Fprintf(w, format, "  "+r.name, r.zarrfs, r.ref, ratio, target, result, spread)
	}
	fmt.Fprintf(w, "\ntargets: %d PASS, %d MISS (spread: range of the runs relative to the median, a noise gauge)\n", passed, missed)
	if len(b.stats) > 0 {
		fmt.Fprintf(w, "zarrfs .zarrfs/stats after workload 6: %s\n", strings.TrimSpace(string(b.stats)))
	}
}

func (b *bench) describeStore() string {
	var parts []string
	for _, s := range b.specs {
		var codecs []string
		for _, c := range s.codecs {
			codecs = append(codecs, c.Name)
		}
		parts = append(parts, fmt.Sprintf("%s %s %v in %v shards of %v inner chunks (%s, %s)",
			s.name, s.typ, s.shape, s.shard, s.inner, s.innerSize(), strings.Join(codecs, "+")))
	}
	return strings.Join(parts, "; ")
}

// ratio is how many times faster zarrfs was than the baseline.
func ratio(baseline, zarrfs sample) float64 {
	return baseline.median().Seconds() / zarrfs.median().Seconds()
}

func rate(bytes int64, d time.Duration) string {
	return formatBytes(float64(bytes)/d.Seconds()) + "/s"
}

func perSecond(n int, d time.Duration, unit string) string {
	return formatCount(float64(n)/d.Seconds()) + unit + "/s"
}

func formatBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if n == math.Trunc(n) {
		return fmt.Sprintf("%.0f %s", n, units[i])
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

func formatCount(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.2fM ", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fk ", n/1e3)
	}
	return fmt.Sprintf("%.0f ", n)
}
