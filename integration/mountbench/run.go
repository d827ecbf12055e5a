package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/integration"
)

// mounts tracks every FUSE mount the harness started, so that each is
// unmounted on every way out: normal return, error, panic and signals.
type mounts struct {
	mu     sync.Mutex
	zarrfs map[string]*integration.Mount // by mount point
	others map[string]*exec.Cmd          // bindfs, rclone, s3fs: by mount point
}

func newMounts() *mounts {
	return &mounts{zarrfs: map[string]*integration.Mount{}, others: map[string]*exec.Cmd{}}
}

// startZarrfs mounts store at dir with the zarrfs binary.
func (ms *mounts) startZarrfs(bin, store, dir string, args ...string) (*integration.Mount, error) {
	m, err := integration.Start(bin, store, dir, args...)
	if err != nil {
		return nil, err
	}
	ms.mu.Lock()
	ms.zarrfs[dir] = m
	ms.mu.Unlock()
	return m, nil
}

// stopZarrfs unmounts the zarrfs mount at dir.
func (ms *mounts) stopZarrfs(dir string) error {
	ms.mu.Lock()
	m := ms.zarrfs[dir]
	delete(ms.zarrfs, dir)
	ms.mu.Unlock()
	if m == nil {
		return nil
	}
	if err := m.Stop(); err != nil {
		m.Kill()
		return err
	}
	return nil
}

// startBindfs mounts a bindfs mirror of src at dir, read-only unless
// writable: the generic FUSE pass-through file system zarrfs is compared
// with.
func (ms *mounts) startBindfs(src, dir string, writable bool) error {
	mode := "ro"
	if writable {
		mode = "rw"
	}
	return ms.startOther(exec.Command("bindfs", "-f", "-o", mode, src, dir), dir, "apt-get install bindfs")
}

// startOther starts cmd, a FUSE file system staying in the foreground, and
// waits until it has mounted dir; install says how to get the program.
func (ms *mounts) startOther(cmd *exec.Cmd, dir, install string) error {
	name := filepath.Base(cmd.Path)
	// Should the harness die without cleaning up, the file system unmounts
	// itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w (%s)", name, err, install)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ms.mu.Lock()
	ms.others[dir] = cmd
	ms.mu.Unlock()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if mounted, _ := zfs.Mounted(dir); mounted {
			return nil
		}
		select {
		case err := <-done:
			return fmt.Errorf("%s exited before mounting: %v: %s", name, err, log.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not mount %s within 30s", name, dir)
}

// stopBindfs unmounts the bindfs mount at dir.
func (ms *mounts) stopBindfs(dir string) { ms.stopOther(dir) }

// stopOther unmounts the file system startOther mounted at dir.
func (ms *mounts) stopOther(dir string) {
	ms.mu.Lock()
	cmd := ms.others[dir]
	delete(ms.others, dir)
	ms.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := syscall.Unmount(dir, 0); err != nil {
		integration.ForceUnmount(dir)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Process.Wait()
}

// stopAll unmounts everything still mounted.
func (ms *mounts) stopAll() {
	ms.mu.Lock()
	var zarrfs, others []string
	for dir := range ms.zarrfs {
		zarrfs = append(zarrfs, dir)
	}
	for dir := range ms.others {
		others = append(others, dir)
	}
	ms.mu.Unlock()
	for _, dir := range zarrfs {
		if err := ms.stopZarrfs(dir); err != nil {
			fmt.Fprintln(os.Stderr, "mountbench:", err)
		}
	}
	for _, dir := range others {
		ms.stopOther(dir)
	}
}

// dropCaches empties the page, dentry and inode caches (root only), so the
// next reads come from the disk.
func dropCaches() error {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
}

// sample is the durations of the measured runs of one case.
type sample []time.Duration

func (s sample) median() time.Duration {
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// spread is the range of the runs relative to their median, a noise gauge.
func (s sample) spread() float64 {
	return float64(slices.Max(s)-slices.Min(s)) / float64(s.median())
}

// interleave runs every case once per round, warmup rounds unmeasured, and
// returns each case's measured durations. Interleaving spreads the noise of
// a busy machine evenly over the cases being compared. Short cases get
// more rounds (up to 4x runs, until the measured rounds took minMeasured),
// so that their medians rest on more samples.
func interleave(warmup, runs int, cases ...func() (time.Duration, error)) ([]sample, error) {
	const minMeasured = 2 * time.Second
	out := make([]sample, len(cases))
	var measured time.Duration
	for round := 0; round < warmup+runs || round < warmup+4*runs && measured < minMeasured; round++ {
		for i, c := range cases {
			d, err := c()
			if err != nil {
				return nil, err
			}
			if round >= warmup {
				out[i] = append(out[i], d)
				measured += d
			}
		}
	}
	return out, nil
}

// timed measures fn.
func timed(fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	return time.Since(start), err
}

// readFile opens, reads to the end and closes a file as cat does, into
// buf, and returns the number of bytes read.
func readFile(path string, buf []byte) (int64, error) {
	fd, err := retry(func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var total int64
	for {
		n, err := retry(func() (int, error) { return unix.Read(fd, buf) })
		if err != nil {
			return total, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return total, nil
		}
		total += int64(n)
	}
}

// retry repeats a system call interrupted by a signal (the Go runtime's
// preemption signals interrupt FUSE requests).
func retry(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// preader reads byte ranges of shard files as a native reader would,
// opening each shard once.
type preader struct {
	fds map[string]int
	buf []byte
}

func newPreader() *preader { return &preader{fds: map[string]int{}, buf: make([]byte, 4<<20)} }

func (p *preader) read(c chunk) error {
	fd, ok := p.fds[c.shard]
	if !ok {
		var err error
		if fd, err = unix.Open(c.shard, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return &os.PathError{Op: "open", Path: c.shard, Err: err}
		}
		p.fds[c.shard] = fd
	}
	if int64(len(p.buf)) < c.n {
		p.buf = make([]byte, c.n)
	}
	n, err := retry(func() (int, error) { return unix.Pread(fd, p.buf[:c.n], c.off) })
	if err == nil && int64(n) != c.n {
		err = fmt.Errorf("short read: %d of %d bytes", n, c.n)
	}
	if err != nil {
		return &os.PathError{Op: "pread", Path: c.shard, Err: err}
	}
	return nil
}

func (p *preader) close() {
	for _, fd := range p.fds {
		unix.Close(fd)
	}
	clear(p.fds)
}

// readDir lists a directory as `ls -f` does (getdents64 into a 32 KiB
// buffer, like glibc's readdir), with stat also lstatting each entry as it
// comes, as `ls -l` does, and returns the number of entries.
func readDir(dir string, stat bool) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 32<<10)
	var names []string
	entries := 0
	for {
		n, err := retry(func() (int, error) { return unix.Getdents(fd, buf) })
		if err != nil {
			return entries, &os.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n == 0 {
			return entries, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names[:0])
		if stat {
			if err := lstatAt(fd, dir, names); err != nil {
				return entries, err
			}
		}
		entries += len(names)
	}
}

// statAll lstats every name relative to dir, as find does.
func statAll(dir string, names []string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return lstatAt(fd, dir, names)
}

// lstatAt lstats every name relative to the open directory fd of dir.
func lstatAt(fd int, dir string, names []string) error {
	var st unix.Stat_t
	for _, name := range names {
		if _, err := retry(func() (int, error) { return 0, unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
			return &os.PathError{Op: "stat", Path: filepath.Join(dir, name), Err: err}
		}
	}
	return nil
}

// peakRSS is the peak resident set size of a process (VmHWM), in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib); err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", rest, err)
			}
			return kib << 10, nil
		}
	}
	return 0, errors.New("no VmHWM in /proc/PID/status")
}

// machine describes where the benchmark ran, for the table's header.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	var u unix.Utsname
	kernel := "unknown kernel"
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Release[:])
	}
	return fmt.Sprintf("GOMAXPROCS=%d, %d CPUs (%s), Linux %s, %s, %s/%s; %s",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), cpu, kernel, runtime.Version(), runtime.GOOS, runtime.GOARCH, cpuIdle())
}

// cpuIdle names the idle driver, and for a VM guest's haltpoll driver its
// polling window: with guest_halt_poll_ns=0 an idle vCPU halts at once, and
// waking it (as every FUSE request and reply does) costs tens of µs.
func cpuIdle() string {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(b))
	}
	driver := read("/sys/devices/system/cpu/cpuidle/current_driver")
	if driver != "haltpoll" {
		return "cpuidle " + driver
	}
	return "cpuidle haltpoll, guest_halt_poll_ns=" + read("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
}

// loadAverage is the 1-minute load average, a gauge of how busy the
// machine was.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
