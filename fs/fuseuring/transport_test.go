package fuseuring

import (
	"bytes"
	"context"
	"errors"
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
