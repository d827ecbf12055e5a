package fuseuring

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
	if off == 0 { // offset 1 is read at once, as a cached chunk is
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return nil, syscall.EINTR
		}
	}
	return fuse.ReadResultData(make([]byte, min(len(dest), waitingSize))), 0
}

// mountWaiting mounts a tree holding one waitingFile, "wait" (its reads at
// offset 0 wait, those at 1 do not), over
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

// benchTransports are the transports the benchmarks compare.
var benchTransports = []string{"dev-fuse", "io_uring"}

// benchMount mounts the waiting file system (mountWaiting) over transport,
// one of benchTransports, skipping the benchmark where io_uring is not
// served, and returns the path of its file.
func benchMount(b *testing.B, transport string) string {
	if transport == "io_uring" {
		if err := Enable(); err != nil {
			b.Skipf("SKIP: %v", err)
		}
		if err := Available(); err != nil {
			b.Skipf("SKIP: %v", err)
		}
	}
	path, _ := mountWaiting(b, transport == "dev-fuse")
	return path
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
	for _, transport := range benchTransports {
		b.Run(transport, func(b *testing.B) {
			path := benchMount(b, transport)
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
			defer reportSwitches(b)()
			for b.Loop() {
				if err := readAtOnce(path, readers, files); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSerialReads times one reader reading a file over /dev/fuse and
// over io_uring, one READ after another, as cat and zarr-python read: the
// cost of a request's round trip through the transport. Reads at offset 1
// return at once (a cached chunk); "waiting" ones alternate with reads
// that wait 2 ms (a fetch from a store), which is what makes a transport
// move a request's entry or thread about.
//
//	go test -run '^$' -bench SerialReads ./fs/fuseuring/
func BenchmarkSerialReads(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root (mount(2))")
	}
	for _, transport := range benchTransports {
		for _, waiting := range []bool{false, true} {
			name := transport + "/quick"
			if waiting {
				name = transport + "/waiting"
			}
			b.Run(name, func(b *testing.B) {
				path := benchMount(b, transport)
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				buf := make([]byte, waitingSize/2)
				i := 0
				defer reportSwitches(b)()
				for b.Loop() {
					off := int64(1)
					if waiting && i%2 == 0 {
						off = 0
					}
					i++
					if _, err := f.ReadAt(buf, off); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// reportSwitches reports, when the returned function is called, the
// context switches of the process's threads and the CPU time they took
// (the reader's, the transport's and the file system's), an op, since
// reportSwitches was: the wakeups and work a transport costs, which a
// loaded machine times badly but counts as well as an idle one.
func reportSwitches(b *testing.B) func() {
	var before unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &before)
	return func() {
		var after unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &after)
		switches := after.Nvcsw + after.Nivcsw - before.Nvcsw - before.Nivcsw
		b.ReportMetric(float64(switches)/float64(b.N), "switches/op")
		cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
	}
}

// BenchmarkConcurrentQuickReads times 4 readers reading a file at once,
// each one READ after another that the file system answers at once (as
// node's thread pool reads cached chunks): the transport's cost when
// requests overlap but none waits.
//
//	go test -run '^$' -bench ConcurrentQuickReads ./fs/fuseuring/
func BenchmarkConcurrentQuickReads(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root (mount(2))")
	}
	for _, transport := range benchTransports {
		b.Run(transport, func(b *testing.B) {
			path := benchMount(b, transport)
			defer reportSwitches(b)()
			b.SetParallelism(2) // 4 readers on 2 CPUs
			b.RunParallel(func(pb *testing.PB) {
				f, err := os.Open(path)
				if err != nil {
					b.Error(err)
					return
				}
				defer f.Close()
				buf := make([]byte, waitingSize/2)
				for pb.Next() {
					if _, err := f.ReadAt(buf, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
