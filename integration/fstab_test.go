package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// daemons lists the zarrfs processes serving mnt (by their command line).
func daemons(t *testing.T, mnt string) []int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if err == nil && len(args) > 1 && args[0] == zarrfsBin && slices.Contains(args, mnt) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitDaemonsGone waits up to a minute for the zarrfs processes serving
// mnt to exit after an unmount; it kills those left, failing the test.
func waitDaemonsGone(t *testing.T, mnt string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if len(daemons(t, mnt)) == 0 {
			return
		}
	}
	for _, pid := range daemons(t, mnt) {
		t.Errorf("zarrfs (pid %d) still serves %s a minute after it was unmounted: killed", pid, mnt)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestMountDaemon: `zarrfs mount --daemon` returns 0 with the mount in
// place, logging to --log-file, and the daemon exits when it is
// unmounted; a mount that cannot come up exits 1 saying why.
func TestMountDaemon(t *testing.T) {
	store := t.TempDir()
	zarrtest.WriteV3Store(t, store)
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "log")
	t.Cleanup(func() {
		if mounted, _ := zfs.Mounted(mnt); mounted {
			exec.Command(zarrfsBin, "umount", mnt).Run()
		}
		waitDaemonsGone(t, mnt)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, zarrfsBin, "mount", "--daemon", "--ro", "--log-file", log, store, mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("zarrfs mount --daemon: %v\n%s", err, out)
	}
	if mounted, err := zfs.Mounted(mnt); !mounted || err != nil {
		t.Fatalf("zarrfs mount --daemon exited 0, but %s is not mounted (%v)", mnt, err)
	}
	if entries, err := os.ReadDir(mnt); err != nil || len(entries) != 2 {
		t.Errorf("the daemon's mount lists %v (%v), want v2 and v3", entries, err)
	}
	if n := len(daemons(t, mnt)); n != 1 {
		t.Errorf("%d zarrfs processes serve %s, want the one daemon", n, mnt)
	}
	if out, err := exec.Command(zarrfsBin, "umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("zarrfs umount: %v\n%s", err, out)
	}
	waitDaemonsGone(t, mnt)
	if b, _ := os.ReadFile(log); !bytes.Contains(b, []byte("msg=mounted")) {
		t.Errorf("--log-file %s does not log the mount:\n%s", log, b)
	}

	// A store that is not there: exit 1, the reason on stderr (no
	// --log-file), no mount and no daemon.
	missing := filepath.Join(t.TempDir(), "missing")
	out, err = exec.CommandContext(ctx, zarrfsBin, "mount", "--daemon", missing, mnt).CombinedOutput()
	if code := exitCode(err); code != 1 || !bytes.Contains(out, []byte(missing)) {
		t.Errorf("zarrfs mount --daemon of a missing store: exit %d (%v), want 1 naming it:\n%s", code, err, out)
	}
	if mounted, _ := zfs.Mounted(mnt); mounted {
		t.Errorf("%s is mounted after a failed zarrfs mount --daemon", mnt)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// readmeFstabLine is the fstab line of the README (its "Run by the
// system"), with its paths.
func readmeFstabLine(t *testing.T, store, mnt, log string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(zarrtest.RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 6 && f[2] == "fuse.zarrfs" {
			return strings.NewReplacer("/srv/data/volume.zarr", store, "/mnt/volume", mnt, "/var/log/zarrfs.log", log).Replace(line)
		}
	}
	t.Fatal("README.md has no fstab line of type fuse.zarrfs")
	return ""
}

// TestFstab mounts a store the way filesystems are mounted: the README's
// fstab line (type fuse.zarrfs, mount options and fstab-only options),
// which `mount -a` leaves alone (noauto) and `mount MNT` mounts
// (util-linux, which runs /sbin/mount.fuse.zarrfs, a link to zarrfs), a
// chunk file read through it, `umount MNT`; then the line without
// noauto, which `mount -a` mounts. It runs in a private mount namespace
// where /sbin holds the link on an overlay, with temporary fstabs (mount
// -T), so the system's /sbin and /etc/fstab stay untouched.
func TestFstab(t *testing.T) {
	sbin, err := filepath.EvalSymlinks("/sbin")
	fsList, _ := os.ReadFile("/proc/filesystems")
	_, unshareErr := exec.LookPath("unshare")
	if err != nil || unshareErr != nil || !bytes.Contains(fsList, []byte("overlay")) {
		zarrtest.Missing(t, "TestFstab needs /sbin (%v), unshare (%v) and overlayfs", err, unshareErr)
	}
	store := t.TempDir()
	var array string
	for _, g := range zarrtest.WriteV3Store(t, store) {
		if g.Sharded {
			array = g.Path
			break
		}
	}
	work := t.TempDir()
	upper, overlayWork, out := filepath.Join(work, "upper"), filepath.Join(work, "work"), filepath.Join(work, "out")
	mnt := filepath.Join(work, "mnt")
	for _, d := range []string{upper, overlayWork, out, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(zarrfsBin, filepath.Join(upper, "mount.fuse.zarrfs")); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(work, "log")
	line := readmeFstabLine(t, store, mnt, log)
	if !strings.Contains(line, ",noauto,") {
		t.Fatalf("the README's fstab line has no noauto, which the README explains: %s", line)
	}
	fstab, auto := filepath.Join(work, "fstab"), filepath.Join(work, "fstab-auto")
	if err := os.WriteFile(fstab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(auto, []byte(strings.Replace(line, ",noauto,", ",", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The mount lives in the namespace: the daemon's end ends it.
		for _, pid := range daemons(t, mnt) {
			syscall.Kill(pid, syscall.SIGTERM)
		}
		waitDaemonsGone(t, mnt)
	})
	script := fmt.Sprintf(`set -e
mount -t overlay overlay -o lowerdir=%[1]s,upperdir=%[2]s,workdir=%[3]s %[1]s
mount -a -T %[4]s
if findmnt %[5]s > /dev/null; then echo mounted > %[6]s/noauto; fi
mount -T %[4]s %[5]s
findmnt -n -o FSTYPE,OPTIONS %[5]s > %[6]s/findmnt
f=$(find %[5]s/v3/%[7]s/c -type f | sort | head -n 1)
echo "${f#%[5]s/}" > %[6]s/path
cat "$f" > %[6]s/chunk
umount %[5]s
mount -a -T %[8]s
findmnt -n -o FSTYPE %[5]s > %[6]s/auto
umount %[5]s
`, sbin, upper, overlayWork, fstab, mnt, out, array, auto)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if b, err := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "sh", "-c", script).CombinedOutput(); err != nil {
		logged, _ := os.ReadFile(log)
		t.Fatalf("mount -T fstab, read, umount: %v\n%s\nfstab: %s\nlog:\n%s", err, b, line, logged)
	}
	waitDaemonsGone(t, mnt)

	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if fm := read("findmnt"); !strings.HasPrefix(fm, "fuse.zarrfs ") || !strings.Contains(fm, "ro,") || !strings.Contains(fm, "allow_other") {
		t.Errorf("findmnt of the fstab mount: %q, want fuse.zarrfs, ro and allow_other", fm)
	}
	if _, err := os.Stat(filepath.Join(out, "noauto")); err == nil {
		t.Errorf("mount -a mounted the line with noauto")
	}
	if fm := read("auto"); strings.TrimSpace(fm) != "fuse.zarrfs" {
		t.Errorf("mount -a of the line without noauto: findmnt says %q, want fuse.zarrfs", fm)
	}
	path := strings.TrimSpace(read("path"))
	ref := mount(t, store, "--ro")
	want, err := os.ReadFile(filepath.Join(ref.Dir, path))
	if err != nil {
		t.Fatal(err)
	}
	if got := read("chunk"); len(want) == 0 || got != string(want) {
		t.Errorf("%s through the fstab mount: %d bytes, through zarrfs mount %d, want them equal and not empty", path, len(got), len(want))
	}
	if b, _ := os.ReadFile(log); !bytes.Contains(b, []byte("msg=mounted")) || !bytes.Contains(b, []byte("read_only=true")) {
		t.Errorf("the log_file= of the fstab line does not log a read-only mount:\n%s", b)
	}
	if mounted, _ := zfs.Mounted(mnt); mounted {
		t.Errorf("%s is mounted outside the test's mount namespace", mnt)
	}
	if _, err := os.Lstat(filepath.Join(sbin, "mount.fuse.zarrfs")); err == nil {
		t.Logf("note: %s/mount.fuse.zarrfs exists on this system (installed, not by this test)", sbin)
	}
}

// TestREADMESystemdUnit: the README's systemd unit passes
// `systemd-analyze verify` without a word (a comment after a value, an
// unknown key or a missing program are warnings there, not errors), and
// has what a mount service needs: readiness (Type=notify), the network
// first, the token out of `systemctl show`, and an [Install] section.
func TestREADMESystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		zarrtest.Missing(t, "TestREADMESystemdUnit needs systemd-analyze (apt-get install systemd): %v", err)
	}
	b, err := os.ReadFile(filepath.Join(zarrtest.RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const first = "# /etc/systemd/system/zarrfs-dataset.service\n"
	_, block, found := strings.Cut(string(b), "```ini\n"+first)
	unit, _, closed := strings.Cut(block, "```")
	if !found || !closed {
		t.Fatalf("README.md has no unit starting %q in an ini block", first)
	}
	for _, want := range []string{"Type=notify\n", "After=network-online.target\n", "Wants=network-online.target\n", "LoadCredential=", "[Install]\nWantedBy=multi-user.target\n", "ExecStop=/usr/local/bin/zarrfs umount "} {
		if !strings.Contains(unit, want) {
			t.Errorf("the README's unit lacks %q", want)
		}
	}
	if strings.Contains(unit, "Environment=ZARRFS_PEER_TOKEN") {
		t.Errorf("the README's unit puts the peer token where systemctl show prints it")
	}
	path := filepath.Join(t.TempDir(), "zarrfs-dataset.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/zarrfs", zarrfsBin)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify of the README's unit: %v\n%s\n%s", err, out, unit)
	}
}
