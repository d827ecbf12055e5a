package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/fs/fuseuring"
)

// roundTrips is workload 0: the time of one FUSE request that no kernel
// cache answers (getxattr), through zarrfs and through bindfs, with the
// caller and the file system free to run on any CPU and pinned to one.
// Every other workload pays this once per request the kernel sends, so
// it says how far a ratio is the machine's and how far zarrfs's: a
// virtual machine whose idle CPUs halt takes long to wake the other side
// of a request.
func (b *bench) roundTrips() error {
	b.section("0. one FUSE request (getxattr, which no kernel cache answers); baseline: the same request to bindfs over the native copy")
	spec := b.specs[0]
	chunks := b.chunks[spec.name]
	if len(chunks) == 0 {
		return fmt.Errorf("no chunks of %s", spec.name)
	}
	zarrfsFile := filepath.Join(b.mnt, "v3", chunks[0].v3)
	if err := b.ms.startBindfs(b.nativeV2, b.bindMnt, false); err != nil {
		return err
	}
	defer b.ms.stopBindfs(b.bindMnt)
	bindFile := filepath.Join(b.bindMnt, spec.name, ".zarray")
	const n = 2000
	request := func(path string) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			buf := make([]byte, 64)
			return timed(func() error {
				for range n {
					// bindfs answers ENODATA for the native file: still a
					// request answered by the file system.
					if _, err := unix.Getxattr(path, "user.zarr.offset", buf); err != nil && err != unix.ENODATA {
						return &os.PathError{Op: "getxattr", Path: path, Err: err}
					}
				}
				return nil
			})
		}
	}
	measure := func(transport string) error {
		for _, pinned := range []bool{false, true} {
			var s []sample
			err := func() error {
				if pinned {
					restore, err := pinToOneCPU(b.zarrfs.Pid(), b.ms.others[b.bindMnt].Process.Pid)
					if err != nil {
						return err
					}
					defer restore()
				}
				var err error
				s, err = interleave(b.cfg.warmup, b.cfg.runs, request(zarrfsFile), request(bindFile))
				return err
			}()
			if err != nil {
				return err
			}
			where := "any CPU"
			if pinned {
				where = "pinned to CPU 0"
			}
			perRequest := func(s sample) string { return fmt.Sprintf("%.0f µs", s.median().Seconds()/n*1e6) }
			b.add(row{name: "getxattr round trip, " + transport + ", " + where,
				zarrfs: perRequest(s[0]), ref: perRequest(s[1]), ratio: ratio(s[1], s[0]), spread: max(s[0].spread(), s[1].spread())})
		}
		return nil
	}
	if err := measure("as mounted"); err != nil {
		return err
	}
	// The io_uring transport, the lever that changes the round trip.
	err := fuseuring.Enable()
	if err == nil {
		err = fuseuring.Available()
	}
	if err != nil {
		b.add(row{name: "getxattr round trip over io_uring: " + err.Error()})
		return nil
	}
	if err := b.remount("--fuse-transport", "io_uring"); err != nil {
		return err
	}
	err = measure("over io_uring")
	if remounted := b.remountDefault(); err == nil {
		err = remounted
	}
	return err
}

// pinToOneCPU runs the calling goroutine's thread and every thread of the
// processes pids on CPU 0 until restore is called.
func pinToOneCPU(pids ...int) (restore func(), err error) {
	runtime.LockOSThread()
	var one, all unix.CPUSet
	one.Set(0)
	for c := range runtime.NumCPU() {
		all.Set(c)
	}
	tids := []int{0} // this thread
	for _, pid := range pids {
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			runtime.UnlockOSThread()
			return nil, err
		}
		for _, e := range entries {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				tids = append(tids, tid)
			}
		}
	}
	for _, tid := range tids {
		// A thread that exited meanwhile is no matter.
		if err := unix.SchedSetaffinity(tid, &one); err != nil && err != unix.ESRCH {
			runtime.UnlockOSThread()
			return nil, fmt.Errorf("pinning thread %d: %w", tid, err)
		}
	}
	return func() {
		for _, tid := range tids {
			unix.SchedSetaffinity(tid, &all)
		}
		runtime.UnlockOSThread()
	}, nil
}
