// Package integration runs zarrfs for real: it builds the binary, mounts
// stores with it in a subprocess and points real clients (ls, cat, the
// oracle readers, zarr-python 2.13) at the mount. Its helpers are shared
// by the integration tests and the mount-level benchmark harness.
package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles cmd/zarrfs into dir and returns the binary's path.
func Build(repoRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "zarrfs")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/zarrfs")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// Mount is a running `zarrfs mount`.
type Mount struct {
	Dir  string // the mount point
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  bytes.Buffer
	done chan error
}

// Start runs `bin mount [args...] store dir` and waits until the mount is
// in the mount table (or the process dies).
func Start(bin, store, dir string, args ...string) (*Mount, error) {
	m := &Mount{Dir: dir, done: make(chan error, 1)}
	argv := append(append([]string{"mount"}, args...), store, dir)
	m.cmd = exec.Command(bin, argv...)
	m.cmd.Stdout = &lockedWriter{m: m}
	m.cmd.Stderr = &lockedWriter{m: m}
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { m.done <- m.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if mounted, _ := IsMounted(dir); mounted {
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

type lockedWriter struct{ m *Mount }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	return w.m.log.Write(p)
}

// Log is what the process printed so far.
func (m *Mount) Log() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.log.String()
}

// Stop sends SIGTERM and waits for a clean exit; the mount must be gone.
func (m *Mount) Stop() error {
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-m.done:
		m.done <- err
		if err != nil {
			return fmt.Errorf("zarrfs mount exited with %v\n%s", err, m.Log())
		}
	case <-time.After(30 * time.Second):
		m.Kill()
		return fmt.Errorf("zarrfs mount did not exit within 30s of SIGTERM\n%s", m.Log())
	}
	if mounted, _ := IsMounted(m.Dir); mounted {
		ForceUnmount(m.Dir)
		return fmt.Errorf("SIGTERM left %s mounted", m.Dir)
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

// ForceUnmount lazily detaches whatever is mounted at dir.
func ForceUnmount(dir string) {
	if mounted, _ := IsMounted(dir); mounted {
		if syscall.Unmount(dir, syscall.MNT_DETACH) != nil {
			exec.Command("fusermount3", "-uz", dir).Run()
		}
	}
}

// IsMounted reports whether dir is a mount point, from /proc/self/mountinfo.
func IsMounted(dir string) (bool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.ReplaceAll(fields[4], `\040`, " ") == abs {
			return true, nil
		}
	}
	return false, sc.Err()
}

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
