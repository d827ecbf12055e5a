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
