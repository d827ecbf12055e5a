package integration_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/integration"
)

// nobody is the uid and gid of user nobody, the other user of the tests.
const nobody = 65534

// mountShared mounts store at a directory every user can reach (the
// test's temporary directories are 0700).
func mountShared(t *testing.T, store string, args ...string) *integration.Mount {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("another user's access to a mount needs root")
	}
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := integration.Start(zarrfsBin, store, dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		m.Kill()
	})
	return m
}

// asNobody runs a command as user nobody, without supplementary groups.
func asNobody(name string, args ...string) ([]byte, error) {
	return exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", name}, args...)...).CombinedOutput()
}

// TestAllowOtherPermissions: root mounts a store read-write with
// --allow-other. User nobody reads a chunk file as its 0644 mode allows,
// and can neither truncate, overwrite nor remove it, nor create a file in
// the 0755 directories: the kernel checks the modes (default_permissions).
// The store is unchanged.
func TestAllowOtherPermissions(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is missing")
	}
	dir, _ := writeStore(t)
	a := storeArray(t, dir, "uint16_zstd_crc")
	coords := []int{1, 2}
	stored, _ := storedInner(t, dir, a, coords)
	m := mountShared(t, dir, "--allow-other")
	p := chunkPath(m.Dir, "v3", ".", a, coords)
	want := readOrMissing(t, p)
	if out, err := asNobody("cat", p); err != nil || !bytes.Equal(out, want) {
		t.Errorf("nobody reads %s: %v, %d bytes; want the %d root reads\n%s", p, err, len(out), len(want), out)
	}
	for name, args := range map[string][]string{
		"truncate":  {"truncate", "-s", "0", p},
		"overwrite": {"sh", "-c", `printf x > "$1"`, "sh", p},
		"remove":    {"rm", "-f", p},
		"create":    {"sh", "-c", `: > "$1"`, "sh", filepath.Join(filepath.Dir(p), "new")},
	} {
		if out, err := asNobody(args[0], args[1:]...); err == nil {
			t.Errorf("nobody could %s %s: %s", name, p, out)
		}
	}
	if got := readOrMissing(t, p); !bytes.Equal(got, want) {
		t.Errorf("%s changed after nobody's attempts: %d bytes, want %d", p, len(got), len(want))
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if got, _ := storedInner(t, dir, a, coords); !bytes.Equal(got, stored) {
		t.Error("the store changed after nobody's attempts")
	}
}

// TestOwnerFlags: --uid, --gid and --umask set the owner and modes of
// every file and directory; read-only mounts clear the write bits; a
// malformed --umask is refused.
func TestOwnerFlags(t *testing.T) {
	dir, _ := writeStore(t)
	a := storeArray(t, dir, "uint16_zstd_crc")
	for _, c := range []struct {
		args              []string
		uid, gid          uint32
		fileMode, dirMode uint32
	}{
		{nil, uint32(os.Getuid()), uint32(os.Getgid()), 0o644, 0o755},
		{[]string{"--ro"}, uint32(os.Getuid()), uint32(os.Getgid()), 0o444, 0o555},
		{[]string{"--uid", "65534", "--gid", "65534", "--umask", "077"}, nobody, nobody, 0o600, 0o700},
		{[]string{"--ro", "--umask", "0"}, uint32(os.Getuid()), uint32(os.Getgid()), 0o444, 0o555},
	} {
		m := mount(t, dir, c.args...)
		file := chunkPath(m.Dir, "v3", ".", a, []int{1, 2})
		for p, mode := range map[string]uint32{file: syscall.S_IFREG | c.fileMode, filepath.Dir(file): syscall.S_IFDIR | c.dirMode, filepath.Join(m.Dir, "v2"): syscall.S_IFDIR | c.dirMode} {
			var st syscall.Stat_t
			if _, err := retryEINTR(func() (struct{}, error) { return struct{}{}, syscall.Stat(p, &st) }); err != nil {
				t.Fatal(err)
			}
			if st.Mode != mode || st.Uid != c.uid || st.Gid != c.gid {
				t.Errorf("mount %q: %s has mode %o, owner %d:%d; want %o, %d:%d", c.args, p, st.Mode, st.Uid, st.Gid, mode, c.uid, c.gid)
			}
		}
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	if out, err := exec.Command(zarrfsBin, "mount", "--umask", "999", dir, mnt).CombinedOutput(); err == nil || !bytes.Contains(out, []byte("--umask")) {
		t.Errorf("mount --umask 999: %v, %q; want a failure naming the flag", err, out)
	}
}
