package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
)

// compareCacheBytes is zarrfs's default --cache-size, which the compare
// mounts keep: the RSS bound of issue 30 is it plus 64 MiB.
const compareCacheBytes = 256 << 20

// compareSpec is the array of issue 30's table: 256 MiB of uint16 in 16
// shards holding 1024 uncompressed 256 KiB inner chunks (with -quick, 1/8
// of the volume in as many shards and chunks).
func compareSpec(quick bool) arraySpec {
	s := 1
	if quick {
		s = 2
	}
	return arraySpec{name: "array", typ: dtype.TypeUint16, shape: []int{512 / s, 512 / s, 512 / s},
		shard: []int{128 / s, 256 / s, 256 / s}, inner: []int{32 / s, 64 / s, 64 / s},
		codecs: []meta.Codec{bytesLE}, passThrough: true, readBench: true}
}

// The rows of the table, in the order.
const (
	rowPython = iota
	rowZarrita
	rowZarrita16
	rowCat
	rowRandom
	rowWarmZarrita
	rowWarmPython
	compareRows
)

// compareRowKeys name the rows for -rows.
var compareRowKeys = [compareRows]string{"python", "zarrita", "uv16", "cat", "random", "warm-zarrita", "warm-python"}

// compareMounts name the contenders for -contenders, in their order.
var compareMounts = []string{"dev", "io_uring", "rclone", "s3fs"}

// wantRow reports whether -rows asks for row r, or for the warm row that
// reads what r left in the caches.
func (b *bench) wantRow(r int) bool {
	switch {
	case b.cfg.rows == nil || b.cfg.rows[compareRowKeys[r]]:
		return true
	case r == rowPython:
		return b.cfg.rows[compareRowKeys[rowWarmPython]]
	case r == rowZarrita:
		return b.cfg.rows[compareRowKeys[rowWarmZarrita]]
	}
	return false
}

var compareRowNames = [compareRows]string{
	"zarr-python 2 through v2/, whole array",
	"zarrita through v3/ (or the shards), whole array",
	"same with UV_THREADPOOL_SIZE=16",
	"cat of every file",
	"200 random inner chunks, one after another",
	"warm whole array, zarrita",
	"warm whole array, zarr-python 2",
}

// contender is one way to read the bucket as files.
type contender struct {
	name   string
	zarrfs bool
	mnt    string
	root   string // the store zarrita reads, under mnt
	v2     string // the array's directory for zarr-python 2; "" when it cannot read the store
	cat    string // the directory whose every file cat reads
	start  func() (pid int, err error)
	stop   func() error
	skip   string // why it is not measured

	metrics string // the mount's metrics address (-count-fuse)
}

// cell is what one contender's runs of one row measured.
type cell struct {
	times   sample
	reqs    map[string]int // of the last run
	fetched int64          // of the last run
	rss     int64          // the largest VmHWM of the mount process
	uring   string         // the io_uring counters of the mount's stats after the last run
	daemon  *daemonCounts  // of the last run (-count-fuse)
}

// compare is issue 30's table: every reader of the rows through
// zarrfs (/dev/fuse and io_uring), rclone mount (--vfs-cache-mode full)
// and s3fs mounts of the same bucket in versitygw behind the remote
// latency, each row against zarrita reading the bucket directly in the same
// round; cold rows on a fresh mount with caches dropped.
func (b *bench) compare() error {
	spec := compareSpec(b.cfg.quick)
	shards := nd.Size(nd.Grid(spec.shape, spec.shard))
	b.section(fmt.Sprintf("compare. issue 30: the %s array %v (%d shards, %d inner chunks of %s, uncompressed) in S3 (versitygw), %s added to every request; cold: fresh mount, caches dropped; medians of %d; time / zarrita direct's in the same rounds, lower is better",
		formatBytes(float64(spec.elementBytes())), spec.shape, shards, nd.Size(nd.Grid(spec.shape, spec.inner)), spec.innerSize(), remoteLatency, b.cfg.runs))
	script, srv, stopS3, err := b.startZarritaAndS3("compare-s3")
	if srv == nil {
		return err
	}
	defer stopS3()
	storeDir := filepath.Join(b.work, "compare-store")
	if err := b.writeCompareStore(storeDir, spec); err != nil {
		return err
	}
	chunks, err := listChunks(context.Background(), storeDir, spec.name)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := srv.CreateBucket(ctx, "compare"); err != nil && !strings.Contains(err.Error(), "BucketAlready") {
		return err
	}
	progress("uploading the compare array to S3")
	if err := srv.UploadDir(ctx, storeDir, "compare", "store"); err != nil {
		return err
	}
	// Readers reach the store through the latency, the counter behind it
	// sees what reaches the store.
	s3Count, s3URL, closeS3, err := countedRemote(srv.Endpoint)
	if err != nil {
		return err
	}
	defer closeS3()
	web := httptest.NewServer(http.FileServer(http.Dir(storeDir)))
	defer web.Close()
	webCount, webURL, closeWeb, err := countedRemote(web.URL)
	if err != nil {
		return err
	}
	defer closeWeb()
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	os.Setenv("AWS_ENDPOINT_URL", s3URL)

	// The random picks, the same for every reader.
	rng := rand.New(rand.NewPCG(30, 1))
	var picks [][]int
	for _, k := range rng.Perm(len(chunks))[:min(200, len(chunks))] {
		coords, err := chunkCoords(chunks[k].v3)
		if err != nil {
			return err
		}
		picks = append(picks, coords)
	}
	picksFile := filepath.Join(b.work, "compare-picks.json")
	if data, err := json.Marshal(picks); err != nil {
		return err
	} else if err := os.WriteFile(picksFile, data, 0o644); err != nil {
		return err
	}
	needed := int64(len(picks) * spec.innerBytes())

	contenders, err := b.contenders(s3URL)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range contenders {
			if c.skip == "" {
				c.stop()
			}
		}
	}()
	var cells [compareRows][]*cell
	for r := range cells {
		cells[r] = make([]*cell, len(contenders))
	}
	var direct, directRandom sample
	var directReqs, directRandomReqs map[string]int
	var directChecksum float64
	for round := range b.cfg.runs {
		progress(fmt.Sprintf("compare: round %d of %d", round+1, b.cfg.runs))
		webCount.take()
		d, sum, err := zarrita(script, webURL, spec.name, "")
		if err != nil {
			return err
		}
		direct, directChecksum = append(direct, d), sum
		directReqs, _ = webCount.take()
		if b.wantRow(rowRandom) {
			if d, _, err = zarrita(script, webURL, spec.name, picksFile); err != nil {
				return err
			}
			directRandom = append(directRandom, d)
			directRandomReqs, _ = webCount.take()
		}
		// Every other round in the opposite order, so that no contender
		// always runs right after another.
		order := make([]int, len(contenders))
		for i := range order {
			order[i] = i
		}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			c := &contenders[i]
			if c.skip != "" {
				continue
			}
			// measure mounts c cold (unless warm) and times read, with the
			// requests and bytes that reached the store and the mount's RSS.
			var pid int
			measure := func(r int, warm bool, read func() (time.Duration, error)) error {
				var before daemonCounts
				if !warm {
					if err := c.stop(); err != nil {
						return err
					}
					if err := dropCaches(); err != nil {
						return err
					}
					s3Count.take()
					if pid, err = c.start(); err != nil {
						return fmt.Errorf("%s: %w", c.name, err)
					}
				} else {
					s3Count.take()
				}
				if c.metrics != "" {
					if before, err = scrapeDaemon(c.metrics); err != nil {
						return err
					}
				}
				d, err := read()
				if err != nil {
					return fmt.Errorf("%s, %s: %w", c.name, compareRowNames[r], err)
				}
				if cells[r][i] == nil {
					cells[r][i] = &cell{}
				}
				x := cells[r][i]
				x.times = append(x.times, d)
				x.reqs, x.fetched = s3Count.take()
				if rss, err := peakRSS(pid); err == nil {
					x.rss = max(x.rss, rss)
				}
				if c.zarrfs {
					x.uring = uringStats(c.mnt)
				}
				if c.metrics != "" {
					after, err := scrapeDaemon(c.metrics)
					if err != nil {
						return err
					}
					after.minus(before)
					x.daemon = &after
				}
				return nil
			}
			zarritaWhole := func(env ...string) func() (time.Duration, error) {
				return func() (time.Duration, error) {
					d, sum, err := zarrita(script, c.root, spec.name, "", env...)
					if err == nil && sum != directChecksum {
						err = fmt.Errorf("zarrita read checksum %v, direct %v", sum, directChecksum)
					}
					return d, err
				}
			}
			if c.v2 != "" {
				python := func() (time.Duration, error) {
					t, _, err := b.python("zarr", 0, 1, c.v2)
					return t[c.v2].median(), err
				}
				for _, r := range []int{rowPython, rowWarmPython} {
					if b.wantRow(r) {
						if err := measure(r, r == rowWarmPython, python); err != nil {
							return err
						}
					}
				}
			}
			steps := []struct {
				row  int
				warm bool
				read func() (time.Duration, error)
			}{
				{rowZarrita, false, zarritaWhole()},
				{rowWarmZarrita, true, zarritaWhole()},
				{rowZarrita16, false, zarritaWhole("UV_THREADPOOL_SIZE=16")},
				{rowCat, false, func() (time.Duration, error) { return timed(func() error { return catAll(c.cat) }) }},
				{rowRandom, false, func() (time.Duration, error) {
					d, _, err := zarrita(script, c.root, spec.name, picksFile)
					return d, err
				}},
			}
			for _, s := range steps {
				if !b.wantRow(s.row) {
					continue
				}
				if err := measure(s.row, s.warm, s.read); err != nil {
					return err
				}
			}
			if err := c.stop(); err != nil {
				return err
			}
		}
	}
	b.compareTable(contenders, cells, direct, directRandom, directReqs, directRandomReqs, needed, shards)
	return nil
}

// contenders are the mounts of the bucket compare at s3URL, those not
// installed marked skipped.
func (b *bench) contenders(s3URL string) ([]contender, error) {
	zarrfs := func(name string, args ...string) contender {
		mnt := filepath.Join(b.work, "compare-"+strings.ReplaceAll(name, " ", "-"))
		args = append(append([]string{"--ro", "--s3-path-style"}, args...), b.cfg.mountArgs...)
		var metrics string
		if b.cfg.countFUSE {
			metrics = freeAddr()
			args = append(args, "--metrics-listen", metrics)
		}
		return contender{metrics: metrics,
			name: "zarrfs " + name, zarrfs: true, mnt: mnt,
			root: filepath.Join(mnt, "v3"), v2: filepath.Join(mnt, "v2", "array"), cat: filepath.Join(mnt, "v3", "array"),
			start: func() (int, error) {
				m, err := b.ms.startZarrfs(b.bin, "s3://compare/store", mnt, args...)
				if err != nil {
					return 0, err
				}
				return m.Pid(), nil
			},
			stop: func() error { return b.ms.stopZarrfs(mnt) },
		}
	}
	other := func(name, program, install string, cmd func(mnt string) *exec.Cmd, before func() error) contender {
		mnt := filepath.Join(b.work, "compare-"+program)
		c := contender{
			name: name, mnt: mnt, root: filepath.Join(mnt, "store"), cat: filepath.Join(mnt, "store", "array"),
			start: func() (int, error) {
				if err := before(); err != nil {
					return 0, err
				}
				x := cmd(mnt)
				if err := b.ms.startOther(x, mnt, install); err != nil {
					return 0, err
				}
				return x.Process.Pid, nil
			},
			stop: func() error { b.ms.stopOther(mnt); return nil },
		}
		if _, err := exec.LookPath(program); err != nil {
			c.skip = fmt.Sprintf("%s is not installed (%s; make bench-deps)", program, install)
		}
		return c
	}
	rcloneCache := filepath.Join(b.work, "compare-rclone-cache")
	passwd := filepath.Join(b.work, "compare-s3fs-passwd")
	if err := os.WriteFile(passwd, []byte(s3test.AccessKey+":"+s3test.SecretKey+"\n"), 0o600); err != nil {
		return nil, err
	}
	cs := []contender{
		zarrfs("/dev/fuse"),
		zarrfs("io_uring", "--fuse-transport", "io_uring"),
		other("rclone mount, vfs cache full", "rclone", "apt-get install rclone", func(mnt string) *exec.Cmd {
			cmd := exec.Command("rclone", "mount", "bench:compare", mnt, "--read-only", "--vfs-cache-mode", "full", "--cache-dir", rcloneCache)
			// rclone's S3 client cannot take a CA bundle (AWS_CA_BUNDLE, which
			// plain HTTP does not need anyway).
			cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "AWS_CA_BUNDLE=") }),
				"RCLONE_CONFIG_BENCH_TYPE=s3", "RCLONE_CONFIG_BENCH_PROVIDER=Other", "RCLONE_CONFIG_BENCH_ENDPOINT="+s3URL,
				"RCLONE_CONFIG_BENCH_ACCESS_KEY_ID="+s3test.AccessKey, "RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY="+s3test.SecretKey,
				"RCLONE_CONFIG_BENCH_REGION=us-east-1", "RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE=true")
			return cmd
		}, func() error { return os.RemoveAll(rcloneCache) }),
		other("s3fs", "s3fs", "apt-get install s3fs", func(mnt string) *exec.Cmd {
			return exec.Command("s3fs", "compare", mnt, "-f", "-o", "ro", "-o", "url="+s3URL, "-o", "use_path_request_style",
				"-o", "passwd_file="+passwd, "-o", "endpoint=us-east-1")
		}, func() error { return nil }),
	}
	for i := range cs {
		if b.cfg.mounts != nil && !b.cfg.mounts[compareMounts[i]] {
			cs[i].skip = "not in -contenders"
		}
		if err := os.MkdirAll(cs[i].mnt, 0o755); err != nil {
			return nil, err
		}
	}
	// io_uring needs the kernel's FUSE over io_uring: try it once.
	if cs[1].skip == "" {
		if _, err := cs[1].start(); err != nil {
			cs[1].skip = "cannot mount over io_uring here: " + strings.TrimSpace(err.Error())
		} else if err := cs[1].stop(); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// compareTable adds the table and its checks to the bench's rows.
func (b *bench) compareTable(cs []contender, cells [compareRows][]*cell, direct, directRandom sample, directReqs, directRandomReqs map[string]int, needed int64, shards int) {
	relative := func(r, i int) (float64, bool) {
		x := cells[r][i]
		if x == nil {
			return 0, false
		}
		base := direct
		if r == rowRandom {
			base = directRandom
		}
		return x.times.median().Seconds() / base.median().Seconds(), true
	}
	header := fmt.Sprintf("%-50s", "reader")
	for _, c := range cs {
		header += fmt.Sprintf(" | %-28s", c.name)
	}
	b.add(row{name: header})
	for r := range compareRows {
		line := fmt.Sprintf("%-50s", compareRowNames[r])
		for i, c := range cs {
			text := "cannot"
			if c.skip != "" {
				text = "skipped"
			} else if v, ok := relative(r, i); ok {
				text = fmt.Sprintf("%.2f", v)
			}
			line += fmt.Sprintf(" | %-28s", text)
		}
		b.add(row{name: line})
	}
	line := fmt.Sprintf("zarrita direct over HTTP: whole array %s, %d requests %v", direct.median().Round(time.Millisecond), total(directReqs), directReqs)
	if len(directRandom) > 0 {
		line += fmt.Sprintf("; random chunks %s, %v", directRandom.median().Round(time.Millisecond), directRandomReqs)
	}
	b.add(row{name: line, check: "-"})
	for _, c := range cs {
		if c.skip != "" {
			b.add(row{name: c.name + " skipped: " + c.skip, check: "-"})
		}
	}

	check := func(name string, ok bool, misses []string) {
		if len(misses) > 0 {
			name += ": " + strings.Join(misses, "; ")
		}
		b.add(row{name: name, check: "issue 30", pass: &ok})
	}
	var devFuse, uring = 0, 1
	for i, c := range cs {
		if !c.zarrfs || c.skip != "" {
			continue
		}
		var slow, rss, index, fetched []string
		for r := range compareRows {
			x := cells[r][i]
			if x == nil {
				continue
			}
			if v, _ := relative(r, i); v > 1.0 && r != rowZarrita16 {
				slow = append(slow, fmt.Sprintf("%s %.2f", compareRowNames[r], v))
			}
			if x.rss > compareCacheBytes+64<<20 {
				rss = append(rss, fmt.Sprintf("%s %s", compareRowNames[r], formatBytes(float64(x.rss))))
			}
			if r <= rowCat && x.reqs["suffix GET"] > shards {
				index = append(index, fmt.Sprintf("%s %d suffix GETs (%d of them 304), %d LISTs", compareRowNames[r], x.reqs["suffix GET"], x.reqs["304"], x.reqs["LIST"]))
			}
		}
		if x := cells[rowRandom][i]; x != nil && x.fetched > 2*needed {
			fetched = append(fetched, fmt.Sprintf("fetched %s for %s needed (%.2fx)", formatBytes(float64(x.fetched)), formatBytes(float64(needed)), float64(x.fetched)/float64(needed)))
		}
		check(c.name+": every cell <= 1.0 (default thread pool)", len(slow) == 0, slow)
		check(c.name+": 200 random chunks fetch <= 2x the bytes they need", len(fetched) == 0, fetched)
		check(fmt.Sprintf("%s: a whole-array read makes one index request per shard (%d)", c.name, shards), len(index) == 0, index)
		check(fmt.Sprintf("%s: peak RSS <= --cache-size + 64 MiB (%s) in every row", c.name, formatBytes(compareCacheBytes+64<<20)), len(rss) == 0, rss)
		for j, o := range cs {
			if o.zarrfs || o.skip != "" {
				continue
			}
			var behind []string
			for r := range compareRows {
				mine, ok1 := relative(r, i)
				theirs, ok2 := relative(r, j)
				if ok1 && ok2 && mine >= theirs {
					behind = append(behind, fmt.Sprintf("%s %.2f vs %.2f", compareRowNames[r], mine, theirs))
				}
			}
			check(c.name+" ahead of "+o.name+" in every row", len(behind) == 0, behind)
		}
	}
	if cs[devFuse].skip == "" && cs[uring].skip == "" {
		var slower []string
		for r := range compareRows {
			u, ok1 := relative(r, uring)
			d, ok2 := relative(r, devFuse)
			if ok1 && ok2 && u > d {
				slower = append(slower, fmt.Sprintf("%s %.2f vs %.2f", compareRowNames[r], u, d))
			}
		}
		check("io_uring <= /dev/fuse in every row", len(slower) == 0, slower)
	}
	for r := range compareRows {
		for i, c := range cs {
			x := cells[r][i]
			if x == nil {
				continue
			}
			runs := make([]string, len(x.times))
			for k, d := range x.times {
				runs[k] = d.Round(time.Millisecond).String()
			}
			var fuse string
			if d := x.daemon; d != nil {
				fuse = fmt.Sprintf("; FUSE requests %d %v; %d GCs, %.2fs daemon CPU", total(d.fuse), d.fuse, d.gcs, d.cpu)
			}
			b.add(row{name: fmt.Sprintf("%s, %s: median %s (runs %s); last run %d requests %v, fetched %s; VmHWM %s%s%s",
				compareRowNames[r], c.name, x.times.median().Round(time.Millisecond), strings.Join(runs, " "), total(x.reqs), x.reqs,
				formatBytes(float64(x.fetched)), formatBytes(float64(x.rss)), x.uring, fuse), check: "-"})
		}
	}
}

// uringStats returns the io_uring counters of the stats of the zarrfs
// mount at mnt, or "" over /dev/fuse.
func uringStats(mnt string) string {
	data, err := os.ReadFile(filepath.Join(mnt, ".zarrfs", "stats"))
	if err != nil {
		return ""
	}
	var s map[string]any
	if json.Unmarshal(data, &s) != nil {
		return ""
	}
	var out string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if strings.HasPrefix(k, "uring_") {
			out += fmt.Sprintf(" %s=%v", k, s[k])
		}
	}
	if out != "" {
		out = ";" + out
	}
	return out
}

// freeAddr returns a loopback address with a port free now.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}

// daemonCounts are counters of a zarrfs mount's process: the FUSE
// requests it answered by opcode, its garbage collections and its CPU
// time in seconds. Not its wall time, these hold on a loaded machine.
type daemonCounts struct {
	fuse map[string]int
	gcs  int
	cpu  float64
}

// minus leaves in d what it counted since earlier.
func (d *daemonCounts) minus(earlier daemonCounts) {
	for op, n := range earlier.fuse {
		d.fuse[op] -= n
	}
	d.gcs -= earlier.gcs
	d.cpu -= earlier.cpu
}

// scrapeDaemon returns the counters of a zarrfs mount from its metrics at
// addr.
func scrapeDaemon(addr string) (daemonCounts, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return daemonCounts{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return daemonCounts{}, err
	}
	const prefix = `zarrfs_fuse_request_duration_seconds_count{op="`
	d := daemonCounts{fuse: map[string]int{}}
	for line := range strings.Lines(string(body)) {
		var v float64
		if n, ok := strings.CutPrefix(line, "go_gc_duration_seconds_count "); ok {
			fmt.Sscan(n, &v)
			d.gcs = int(v)
		}
		if n, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			fmt.Sscan(n, &d.cpu)
		}
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		op, n, _ := strings.Cut(rest, `"} `)
		fmt.Sscan(n, &v)
		d.fuse[op] = int(v)
	}
	return d, nil
}

// writeCompareStore writes the store of the compare array into dir, unless
// a kept work directory has it.
func (b *bench) writeCompareStore(dir string, spec arraySpec) error {
	marker := filepath.Join(b.work, "compare-store-complete")
	want := fmt.Sprintf("%v %v %v\n", spec.shape, spec.shard, spec.inner)
	if got, err := os.ReadFile(marker); err == nil && string(got) == want {
		return nil
	}
	progress("writing the compare store")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := writeStore(context.Background(), dir, []arraySpec{spec}); err != nil {
		return err
	}
	return os.WriteFile(marker, []byte(want), 0o644)
}

// chunkCoords parses the grid coordinates of a chunk from its v3 key.
func chunkCoords(key string) ([]int, error) {
	_, rest, ok := strings.Cut(key, "/c/")
	if !ok {
		return nil, fmt.Errorf("chunk key %q has no /c/", key)
	}
	var coords []int
	for p := range strings.SplitSeq(rest, "/") {
		var n int
		if _, err := fmt.Sscan(p, &n); err != nil {
			return nil, fmt.Errorf("chunk key %q: %w", key, err)
		}
		coords = append(coords, n)
	}
	return coords, nil
}

// catAll reads every file under dir, in the order of their names, as cat
// of each would.
func catAll(dir string) error {
	buf := make([]byte, 1<<20)
	return filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		_, err = readFile(p, buf)
		return err
	})
}

// zarrita times zarrita_read.mjs (script) reading the array at path of the
// store at where (a URL or a directory), whole or the chunks listed in
// picks, with env added to its environment; it returns the time and the
// checksum of what it read.
func zarrita(script, where, path, picks string, env ...string) (time.Duration, float64, error) {
	args := []string{script, where, path}
	if picks != "" {
		args = append(args, picks)
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("zarrita read of %s: %v\n%s", where, err, out)
	}
	var r struct{ Seconds, Checksum float64 }
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, 0, fmt.Errorf("zarrita printed %q: %v", out, err)
	}
	return time.Duration(r.Seconds * float64(time.Second)), r.Checksum, nil
}

// counter is a reverse proxy counting the requests it passes, by kind,
// and the bytes of their responses' bodies.
type counter struct {
	mu     sync.Mutex
	counts map[string]int
	bytes  int64
}

// take returns the counts and bytes since the last take.
func (c *counter) take() (map[string]int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts, n := c.counts, c.bytes
	c.counts, c.bytes = map[string]int{}, 0
	return counts, n
}

type countedBody struct {
	io.ReadCloser
	c *counter
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.mu.Lock()
	b.c.bytes += int64(n)
	b.c.mu.Unlock()
	return n, err
}

// countedRemote puts target behind a counter and that behind the remote
// latency: readers use the returned URL, the counter sees what reaches
// target.
func countedRemote(target string) (*counter, string, func(), error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, "", nil, err
	}
	c := &counter{counts: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
	rp.ModifyResponse = func(r *http.Response) error {
		if r.StatusCode == http.StatusNotModified {
			c.mu.Lock()
			c.counts["304"]++ // an index revalidated: also a suffix GET
			c.mu.Unlock()
		}
		r.Body = countedBody{r.Body, c}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.counts[requests.Kind(r)]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	delay, err := newDelayProxy(srv.URL)
	if err != nil {
		srv.Close()
		return nil, "", nil, err
	}
	return c, delay.srv.URL, func() { delay.srv.Close(); srv.Close() }, nil
}
