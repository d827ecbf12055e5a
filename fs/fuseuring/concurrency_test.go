package fuseuring

import (
	"context"
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

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// waitingFile is a file whose reads each wait 2 ms, as a read of a remote
// store does, read directly (a READ for every pread).
type waitingFile struct{ gofs.Inode }

var _ = (gofs.NodeReader)((*waitingFile)(nil))
var _ = (gofs.NodeOpener)((*waitingFile)(nil))
var _ = (gofs.NodeGetattrer)((*waitingFile)(nil))

const waitingSize = 4096

func (f *waitingFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (f *waitingFile) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode, out.Size = fuse.S_IFREG|0o444, waitingSize
	return 0
}

func (f *waitingFile) Read(ctx context.Context, _ gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	select {
	case <-time.After(2 * time.Millisecond):
	case <-ctx.Done():
		return nil, syscall.EINTR
	}
	return fuse.ReadResultData(make([]byte, min(len(dest), waitingSize))), 0
}

// mountWaiting mounts a tree holding one waitingFile, "wait", over
// io_uring, or over /dev/fuse when devFuse, and returns its path and the
// transport (nil over /dev/fuse).
func mountWaiting(tb testing.TB, devFuse bool) (string, *Transport) {
	dir := tb.TempDir()
	root := &gofs.Inode{}
	opts := &gofs.Options{OnAdd: func(ctx context.Context) {
		root.AddChild("wait", root.NewPersistentInode(ctx, &waitingFile{}, gofs.StableAttr{}), false)
	}}
	opts.DirectMount = true
	opts.MaxBackground = 64
	raw := gofs.NewNodeFS(root, opts)
	var server *fuse.Server
	var transport *Transport
	var err error
	if devFuse {
		if server, err = fuse.NewServer(raw, dir, &opts.MountOptions); err == nil {
			go server.Serve()
			err = server.WaitMount()
		}
	} else {
		server, transport, err = Mount(dir, raw, opts.MountOptions)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		server.Unmount()
		if transport != nil {
			transport.Wait()
		}
	})
	return filepath.Join(dir, "wait"), transport
}

// readAtOnce reads the file at path with readers threads on every CPU at
// once, each thread pinned to its CPU while it reads so that the kernel
// puts its READ on that CPU's queue.
func readAtOnce(path string, readers int, files []*os.File) error {
	cpus := runtime.NumCPU()
	errs := make(chan error, readers*cpus)
	var wg sync.WaitGroup
	for r := range readers * cpus {
		wg.Go(func() {
			runtime.LockOSThread()
			var was, set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &was); err != nil {
				errs <- err
				return // the thread ends with its goroutine
			}
			defer func() {
				unix.SchedSetaffinity(0, &was)
				runtime.UnlockOSThread()
			}()
			set.Set(r % cpus)
			unix.SchedSetaffinity(0, &set)
			buf := make([]byte, waitingSize)
			if n, err := files[r].ReadAt(buf, 0); n != waitingSize {
				errs <- fmt.Errorf("read %d bytes of %s: %v", n, path, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// BenchmarkConcurrentWaitingReads times 8 readers on every CPU reading at
// once from a file whose reads wait 2 ms (a remote store's round trip),
// over /dev/fuse and over io_uring: a transport that overlaps requests
// takes about 2 ms an op; one that serves a CPU's burst one after another
// takes a multiple.
//
//	go test -run '^$' -bench ConcurrentWaitingReads ./fs/fuseuring/
func BenchmarkConcurrentWaitingReads(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root (mount(2))")
	}
	for _, transport := range []string{"dev-fuse", "io_uring"} {
		b.Run(transport, func(b *testing.B) {
			if transport == "io_uring" {
				if err := Enable(); err != nil {
					b.Skipf("SKIP: %v", err)
				}
				if err := Available(); err != nil {
					b.Skipf("SKIP: %v", err)
				}
			}
			path, _ := mountWaiting(b, transport == "dev-fuse")
			const readers = 8
			files := make([]*os.File, readers*runtime.NumCPU())
			for i := range files {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				files[i] = f
			}
			b.ResetTimer()
			for b.Loop() {
				if err := readAtOnce(path, readers, files); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestThreadsRunOnAnyCPU serves READs from every CPU and checks that no
// thread of the process is kept to fewer CPUs than it started with: the
// kernel puts a request on the queue of the CPU its requester runs on, a
// CPU busy with that requester, and a queue's threads pinned to it waited
// for it while another CPU idled. It runs in a process of its own: other
// tests leave threads pinned, which Go may lend to the transport.
func TestThreadsRunOnAnyCPU(t *testing.T) {
	enableForTest(t)
	const child = "FUSEURING_TEST_AFFINITY_CHILD"
	if os.Getenv(child) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestThreadsRunOnAnyCPU$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), child+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("in its own process: %v\n%s", err, out)
		}
		t.Logf("in its own process:\n%s", out)
		return
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	if all.Count() < 2 {
		t.Skip("SKIP: this process may run on one CPU only")
	}
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
	if err := readAtOnce(path, readers, files); err != nil {
		t.Fatal(err)
	}
	if transport.Requests() == 0 {
		t.Fatal("no request came over io_uring")
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var pinned []string
	for _, task := range tasks {
		var tid int
		if _, err := fmt.Sscan(task.Name(), &tid); err != nil {
			continue
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue // ended meanwhile
		}
		if set != all {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/comm", tid))
			pinned = append(pinned, fmt.Sprintf("%d (%s): %d of %d CPUs", tid, strings.TrimSpace(string(comm)), set.Count(), all.Count()))
		}
	}
	if len(pinned) > 0 {
		t.Errorf("threads kept to fewer CPUs than the process may use, after serving requests from every CPU:\n%s", strings.Join(pinned, "\n"))
	}
}

// TestIdleThreadsWaitOnTheRing stalls two READs on every queue, so that
// each queue has more than one thread, releases them, and checks that the
// idle threads all wait on their ring: the kernel hands a request to an
// entry on the thread that gave the entry back, and that thread must be
// able to serve it, not only wake a leader (two wakeups a request).
func TestIdleThreadsWaitOnTheRing(t *testing.T) {
	enableForTest(t)
	const stalledPerCPU = 2
	cpus := runtime.NumCPU()
	dir := t.TempDir()
	stuck := newStuckFile()
	stuck.release = make(chan struct{})
	root := &gofs.Inode{}
	opts := &gofs.Options{OnAdd: func(ctx context.Context) {
		root.AddChild("stuck", root.NewPersistentInode(ctx, stuck, gofs.StableAttr{}), false)
	}}
	opts.DirectMount = true
	server, transport, err := Mount(dir, gofs.NewNodeFS(root, opts), opts.MountOptions)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			close(stuck.release)
		}
		if t.Failed() {
			abortConnection(dir)
		}
		server.Unmount()
		transport.Wait()
	})
	var cats []*exec.Cmd
	for cpu := range cpus {
		for range stalledPerCPU {
			cat := exec.Command("taskset", "-c", fmt.Sprint(cpu), "cat", filepath.Join(dir, "stuck"))
			if err := cat.Start(); err != nil {
				t.Fatal(err)
			}
			cats = append(cats, cat)
			t.Cleanup(func() { cat.Process.Kill(); cat.Wait() })
		}
	}
	for n := range len(cats) {
		select {
		case <-stuck.reading:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d stalled READs reached the file system within 30 s", n, len(cats))
		}
	}
	close(stuck.release)
	released = true
	for _, c := range cats {
		if err := c.Wait(); err != nil {
			t.Fatalf("a released reader: %v", err)
		}
	}
	// The threads go back to their rings once their replies are given.
	var onRing int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if onRing = threadsIn(t, unix.SYS_IO_URING_ENTER); onRing >= stalledPerCPU*cpus {
			return
		}
	}
	t.Errorf("%d threads wait on the rings of %d queues, after %d READs at once on each; want every one of the queues' threads (at least %d)",
		onRing, cpus, stalledPerCPU, stalledPerCPU*cpus)
}

// threadsIn returns how many threads of the process are in system call nr.
func threadsIn(t *testing.T, nr int) int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "syscall"))
		if err != nil {
			continue // ended meanwhile
		}
		if f := strings.Fields(string(b)); len(f) > 0 && f[0] == fmt.Sprint(nr) {
			n++
		}
	}
	return n
}
