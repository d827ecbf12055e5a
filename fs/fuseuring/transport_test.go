package fuseuring

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// enableForTest turns FUSE over io_uring on for the test, or skips it
// saying why it cannot run here.
func enableForTest(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: FUSE over io_uring needs root (the fuse module parameter, mount(2))")
	}
	if err := Enable(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	if err := Available(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
}

// tree is a small go-fuse file system: files of known content and one
// writable file.
type tree struct{ gofs.Inode }

var _ = (gofs.NodeOnAdder)((*tree)(nil))

func fileContent(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("file %d;", i)), 1000*(i+1))
}

func (r *tree) OnAdd(ctx context.Context) {
	for i := range 16 {
		f := &gofs.MemRegularFile{Data: fileContent(i), Attr: fuse.Attr{Mode: 0o444}}
		r.AddChild(fmt.Sprintf("f%d", i), r.NewPersistentInode(ctx, f, gofs.StableAttr{}), false)
	}
	w := &gofs.MemRegularFile{Attr: fuse.Attr{Mode: 0o644}}
	r.AddChild("w", r.NewPersistentInode(ctx, w, gofs.StableAttr{}), false)
}

func TestServesAMount(t *testing.T) {
	enableForTest(t)
	dir := t.TempDir()
	ttl := time.Duration(0) // every access is a request
	opts := &gofs.Options{EntryTimeout: &ttl, AttrTimeout: &ttl, NegativeTimeout: &ttl}
	opts.DirectMount = true
	opts.MaxWrite = 1 << 20
	server, transport, err := Mount(dir, gofs.NewNodeFS(&tree{}, opts), opts.MountOptions)
	if err != nil {
		t.Fatal(err)
	}
	unmounted := false
	t.Cleanup(func() {
		if !unmounted {
			server.Unmount()
		}
	})

	// Readers on threads pinned to every CPU, so that every queue serves.
	var wg sync.WaitGroup
	errs := make(chan error, runtime.NumCPU())
	for cpu := range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var set unix.CPUSet
			set.Set(cpu)
			unix.SchedSetaffinity(0, &set)
			for i := range 16 {
				got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%d", i)))
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, fileContent(i)) {
					errs <- fmt.Errorf("cpu %d: f%d: read %d bytes, not its content", cpu, i, len(got))
					return
				}
			}
			if entries, err := os.ReadDir(dir); err != nil || len(entries) != 17 {
				errs <- fmt.Errorf("cpu %d: listing: %d entries, %v", cpu, len(entries), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// A write of more than one payload, read back.
	data := bytes.Repeat([]byte("0123456789"), 180_000)
	if err := os.WriteFile(filepath.Join(dir, "w"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "w")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("write read back: %d bytes, %v; want %d", len(got), err, len(data))
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing name: %v, want ENOENT", err)
	}
	if n := transport.Requests(); n < 7 {
		t.Errorf("%d requests came over io_uring; want every one of these", n)
	}

	if err := server.Unmount(); err != nil {
		t.Fatal(err)
	}
	unmounted = true
	ended := make(chan struct{})
	go func() {
		transport.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the queues did not end within 10 s of unmounting")
	}
}

// stuckFile is a file whose reads wait until they are interrupted or
// released (for ever when release is nil).
type stuckFile struct {
	gofs.Inode
	reading     chan struct{} // a read began
	interrupted chan struct{} // a read's context was cancelled
	release     chan struct{} // closed: reads return their data
}

func newStuckFile() *stuckFile {
	return &stuckFile{reading: make(chan struct{}, 64), interrupted: make(chan struct{}, 64)}
}

// mountStuck mounts root over io_uring at dir. At cleanup, even on
// failure, it kills the readers in *cats, releases stuck unless *released,
// aborts the connection if the test failed, and unmounts. It returns the
// mount's transport.
func mountStuck(t *testing.T, dir string, root gofs.InodeEmbedder, opts *gofs.Options, stuck *stuckFile, cats *[]*exec.Cmd, released *bool) *Transport {
	t.Helper()
	server, transport, err := Mount(dir, gofs.NewNodeFS(root, opts), opts.MountOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range *cats {
			c.Process.Kill()
		}
		if !*released {
			close(stuck.release)
		}
		if t.Failed() {
			abortConnection(dir)
		}
		server.Unmount()
		transport.Wait()
	})
	return transport
}

// stuckContent is what a released read of a stuckFile returns.
var stuckContent = []byte("released\n")

var _ = (gofs.NodeReader)((*stuckFile)(nil))
var _ = (gofs.NodeOpener)((*stuckFile)(nil))

func (f *stuckFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (f *stuckFile) Read(ctx context.Context, _ gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.reading <- struct{}{}
	select {
	case <-ctx.Done():
		f.interrupted <- struct{}{}
		return nil, syscall.EINTR
	case <-f.release:
		if off >= int64(len(stuckContent)) {
			return fuse.ReadResultData(nil), 0
		}
		return fuse.ReadResultData(stuckContent[off:]), 0
	case <-time.After(time.Minute):
		return fuse.ReadResultData(nil), 0
	}
}

// TestInterruptCancels kills a reader whose READ, served over io_uring,
// waits: the kernel's INTERRUPT (sent over /dev/fuse) cancels the
// request's context, so the reader ends at once instead of sitting in
// uninterruptible sleep until the read returns.
func TestInterruptCancels(t *testing.T) {
	enableForTest(t)
	dir := t.TempDir()
	stuck := newStuckFile()
	root := &gofs.Inode{}
	opts := &gofs.Options{OnAdd: func(ctx context.Context) {
		root.AddChild("stuck", root.NewPersistentInode(ctx, stuck, gofs.StableAttr{}), false)
	}}
	opts.DirectMount = true
	server, transport, err := Mount(dir, gofs.NewNodeFS(root, opts), opts.MountOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			abortConnection(dir) // a reader still stuck would hold the unmount
		}
		server.Unmount()
		transport.Wait()
	})
	cat := exec.Command("cat", filepath.Join(dir, "stuck"))
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cat.Wait() }()
	select {
	case <-stuck.reading:
	case err := <-exited:
		t.Fatalf("cat exited before its read reached the file system: %v", err)
	case <-time.After(30 * time.Second):
		cat.Process.Kill()
		t.Fatal("the read did not reach the file system within 30 s")
	}
	if transport.Requests() == 0 {
		t.Fatal("no request came over io_uring")
	}
	cat.Process.Kill()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a killed reader did not exit within 10 s: its READ was not interrupted")
	}
	select {
	case <-stuck.interrupted:
	case <-time.After(10 * time.Second):
		t.Fatal("the READ's context was not cancelled")
	}
}

// abortConnection aborts the FUSE connection of the mount at dir, failing
// every request pending on it.
func abortConnection(dir string) {
	var st unix.Stat_t
	if unix.Stat(dir, &st) == nil {
		os.WriteFile(fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", unix.Minor(st.Dev)), []byte("1"), 0)
	}
}

// TestWaitingRequestsHoldNoQueue stalls several READs on every queue (cat
// processes pinned to each CPU, reading a file whose reads wait): each
// reaches the file system while the others wait, readers of other files on
// every CPU are served meanwhile, a killed reader's READ is cancelled, and
// the released ones return their data. A queue that served one request at
// a time would hold the second stalled READ of each CPU, and every other
// request from it, until the first ended.
func TestWaitingRequestsHoldNoQueue(t *testing.T) {
	enableForTest(t)
	const stalledPerCPU = 3
	cpus := runtime.NumCPU()
	dir := t.TempDir()
	stuck := newStuckFile()
	stuck.release = make(chan struct{})
	ttl := time.Duration(0) // every access is a request
	opts := &gofs.Options{EntryTimeout: &ttl, AttrTimeout: &ttl, NegativeTimeout: &ttl}
	opts.DirectMount = true
	root := &tree{}
	opts.OnAdd = func(ctx context.Context) {
		root.OnAdd(ctx)
		root.AddChild("stuck", root.NewPersistentInode(ctx, stuck, gofs.StableAttr{}), false)
	}
	var cats []*exec.Cmd
	released := false
	transport := mountStuck(t, dir, root, opts, stuck, &cats, &released)

	type result struct {
		out []byte
		err error
	}
	exited := make(chan result, stalledPerCPU*cpus)
	for cpu := range cpus {
		for range stalledPerCPU {
			cat := exec.Command("taskset", "-c", fmt.Sprint(cpu), "cat", filepath.Join(dir, "stuck"))
			var out bytes.Buffer
			cat.Stdout = &out
			if err := cat.Start(); err != nil {
				t.Fatal(err)
			}
			cats = append(cats, cat)
			go func() {
				err := cat.Wait()
				exited <- result{out.Bytes(), err}
			}()
		}
	}
	deadline := time.After(30 * time.Second)
	for n := range len(cats) {
		select {
		case <-stuck.reading:
		case r := <-exited:
			t.Fatalf("a stalled reader exited before its read reached the file system: %v", r.err)
		case <-deadline:
			t.Fatalf("%d of %d stalled READs reached the file system within 30 s: a waiting request holds its queue", n, len(cats))
		}
	}
	if p := transport.PeakInFlight(); p < stalledPerCPU {
		t.Errorf("at most %d requests were under way at once on a queue; want the %d stalled READs of each CPU", p, stalledPerCPU)
	}

	// Readers of the other files on every CPU while those READs wait.
	served := make(chan error, cpus)
	for cpu := range cpus {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var set unix.CPUSet
			set.Set(cpu)
			unix.SchedSetaffinity(0, &set)
			for i := range 16 {
				got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%d", i)))
				if err == nil && !bytes.Equal(got, fileContent(i)) {
					err = fmt.Errorf("cpu %d: f%d: read %d bytes, not its content", cpu, i, len(got))
				}
				if err != nil {
					served <- err
					return
				}
			}
			served <- nil
		}()
	}
	for range cpus {
		select {
		case err := <-served:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("reading the other files did not end within 30 s of the stalled READs")
		}
	}

	// A killed reader's READ is cancelled; the others still wait.
	cats[0].Process.Kill()
	select {
	case <-stuck.interrupted:
	case <-time.After(10 * time.Second):
		t.Fatal("the killed reader's READ was not cancelled within 10 s")
	}
	if r := <-exited; r.err == nil {
		t.Errorf("the killed reader exited without error, read %q", r.out)
	}

	close(stuck.release)
	released = true
	for range len(cats) - 1 {
		select {
		case r := <-exited:
			if r.err != nil || !bytes.Equal(r.out, stuckContent) {
				t.Errorf("a released reader: read %q, %v; want %q", r.out, r.err, stuckContent)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the released readers did not end within 30 s")
		}
	}
}

// TestBurstOnOneCPUReachesTheFileSystem stalls 16 READs from readers all
// on one CPU (node's 16 threads of UV_THREADPOOL_SIZE=16, as the scheduler
// may place them) on a mount asking for 1 MiB requests, as zarrfs mounts:
// every READ reaches the file system while the others wait, as over
// /dev/fuse. The kernel gives a request only to an entry of its CPU's
// queue, however idle the other queues, so a queue of fewer entries holds
// the rest until a stalled one ends (with entries of 1 MiB, the budget
// gave 11 a queue on 2 CPUs).
func TestBurstOnOneCPUReachesTheFileSystem(t *testing.T) {
	enableForTest(t)
	const burst = 16
	dir := t.TempDir()
	stuck := newStuckFile()
	stuck.release = make(chan struct{})
	root := &gofs.Inode{}
	opts := &gofs.Options{OnAdd: func(ctx context.Context) {
		root.AddChild("stuck", root.NewPersistentInode(ctx, stuck, gofs.StableAttr{}), false)
	}}
	opts.DirectMount = true
	opts.MaxWrite = 1 << 20
	var cats []*exec.Cmd
	released := false
	transport := mountStuck(t, dir, root, opts, stuck, &cats, &released)
	exited := make(chan error, burst)
	for range burst {
		cat := exec.Command("taskset", "-c", "0", "cat", filepath.Join(dir, "stuck"))
		if err := cat.Start(); err != nil {
			t.Fatal(err)
		}
		cats = append(cats, cat)
		go func() { exited <- cat.Wait() }()
	}
	deadline := time.After(30 * time.Second)
	for n := range burst {
		select {
		case <-stuck.reading:
		case err := <-exited:
			t.Fatalf("a stalled reader exited before its read reached the file system: %v", err)
		case <-deadline:
			t.Fatalf("%d of %d READs from one CPU reached the file system within 30 s (queue full %d times): its queue holds the rest", n, burst, transport.QueueFull())
		}
	}
	close(stuck.release)
	released = true
	for range burst {
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("a released reader: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the released readers did not end within 30 s")
		}
	}
}

// slowFile is a file of 1 MiB whose reads each take 100 ms, read directly
// (a READ for every read(2)).
type slowFile struct{ gofs.Inode }

var slowContent = bytes.Repeat([]byte("slow"), 1<<18)

var _ = (gofs.NodeReader)((*slowFile)(nil))
var _ = (gofs.NodeOpener)((*slowFile)(nil))
var _ = (gofs.NodeGetattrer)((*slowFile)(nil))

func (f *slowFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (f *slowFile) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode, out.Size = fuse.S_IFREG|0o444, uint64(len(slowContent))
	return 0
}

func (f *slowFile) Read(ctx context.Context, _ gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	time.Sleep(100 * time.Millisecond)
	end := min(off+int64(len(dest)), int64(len(slowContent)))
	return fuse.ReadResultData(slowContent[min(off, end):end]), 0
}

// TestBuffersWithinBudget reads 1 MiB at once with 32 readers on every CPU
// from a file whose reads are slow, so that every entry of every queue
// holds a 1 MiB reply: what the entries keep in memory stays within
// BufferBytes, at most transportBufferBytes on up to 11 CPUs (64 entries of
// 1 MiB each used to keep 64 MiB; requests are now at most 512 KiB).
func TestBuffersWithinBudget(t *testing.T) {
	enableForTest(t)
	const maxWrite = 1 << 20
	dir := t.TempDir()
	root := &gofs.Inode{}
	opts := &gofs.Options{OnAdd: func(ctx context.Context) {
		root.AddChild("slow", root.NewPersistentInode(ctx, &slowFile{}, gofs.StableAttr{}), false)
	}}
	opts.DirectMount = true
	opts.MaxWrite = maxWrite
	server, transport, err := Mount(dir, gofs.NewNodeFS(root, opts), opts.MountOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Unmount()
		transport.Wait()
	})
	const readersPerCPU = 32
	errs := make(chan error, readersPerCPU*runtime.NumCPU())
	var wg sync.WaitGroup
	for r := range readersPerCPU * runtime.NumCPU() {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var set unix.CPUSet
			set.Set(r % runtime.NumCPU())
			unix.SchedSetaffinity(0, &set)
			f, err := os.Open(filepath.Join(dir, "slow"))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			buf := make([]byte, len(slowContent))
			n, err := f.ReadAt(buf, 0)
			if n != len(slowContent) || !bytes.Equal(buf, slowContent) {
				errs <- fmt.Errorf("read %d bytes (%v), not the file's %d", n, err, len(slowContent))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	resident := 0
	for _, q := range transport.queues {
		for _, e := range q.entries {
			pages := make([]byte, (len(e.mem)+os.Getpagesize()-1)/os.Getpagesize())
			if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&e.mem[0])), uintptr(len(e.mem)), uintptr(unsafe.Pointer(&pages[0]))); errno != 0 {
				t.Fatal(errno)
			}
			for _, p := range pages {
				resident += int(p & 1)
			}
		}
	}
	resident *= os.Getpagesize()
	budget := BufferBytes(maxWrite)
	t.Logf("the entries keep %.1f MiB (budget %.1f MiB, peak %d requests at once on a queue)", float64(resident)/(1<<20), float64(budget)/(1<<20), transport.PeakInFlight())
	if int64(resident) > budget {
		t.Errorf("the entries keep %d bytes, more than BufferBytes %d", resident, budget)
	}
	if cpus, _ := possibleCPUs(); cpus <= 11 && budget > transportBufferBytes {
		t.Errorf("BufferBytes is %d on %d CPUs, more than the budget of %d", budget, cpus, transportBufferBytes)
	}
	if transport.PeakInFlight() < 2 {
		t.Errorf("at most %d request at once on a queue: the burst did not fill the queues", transport.PeakInFlight())
	}
}

// TestEveryEntryWaitsOnItsRing makes concurrent reads wait on every queue,
// then checks that once they are done every entry has a thread blocked on
// its ring: the kernel hands a request to an entry by task work on the
// thread that gave the entry back, so that thread waiting on the ring is
// woken once and serves the request. A transport whose idle threads park
// elsewhere while one waits on the ring pays two wakeups a request.
func TestEveryEntryWaitsOnItsRing(t *testing.T) {
	enableForTest(t)
	path, transport := mountWaiting(t, false)
	const readers = 4
	files := make([]*os.File, readers*runtime.NumCPU())
	for i := range files {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[i] = f
	}
	for range 3 {
		if err := readAtOnce(path, readers, files); err != nil {
			t.Fatal(err)
		}
	}
	if transport.PeakInFlight() < 2 {
		t.Errorf("at most %d request at once on a queue: the reads did not overlap", transport.PeakInFlight())
	}
	entries := 0
	for _, q := range transport.queues {
		entries += len(q.entries)
	}
	waiting := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if waiting = threadsIn(t, unix.SYS_IO_URING_ENTER); waiting >= entries {
			return
		}
	}
	t.Errorf("%d threads wait on a ring, for %d entries", waiting, entries)
}

// threadsIn counts the threads of the process blocked in system call nr.
func threadsIn(t *testing.T, nr int) int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "syscall"))
		if err == nil && strings.HasPrefix(string(b), fmt.Sprint(nr)+" ") {
			n++
		}
	}
	return n
}
