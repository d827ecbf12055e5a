package integration_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// smallStore writes a small v2 store and returns its directory.
func smallStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	zarrtest.WriteV2Store(t, dir)
	return dir
}

// TestStop unmounts with SIGTERM, SIGINT and `zarrfs umount`: each time
// the mount must be gone and the process must exit 0.
func TestStop(t *testing.T) {
	dir := smallStore(t)
	stops := []struct {
		name string
		stop func(*integration.Mount) error
	}{
		{"SIGTERM", func(m *integration.Mount) error { return m.StopWith(syscall.SIGTERM) }},
		{"SIGINT", func(m *integration.Mount) error { return m.StopWith(syscall.SIGINT) }},
		{"umount", func(m *integration.Mount) error {
			if out, err := exec.Command(zarrfsBin, "umount", m.Dir).CombinedOutput(); err != nil {
				return fmt.Errorf("zarrfs umount: %v: %s", err, out)
			}
			return m.Wait(30 * time.Second)
		}},
	}
	for _, s := range stops {
		t.Run(s.name, func(t *testing.T) {
			m := mount(t, dir, "--ro")
			readAll(t, m.Dir)
			if err := s.stop(m); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStopBusy signals a mount while a file and a directory in it are
// open: the mount keeps serving (and says so) instead of detaching, so new
// paths still lead into it; a second signal detaches it, the open file
// still reads, and the process exits 0 when the last open file is closed.
// Closing the files instead unmounts it without a second signal.
func TestStopBusy(t *testing.T) {
	dir := smallStore(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			m := mount(t, dir, "--ro")
			f, d := openBusy(t, m)
			if err := m.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitLog(t, m, "mount point busy: serving")
			if _, err := os.Stat(filepath.Join(m.Dir, "v3", "zarr.json")); err != nil {
				t.Errorf("after %v of a busy mount, a new lookup: %v; want it served", sig, err)
			}
			if mounted, _ := zfs.Mounted(m.Dir); !mounted {
				t.Fatalf("%v detached the busy mount", sig)
			}
			if err := m.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitUnmounted(t, m)
			if _, err := f.ReadAt(make([]byte, 1), 0); err != nil {
				t.Errorf("a file open at the second %v stopped working: %v", sig, err)
			}
			f.Close()
			d.Close()
			if err := m.Wait(30 * time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("closed", func(t *testing.T) {
		m := mount(t, dir, "--ro")
		f, d := openBusy(t, m)
		if err := m.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitLog(t, m, "mount point busy: serving")
		f.Close()
		d.Close()
		if err := m.Wait(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("umount", func(t *testing.T) {
		m := mount(t, dir, "--ro")
		f, d := openBusy(t, m)
		defer f.Close()
		defer d.Close()
		out, err := exec.Command(zarrfsBin, "umount", m.Dir).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "busy") {
			t.Errorf("zarrfs umount of a busy mount: %v, printed %q; want a failure saying it is busy", err, out)
		}
		if _, err := f.ReadAt(make([]byte, 1), 0); err != nil {
			t.Errorf("the mount stopped working after a refused umount: %v", err)
		}
		out, err = exec.Command(zarrfsBin, "umount", "--force", m.Dir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "detached") {
			t.Errorf("zarrfs umount --force of a busy mount: %v, printed %q; want it detached", err, out)
		}
		waitUnmounted(t, m)
		if _, err := f.ReadAt(make([]byte, 1), 0); err != nil {
			t.Errorf("a file open at umount --force stopped working: %v", err)
		}
	})
}

// waitLog waits (10 s at most) until the mount's log says what.
func waitLog(t *testing.T, m *integration.Mount, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(m.Log(), what); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not say %q within 10s:\n%s", what, m.Log())
		}
	}
}

// waitUnmounted waits (10 s at most) until the mount left the mount table.
func waitUnmounted(t *testing.T, m *integration.Mount) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for mounted := true; mounted; mounted, _ = zfs.Mounted(m.Dir) {
		if time.Now().After(deadline) {
			t.Fatalf("still mounted after 10s\n%s", m.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openBusy opens a file and a directory of the mount.
func openBusy(t *testing.T, m *integration.Mount) (*os.File, *os.File) {
	t.Helper()
	f, err := os.Open(filepath.Join(m.Dir, "v2", "u1_raw", "1"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(filepath.Join(m.Dir, "v3"))
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	return f, d
}

// readAll reads every file below dir, so the mount has served requests
// before it is stopped.
func readAll(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			_, err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUmountNotMounted: `zarrfs umount` of a directory nothing is mounted
// on fails with a clear message.
func TestUmountNotMounted(t *testing.T) {
	out, err := exec.Command(zarrfsBin, "umount", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is not a mount point") {
		t.Errorf("zarrfs umount of a plain directory: %v, printed %q; want a failure saying it is not a mount point", err, out)
	}
}

// TestMountErrors: a mount point that is missing, not a directory, not
// empty or already mounted on, and a store that is missing or holds no
// Zarr data, each make `zarrfs mount` fail at once with a clear message and
// exit status 1, without mounting anything.
func TestMountErrors(t *testing.T) {
	store := smallStore(t)
	busy := mount(t, store, "--ro")
	tmp := t.TempDir()
	notEmpty := filepath.Join(tmp, "not-empty")
	file := filepath.Join(tmp, "file")
	for _, err := range []error{os.Mkdir(notEmpty, 0o755), os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644), os.WriteFile(file, nil, 0o644)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	empty := t.TempDir()
	cases := []struct {
		name, store, dir, message string
	}{
		{"missing mount point", store, filepath.Join(tmp, "missing"), "no such file or directory"},
		{"mount point is a file", store, file, "is not a directory"},
		{"mount point not empty", store, notEmpty, "is not empty"},
		{"mount point busy", store, busy.Dir, "is busy"},
		{"missing store", filepath.Join(tmp, "no-store"), empty, "no-store: no such file or directory"},
		{"not a store", notEmpty, empty, "no Zarr group or array found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mountsBefore := mountCount(t, c.dir)
			cmd := exec.Command(zarrfsBin, "mount", "--ro", c.store, c.dir)
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				integration.ForceUnmount(c.dir)
				t.Fatalf("zarrfs mount did not fail within 30s:\n%s", out)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Errorf("exit: %v, want status 1", err)
			}
			msg := strings.TrimSpace(string(out))
			if !strings.HasPrefix(msg, "zarrfs: ") || !strings.Contains(msg, c.message) || strings.Count(msg, "\n") > 0 {
				t.Errorf("printed %q, want one line containing %q", msg, c.message)
			}
			if n := mountCount(t, c.dir); n != mountsBefore {
				integration.ForceUnmount(c.dir)
				t.Errorf("%d mounts at %s after the failed mount, %d before", n, c.dir, mountsBefore)
			}
		})
	}
	if _, err := os.ReadFile(filepath.Join(busy.Dir, "v2", ".zmetadata")); err != nil {
		t.Errorf("the mount a second mount was refused on stopped working: %v", err)
	}
}

// mountCount counts the mounts at dir in /proc/self/mountinfo.
func mountCount(t *testing.T, dir string) int {
	t.Helper()
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(info), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && strings.ReplaceAll(fields[4], `\040`, " ") == dir {
			n++
		}
	}
	return n
}
