package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/coreos/go-systemd/v22/journal"
)

// readyEnv tells a daemon started by `zarrfs mount --daemon` that file
// descriptor 3 is the pipe to the command that started it: it copies what
// the daemon logs there to its own stderr until the daemon reports the
// mount ready (readyLine) or exits.
const readyEnv = "ZARRFS_DAEMON_READY_FD"

// readyLine ends what a daemon sends its starter: the mount is ready. No
// log line is that (every one starts with time=).
const readyLine = "zarrfs: ready"

// journalStream is where systemd-journald takes the standard output and
// error of services (sd_journal_stream_fd).
const journalStream = "/run/systemd/journal/stdout"

// daemonize runs `zarrfs mount ARGS` again as a daemon in its own session
// (mount(8), a shell or systemd may end theirs), with none of this
// command's standard input, output and error: a pipe or terminal the
// caller closes must not end it, nor a $(…) wait for it. It logs to
// logFile if set, else to the journal (the stderr systemd gave, or
// journald's stream socket), else nowhere. Until the mount is ready its
// log is also copied to stderr, so every error of a mount that does not
// come up reaches the caller. It returns 0 once the mount is ready, or 1
// if the daemon exits first.
func daemonize(args []string, logPath string, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		return fail(stderr, fmt.Errorf("--daemon: %w", err))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail(stderr, fmt.Errorf("--daemon: %w", err))
	}
	defer r.Close()
	log, where, err := daemonLog(logPath)
	if err != nil {
		w.Close()
		return fail(stderr, err)
	}
	if log != nil && log != os.Stderr {
		defer log.Close()
	}
	cmd := exec.Command(exe, append([]string{"mount"}, args...)...)
	cmd.Env = append(os.Environ(), readyEnv+"=3")
	cmd.ExtraFiles = []*os.File{w}
	if log != nil {
		cmd.Stderr = log // else /dev/null, as stdin and stdout are
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fail(stderr, fmt.Errorf("--daemon: %w", err))
	}
	// A caller reading only the first line (| head -1) must not stop
	// this process before it has released the daemon.
	signal.Ignore(syscall.SIGPIPE)
	// The daemon's log until it reports the mount ready, or exits
	// (closing the pipe) when it cannot mount.
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if sc.Text() == readyLine {
			if where == "" {
				fmt.Fprintln(stderr, "zarrfs: warning: the daemon logs nowhere: give --log-file (no systemd journal here)")
			}
			// Under systemd (Type=notify), the daemon is the service's
			// process from now on.
			daemon.SdNotify(false, fmt.Sprintf("MAINPID=%d\nREADY=1", cmd.Process.Pid))
			cmd.Process.Release()
			return 0
		}
		fmt.Fprintln(stderr, sc.Text())
	}
	err = cmd.Wait()
	return fail(stderr, fmt.Errorf("the mount did not come up (%v)", err))
}

// daemonLog is what a daemon's stderr is: the file at logPath, the
// journal, or nil (/dev/null); where names it, "" for nowhere.
func daemonLog(logPath string) (f *os.File, where string, err error) {
	if logPath != "" {
		f, err := openLog(logPath)
		return f, logPath, err
	}
	if ok, _ := journal.StderrIsJournalStream(); ok {
		return os.Stderr, "the journal", nil
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: journalStream, Net: "unix"})
	if err != nil {
		return nil, "", nil // no journald
	}
	defer conn.Close()
	// The stream's header: identifier, unit, priority (6: info), and no
	// level prefixes nor forwarding (journald's own settings apply).
	if _, err := io.WriteString(conn, "zarrfs\n\n6\n0\n0\n0\n0\n"); err != nil {
		return nil, "", err
	}
	if err := conn.CloseRead(); err != nil {
		return nil, "", err
	}
	f, err = conn.File()
	return f, "the journal", err
}

// openLog opens the file of --log-file, to append to.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("--log-file: %w", err)
	}
	return f, nil
}

// starterLog is a daemon's log: to its log, and until the mount is ready
// to the command that started it too.
type starterLog struct {
	log     io.Writer
	mu      sync.Mutex
	starter *os.File // nil once told the mount is ready
}

// newStarterLog returns log, copied to the starter of this process if a
// `zarrfs mount --daemon` started it (whose pipe the processes this one
// runs, fusermount3, do not get).
func newStarterLog(log io.Writer) *starterLog {
	l := &starterLog{log: log}
	if daemonChild() {
		os.Unsetenv(readyEnv)
		syscall.CloseOnExec(3)
		l.starter = os.NewFile(3, "starter")
	}
	return l
}

// daemonChild reports whether this process is the daemon a `zarrfs mount
// --daemon` started, before newStarterLog took the pipe to it.
func daemonChild() bool { return os.Getenv(readyEnv) == "3" }

func (l *starterLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.starter != nil {
		l.starter.Write(p) // the starter gone is no reason to stop
	}
	return l.log.Write(p)
}

// ready tells the starter that the mount is ready (which tells systemd,
// with this process's pid), or, with no starter, systemd itself; the
// starter hears no more of the log.
func (l *starterLog) ready(status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.starter == nil {
		notifySystemd("READY=1\nSTATUS=" + status)
		return
	}
	fmt.Fprintln(l.starter, readyLine)
	l.starter.Close()
	l.starter = nil
}

// notifySystemd tells systemd the service's state (Type=notify units set
// $NOTIFY_SOCKET; elsewhere it does nothing).
func notifySystemd(state string) {
	daemon.SdNotify(false, strings.TrimSpace(state))
}
