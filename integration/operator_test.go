package integration_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// These tests run zarrfs as an operator does, from a shell: its daemon
// under pipes and $(…), umount, flags and -o options where people put
// them, systemd's readiness protocol.

// newMountpoint returns an empty directory to mount at; cleanup unmounts
// whatever zarrfs left there and waits for its daemons to exit.
func newMountpoint(t *testing.T) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mounted, _ := zfs.Mounted(mnt); mounted {
			if out, err := exec.Command(zarrfsBin, "umount", mnt).CombinedOutput(); err != nil {
				t.Errorf("zarrfs umount in cleanup: %v\n%s", err, out)
				integration.ForceUnmount(mnt)
			}
		}
		waitDaemonsGone(t, mnt)
	})
	return mnt
}

// shell runs script with sh -c, bounded: a zarrfs that keeps the shell's
// pipes open past the bound fails the test rather than hang it.
func shell(t *testing.T, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Errorf("sh -c %q did not return within 90s: %s", script, out)
	}
	return string(out), err
}

// TestDaemonLeavesTheCallersStdio: `zarrfs mount --daemon` returns once
// mounted even when its output is captured ($(…) waits for every writer
// of the pipe to close it), and its daemon outlives a pipe that closed
// after the first line (head -1): it logs on, publishes a write and
// answers zarrfs umount with its report.
func TestDaemonLeavesTheCallersStdio(t *testing.T) {
	store := t.TempDir()
	var array zarrtest.Generated
	for _, g := range zarrtest.WriteV3Store(t, store) {
		if g.Sharded {
			array = g
			break
		}
	}

	mnt := newMountpoint(t)
	out, err := shell(t, `out=$(`+zarrfsBin+` mount --daemon `+store+` `+mnt+` 2>&1); echo "rc=$?"; echo "$out"`)
	if err != nil || !strings.HasPrefix(out, "rc=0\n") || !strings.Contains(out, "msg=mounted") {
		t.Errorf("out=$(zarrfs mount --daemon … 2>&1): %v\n%s\nwant rc=0 and the log up to the mount", err, out)
	}
	if mounted, _ := zfs.Mounted(mnt); !mounted {
		t.Fatalf("%s is not mounted after zarrfs mount --daemon returned", mnt)
	}
	if out, err := exec.Command(zarrfsBin, "umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("zarrfs umount: %v\n%s", err, out)
	}
	waitDaemonsGone(t, mnt)

	out, err = shell(t, zarrfsBin+` mount --daemon `+store+` `+mnt+` 2>&1 | head -n 1`)
	if err != nil || !strings.Contains(out, "msg=mounted") {
		t.Fatalf("zarrfs mount --daemon 2>&1 | head -1: %v\n%s", err, out)
	}
	// A chunk written through the mount (its own bytes again) is
	// published, which the daemon logs: into the pipe head closed, on
	// main, which killed it.
	dir := filepath.Join(mnt, "v3", array.Path, "c")
	var chunk string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && chunk == "" {
			chunk = path
		}
		return err
	})
	b, err := os.ReadFile(chunk)
	if err != nil || len(b) == 0 {
		t.Fatalf("read %s through the daemon's mount: %d bytes, %v", chunk, len(b), err)
	}
	if err := os.WriteFile(chunk, b, 0o644); err != nil {
		t.Fatalf("write %s through the daemon's mount: %v", chunk, err)
	}
	time.Sleep(time.Second) // past the publish delay: the daemon logs
	if got, err := os.ReadFile(chunk); err != nil || !bytes.Equal(got, b) {
		t.Errorf("read %s back: %d bytes, %v", chunk, len(got), err)
	}
	if n := len(daemons(t, mnt)); n != 1 {
		t.Errorf("%d zarrfs daemons serve %s after the caller's pipe closed, want 1", n, mnt)
	}
	umount, err := exec.Command(zarrfsBin, "umount", mnt).CombinedOutput()
	if err != nil || !strings.Contains(string(umount), "published") {
		t.Errorf("zarrfs umount of the daemon whose caller's pipe closed: %v\n%s\nwant exit 0 and its report", err, umount)
	}
	waitDaemonsGone(t, mnt)
}

// TestDaemonErrorsReachTheCaller: with --log-file, a daemon that cannot
// mount still says why on the caller's stderr (and in the log).
func TestDaemonErrorsReachTheCaller(t *testing.T) {
	mnt := newMountpoint(t)
	log := filepath.Join(t.TempDir(), "log")
	missing := filepath.Join(t.TempDir(), "missing")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, zarrfsBin, "mount", "--daemon", "--log-file", log, missing, mnt)
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exitCode(err) != 1 || !strings.Contains(stderr.String(), missing) {
		t.Errorf("zarrfs mount --daemon --log-file of a missing store: exit %d, stderr %q; want 1 naming the store", exitCode(err), stderr.String())
	}
	if b, _ := os.ReadFile(log); !bytes.Contains(b, []byte(missing)) {
		t.Errorf("the --log-file does not say why the mount failed:\n%s", b)
	}
}

// TestNotifiesSystemd: under a Type=notify unit ($NOTIFY_SOCKET), the
// mount reports READY=1 once mounted and STOPPING=1 when it goes; with
// --daemon, the daemon's pid comes as MAINPID with READY=1.
func TestNotifiesSystemd(t *testing.T) {
	store := t.TempDir()
	zarrtest.WriteV3Store(t, store)
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	next := func(want string) string {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if err != nil || !strings.Contains(string(buf[:n]), want) {
			t.Fatalf("notify socket: %q, %v; want %s", buf[:n], err, want)
		}
		return string(buf[:n])
	}

	mnt := newMountpoint(t)
	cmd := exec.Command(zarrfsBin, "mount", "--ro", store, mnt)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var log bytes.Buffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	next("READY=1")
	if mounted, _ := zfs.Mounted(mnt); !mounted {
		t.Errorf("READY=1 came before %s was mounted", mnt)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("zarrfs mount after SIGTERM: %v\n%s", err, log.String())
		}
	case <-time.After(time.Minute):
		t.Errorf("zarrfs mount did not exit a minute after SIGTERM\n%s", log.String())
	}

	mnt = newMountpoint(t)
	daemon := exec.Command(zarrfsBin, "mount", "--daemon", "--ro", store, mnt)
	daemon.Env = cmd.Env
	if out, err := daemon.CombinedOutput(); err != nil {
		t.Fatalf("zarrfs mount --daemon: %v\n%s", err, out)
	}
	msgs := next("READY=1")
	if pids := daemons(t, mnt); len(pids) != 1 || !strings.Contains(msgs, "MAINPID="+strconv.Itoa(pids[0])) {
		t.Errorf("--daemon told systemd %q; want MAINPID= the daemon's pid (%v)", msgs, pids)
	}
}

// TestUmountRefusesOtherMounts: zarrfs umount unmounts zarrfs mounts
// only, and says what it left alone.
func TestUmountRefusesOtherMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		zarrtest.Missing(t, "TestUmountRefusesOtherMounts mounts a tmpfs: it needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	out, err := exec.Command(zarrfsBin, "umount", dir).CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "tmpfs") || !strings.Contains(string(out), "not a zarrfs mount") {
		t.Errorf("zarrfs umount of a tmpfs: exit %d\n%s\nwant 1, saying it is a tmpfs", exitCode(err), out)
	}
	if mounted, _ := zfs.Mounted(dir); !mounted {
		t.Errorf("zarrfs umount unmounted a tmpfs")
	}

	if _, err := exec.LookPath("bindfs"); err != nil {
		t.Logf("bindfs is missing: the FUSE mount of another kind is not tried")
		return
	}
	src, bound := t.TempDir(), t.TempDir()
	if out, err := exec.Command("bindfs", src, bound).CombinedOutput(); err != nil {
		t.Fatalf("bindfs: %v\n%s", err, out)
	}
	t.Cleanup(func() { integration.ForceUnmount(bound) })
	out, err = exec.Command(zarrfsBin, "umount", bound).CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "fuse") || !strings.Contains(string(out), "not a zarrfs mount") {
		t.Errorf("zarrfs umount of a bindfs mount: exit %d\n%s\nwant 1, saying what it is", exitCode(err), out)
	}
	if mounted, _ := zfs.Mounted(bound); !mounted {
		t.Errorf("zarrfs umount unmounted a bindfs mount")
	}
}

// TestFlagsWherePeoplePutThem: flags after the arguments, -o options as
// mount(8) takes them (with the FUSE options people add), --read-only,
// --version, and one line with a hint for a mistake. The mount root
// follows --uid, --gid and --umask as everything below it does.
func TestFlagsWherePeoplePutThem(t *testing.T) {
	store := t.TempDir()
	zarrtest.WriteV3Store(t, store)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, zarrfsBin, args...).CombinedOutput()
		return string(out), err
	}
	statOf := func(path string) *syscall.Stat_t {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return &st
	}

	mnt := newMountpoint(t)
	if out, err := run("mount", "--daemon", store, mnt, "--ro"); err != nil {
		t.Fatalf("zarrfs mount --daemon STORE MNT --ro: %v\n%s", err, out)
	}
	if mounted, _ := zfs.Mounted(mnt); !mounted || !readOnlyMount(t, mnt) {
		t.Errorf("--ro after the arguments: %s is not mounted read-only", mnt)
	}
	if out, err := run("umount", mnt); err != nil {
		t.Fatalf("zarrfs umount: %v\n%s", err, out)
	}
	waitDaemonsGone(t, mnt)

	// -o with the FUSE options of other file systems; the root follows
	// uid, gid and umask (and allow_root closes it to the others).
	if err := os.WriteFile(filepath.Join(mnt, "hidden"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run("mount", "--daemon", store, mnt); err == nil || !strings.Contains(out, "nonempty") {
		t.Errorf("a mount over a directory that is not empty: %v\n%s\nwant a refusal naming nonempty", err, out)
	}
	if out, err := run("mount", "--daemon", store, mnt, "-o", "read_only,uid=1234,gid=2345,umask=027,allow_other,default_permissions,nonempty,noauto,_netdev"); err != nil {
		t.Fatalf("zarrfs mount -o …: %v\n%s", err, out)
	}
	for _, path := range []string{mnt, filepath.Join(mnt, "v3")} {
		if st := statOf(path); st.Uid != 1234 || st.Gid != 2345 || st.Mode&0o7777 != 0o550 {
			t.Errorf("%s: uid %d gid %d mode %o; want 1234, 2345 and 0550 (0777 less umask 027 and, read-only, the write bits)", path, st.Uid, st.Gid, st.Mode&0o7777)
		}
	}
	if !readOnlyMount(t, mnt) {
		t.Errorf("-o read_only: %s is not read-only", mnt)
	}
	if out, err := run("umount", mnt); err != nil {
		t.Fatalf("zarrfs umount: %v\n%s", err, out)
	}
	waitDaemonsGone(t, mnt)
	if out, err := run("mount", "--daemon", "-o", "allow_root,nonempty", "--umask=000", store, mnt); err != nil {
		t.Fatalf("zarrfs mount -o allow_root: %v\n%s", err, out)
	}
	if st := statOf(mnt); st.Mode&0o7777 != 0o700 {
		t.Errorf("-o allow_root: the root is %o, want 0700: only its owner and root may enter", st.Mode&0o7777)
	}
	if st := statOf(filepath.Join(mnt, "v3")); st.Mode&0o7777 != 0o777 {
		t.Errorf("-o allow_root --umask=000: v3 is %o, want 0777 (only the root is closed)", st.Mode&0o7777)
	}
	if out, err := run("umount", mnt); err != nil {
		t.Fatalf("zarrfs umount: %v\n%s", err, out)
	}
	waitDaemonsGone(t, mnt)

	// Mistakes: one line, with the hint.
	for _, args := range [][]string{
		{"mount", store, mnt, "--rox"},
		{"mount", store},
		{"mount", "-o", "cache_sise=1GiB", store, mnt},
		{"info", "--jsn", store},
	} {
		out, err := run(args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if exitCode(err) != 2 || len(lines) != 1 || !strings.Contains(out, "zarrfs "+args[0]+" -h") {
			t.Errorf("zarrfs %s: exit %d, %d lines:\n%s\nwant exit 2 and one line with the hint", strings.Join(args, " "), exitCode(err), len(lines), out)
		}
	}
	if out, _ := run("mount", store, mnt, "--rox"); !strings.Contains(out, "did you mean --ro?") {
		t.Errorf("--rox: %q; want a suggestion of --ro", out)
	}
	if out, err := run("--version"); err != nil || !strings.HasPrefix(out, "zarrfs ") || !strings.Contains(out, "go1.") {
		t.Errorf("zarrfs --version: %v, %q", err, out)
	}
	if mounted, _ := zfs.Mounted(mnt); mounted {
		t.Errorf("a mistaken command mounted %s", mnt)
	}
}

// readOnlyMount reports whether the mount at mnt refuses writes.
func readOnlyMount(t *testing.T, mnt string) bool {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	return st.Flags&0x1 != 0 // ST_RDONLY
}
