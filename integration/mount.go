// Package integration runs zarrfs for real: it builds the binary, mounts
// stores with it in a subprocess and points real clients (ls, cat, the
// oracle readers, zarr-python 2.13) at the mount. Its helpers are shared
// by the integration tests and the mount-level benchmark harness.
package integration

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	zfs "github.com/zarrfs/zarrfs/fs"
)

// Build compiles cmd/zarrfs into dir and returns the binary's path; with
// race, under the race detector, whose reports go to the mount's log (see
// RaceReport).
func Build(repoRoot, dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "zarrfs")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/zarrfs")...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// RaceReport returns the first data race the race detector reported in a
// log, "" when there is none.
func RaceReport(log string) string {
	i := strings.Index(log, "WARNING: DATA RACE")
	if i < 0 {
		return ""
	}
	end := strings.Index(log[i:], "==================")
	if end < 0 {
		return log[i:]
	}
	return log[i : i+end]
}

// Mount is a running `zarrfs mount`.
type Mount struct {
	Dir string // the mount point
	cmd *exec.Cmd
	// log is an unlinked file that is zarrfs's stdout and stderr: a line
	// zarrfs logs before it answers a request is there when the request
	// returns (through a pipe, it reached the test only once a goroutine
	// had copied it).
	log  *os.File
	done chan error
}

// TestMountArgsEnv names the environment variable whose words Start adds
// to every mount's arguments, so that the whole test suite can run with a
// lever on (make test-io-uring).
const TestMountArgsEnv = "ZARRFS_TEST_MOUNT_ARGS"

// Start runs `bin mount [args...] store dir` (with the words of
// $ZARRFS_TEST_MOUNT_ARGS first) and waits until the mount is in the mount
// table (or the process dies).
func Start(bin, store, dir string, args ...string) (*Mount, error) {
	log, err := os.CreateTemp("", "zarrfs-mount-log-")
	if err != nil {
		return nil, err
	}
	os.Remove(log.Name())
	m := &Mount{Dir: dir, log: log, done: make(chan error, 1)}
	runtime.AddCleanup(m, func(f *os.File) { f.Close() }, log)
	argv := append(append(append([]string{"mount"}, strings.Fields(os.Getenv(TestMountArgsEnv))...), args...), store, dir)
	m.cmd = exec.Command(bin, argv...)
	m.cmd.Stdout, m.cmd.Stderr = log, log
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { m.done <- m.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if mounted, _ := zfs.Mounted(dir); mounted {
			return m, nil
		}
		select {
		case err := <-m.done:
			m.done <- err
			return nil, fmt.Errorf("zarrfs mount exited before mounting: %v\n%s", err, m.Log())
		case <-time.After(10 * time.Millisecond):
		}
	}
	m.Kill()
	return nil, fmt.Errorf("zarrfs mount did not mount %s within 30s\n%s", dir, m.Log())
}

// Pid is the process id of zarrfs.
func (m *Mount) Pid() int { return m.cmd.Process.Pid }

// Log is what the process printed so far.
func (m *Mount) Log() string {
	b, _ := io.ReadAll(io.NewSectionReader(m.log, 0, math.MaxInt64))
	return string(b)
}

// Stop sends SIGTERM and waits for a clean exit; the mount must be gone.
func (m *Mount) Stop() error { return m.StopWith(syscall.SIGTERM) }

// StopWith sends sig (SIGTERM or SIGINT both unmount) and waits for a clean
// exit; the mount must be gone.
func (m *Mount) StopWith(sig os.Signal) error {
	if err := m.Signal(sig); err != nil {
		return err
	}
	return m.Wait(30 * time.Second)
}

// Signal sends sig to the process, unless it has exited.
func (m *Mount) Signal(sig os.Signal) error {
	if err := m.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Wait waits for the process to exit on its own (after an unmount) and
// checks that it exited 0 and left no mount behind. After timeout it kills
// the process and removes the mount.
func (m *Mount) Wait(timeout time.Duration) error {
	select {
	case err := <-m.done:
		m.done <- err
		if err != nil {
			return fmt.Errorf("zarrfs mount exited with %v\n%s", err, m.Log())
		}
	case <-time.After(timeout):
		m.Kill()
		return fmt.Errorf("zarrfs mount did not exit within %v\n%s", timeout, m.Log())
	}
	if mounted, _ := zfs.Mounted(m.Dir); mounted {
		ForceUnmount(m.Dir)
		return fmt.Errorf("zarrfs mount exited but left %s mounted", m.Dir)
	}
	return nil
}

// Kill sends SIGKILL and removes the dead mount, as cleanup after failures.
func (m *Mount) Kill() {
	m.cmd.Process.Kill()
	select {
	case err := <-m.done:
		m.done <- err
	case <-time.After(10 * time.Second):
	}
	ForceUnmount(m.Dir)
}

// ForceUnmount aborts the FUSE connection of whatever is mounted at dir
// and lazily detaches it.
func ForceUnmount(dir string) {
	if mounted, _ := zfs.Mounted(dir); mounted {
		Abort(dir)
		if syscall.Unmount(dir, syscall.MNT_DETACH) != nil {
			exec.Command("fusermount3", "-uz", dir).Run()
		}
	}
}

// Abort aborts the FUSE connection of the mount at dir, as umount -f does:
// requests pending on it fail, and so does every later one, until it is
// unmounted. That frees processes a killed zarrfs left waiting: a thread of
// zarrfs blocked in the kernel (invalidating a cache entry) keeps the
// connection, and the requests it waits for, alive.
func Abort(dir string) error {
	conn, err := zfs.Connection(dir)
	if err != nil {
		return err
	}
	abort := filepath.Join(fuseConnections, conn, "abort")
	if _, err := os.Stat(abort); errors.Is(err, os.ErrNotExist) {
		// The connections appear only where fusectl is mounted, which
		// systemd does at boot but a bare machine or a container may not:
		// without it a killed zarrfs stuck in the kernel keeps its files
		// (and its journal's lock) open. It is mounted as the system
		// would, and left for the next abort.
		if err := syscall.Mount("fusectl", fuseConnections, "fusectl", 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("mounting fusectl to abort %s: %w", dir, err)
		}
	}
	return os.WriteFile(abort, []byte("1"), 0)
}

const fuseConnections = "/sys/fs/fuse/connections"

// CanMount reports why FUSE mounts cannot run here, or nil.
func CanMount() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("/dev/fuse is missing: %w", err)
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			return errors.New("not root and fusermount3 is missing (apt-get install fuse3)")
		}
	}
	return nil
}
