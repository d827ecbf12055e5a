package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// readyEnv tells a daemon started by `zarrfs mount --daemon` that file
// descriptor 3 is the pipe on which it reports its mount ready.
const readyEnv = "ZARRFS_DAEMON_READY_FD"

// daemonize runs `zarrfs mount ARGS` again as a daemon in its own session
// (mount(8), a shell or systemd may end theirs) and returns once that
// daemon reports the mount ready: 0, or 1 if it exits first, having
// printed why to log.
func daemonize(args []string, log *os.File) int {
	exe, err := os.Executable()
	if err != nil {
		return fail(log, fmt.Errorf("--daemon: %w", err))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail(log, fmt.Errorf("--daemon: %w", err))
	}
	defer r.Close()
	cmd := exec.Command(exe, append([]string{"mount"}, args...)...)
	cmd.Env = append(os.Environ(), readyEnv+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fail(log, fmt.Errorf("--daemon: %w", err))
	}
	// The daemon writes one line once the kernel has the mount, or exits
	// (closing the pipe) when it cannot mount.
	line, _ := io.ReadAll(io.LimitReader(r, 64))
	if strings.TrimSpace(string(line)) == "ready" {
		cmd.Process.Release()
		return 0
	}
	err = cmd.Wait()
	return fail(log, fmt.Errorf("the mount did not come up (%v)", err))
}

// daemonChild reports whether this process is the daemon a `zarrfs mount
// --daemon` started, and keeps the pipe to it from the processes it runs
// (fusermount3).
func daemonChild() bool {
	if os.Getenv(readyEnv) != "3" {
		return false
	}
	syscall.CloseOnExec(3)
	return true
}

// daemonReady reports the mount ready to the `zarrfs mount --daemon` that
// started this process, if one did.
func daemonReady() {
	if os.Getenv(readyEnv) != "3" {
		return
	}
	os.Unsetenv(readyEnv)
	f := os.NewFile(3, "ready")
	fmt.Fprintln(f, "ready")
	f.Close()
}
