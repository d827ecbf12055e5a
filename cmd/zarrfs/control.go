package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// A mount answers `zarrfs umount` on a unix socket of its own, in a
// directory only the mounting user (and root) can enter, named by a hash
// of the mount point: umount asks the mount process to unmount and reads
// its report (what it published, or left in the journal) until it is
// done. umount(8) and fusermount3 -u go straight to the kernel; the
// mount process then publishes after the fact, and nobody waits for it.

// controlDir is the directory of the control sockets of uid's mounts.
func controlDir(uid int) string {
	if uid == 0 {
		return "/run/zarrfs"
	}
	return filepath.Join(os.TempDir(), "zarrfs-"+strconv.Itoa(uid))
}

// controlPath is the control socket of the mount at mnt, of the mounts
// of this user.
func controlPath(mnt string) (string, error) {
	abs, err := fs.ResolveDir(mnt)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(controlDir(os.Geteuid()), hex.EncodeToString(sum[:8])+".sock"), nil
}

// privateDir checks that dir is a directory (not a link) owned by this
// user that no one else can enter, creating it if it is missing: a
// socket in a directory another user controls could be someone else's.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return fmt.Errorf("%s is not a directory of uid %d that only it can enter", dir, os.Geteuid())
	}
	return nil
}

// controlServer is the control socket of a mount.
type controlServer struct {
	ln     *net.UnixListener
	handle func(*controlRequest)
}

// controlRequest is one umount asking.
type controlRequest struct {
	force bool
	conn  *net.UnixConn
}

// finish sends the report and the exit code, and hangs up.
func (r *controlRequest) finish(lines []string, code int) { r.end(lines, "exit", code) }

// detached sends the report of a forced unmount of a busy mount, whose
// process goes on until its files are closed, and hangs up.
func (r *controlRequest) detached(lines []string, code int) { r.end(lines, "detached", code) }

func (r *controlRequest) end(lines []string, last string, code int) {
	r.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	for _, l := range lines {
		fmt.Fprintln(r.conn, l)
	}
	fmt.Fprintln(r.conn, last, code)
	r.conn.Close()
}

// listenControl opens the control socket of the mount at mnt; handle
// answers each request.
func listenControl(mnt string, handle func(*controlRequest)) (*controlServer, error) {
	path, err := controlPath(mnt)
	if err != nil {
		return nil, err
	}
	if err := privateDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	// A socket left by a mount that died; the mount point is free, so no
	// live mount owns it.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	c := &controlServer{ln: ln, handle: handle}
	go c.serve()
	return c, nil
}

// serve answers the requests of this user (and root).
func (c *controlServer) serve() {
	for {
		conn, err := c.ln.AcceptUnix()
		if err != nil {
			return
		}
		go func() {
			if cred, err := peerCred(conn); err != nil || cred.Uid != 0 && int(cred.Uid) != os.Geteuid() {
				conn.Close()
				return
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReader(io.LimitReader(conn, 64)).ReadString('\n') // a request is one short line
			conn.SetReadDeadline(time.Time{})
			r := &controlRequest{conn: conn}
			switch strings.TrimSpace(line) {
			case "umount":
			case "umount --force":
				r.force = true
			default:
				r.finish([]string{"unknown request"}, 2)
				return
			}
			c.handle(r)
		}()
	}
}

// close stops answering and removes the socket.
func (c *controlServer) close() {
	if c != nil {
		c.ln.Close() // removes the socket file
	}
}

func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	return cred, errors.Join(cerr, err)
}

// unmounter ends a mount when asked: by a first signal (or ctx), which
// unmounts once no file is open and serves until then; by a second signal
// or `zarrfs umount --force`, which publish what was written and detach
// the mount even while files are open; or by `zarrfs umount`, which
// unmounts unless the mount is busy. A lazy detach is never the answer to
// a first signal: writers with a file open would go on writing through
// paths that then lead to the directory under the mount point.
type unmounter struct {
	server   *fs.Server
	mnt      string
	writer   *writeback.Writer // nil on read-only mounts
	journals string
	logger   *slog.Logger
	// abandoned counts what the views drop at unmount: directories whose
	// metadata never arrived, and the files written into them.
	abandoned func() (dirs, files int, bytes int64)

	mu       sync.Mutex // serialises the unmounts and the report
	draining bool       // a signal came: unmount as soon as no file is open
	gone     bool       // the mount left the kernel
	reported bool
	report   []string
	code     int
	waiting  []*controlRequest // told the report when it is made
}

// notifySignals returns the channel of the signals that end a mount, to
// give run. Made before mounting: a signal that comes once the mount is
// seen must be counted.
func notifySignals() (sigs chan os.Signal, stop func()) {
	sigs = make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	return sigs, func() { signal.Stop(sigs) }
}

// run handles signals (and ctx) until done is closed (the mount is gone).
func (u *unmounter) run(ctx context.Context, sigs <-chan os.Signal, done <-chan struct{}) {
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	ctxDone, signals := ctx.Done(), 0
	for {
		select {
		case <-done:
			return
		case <-ctxDone:
			ctxDone = nil
			u.drain()
		case <-sigs:
			if signals++; signals == 1 {
				u.drain()
			} else {
				u.force(ctx, nil)
			}
		case <-retry.C:
			u.mu.Lock()
			if u.draining && !u.gone {
				// The serving loops end, and done is closed, once the
				// kernel lets the mount go.
				unmount(u.mnt, false)
			}
			u.mu.Unlock()
		}
	}
}

// drain unmounts now, or as soon as no file is open.
func (u *unmounter) drain() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.draining || u.gone {
		return
	}
	u.draining = true
	u.logger.Info("unmounting", "mountpoint", u.mnt)
	if err := u.server.Unmount(); err != nil {
		u.logger.Warn("mount point busy: serving its open files until they are closed, then unmounting; signal again or run zarrfs umount --force to detach it now", "mountpoint", u.mnt, "error", err)
	}
}

// request answers a `zarrfs umount` (the control socket's handler).
func (u *unmounter) request(ctx context.Context, r *controlRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.reported:
		r.finish(u.report, u.code)
	case u.gone:
		u.waiting = append(u.waiting, r)
	case r.force:
		u.forceLocked(ctx, r)
	default:
		if err := u.server.Unmount(); err != nil {
			r.finish([]string{fmt.Sprintf("%s is busy (a file or directory in it is open); zarrfs umount --force detaches it: %v", u.mnt, err)}, 1)
			return
		}
		u.waiting = append(u.waiting, r)
	}
}

func (u *unmounter) force(ctx context.Context, r *controlRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.gone {
		u.forceLocked(ctx, r)
	}
}

// forceLocked unmounts now: at once when no file is open; otherwise it
// publishes what was written so far and detaches the mount, whose open
// files keep working until they are closed (their writes are published
// then). The caller holds u.mu.
func (u *unmounter) forceLocked(ctx context.Context, r *controlRequest) {
	if u.server.Unmount() == nil {
		if r != nil {
			u.waiting = append(u.waiting, r)
		}
		return
	}
	var lines []string
	code := 0
	if u.writer != nil {
		if err := u.writer.Flush(context.WithoutCancel(ctx)); err != nil {
			lines = append(lines, fmt.Sprintf("publishing failed; the writes stay journaled: %v", err))
			code = 1
		} else if dirs, files, _ := u.abandonedNow(); dirs > 0 {
			lines = append(lines, fmt.Sprintf("published every write acknowledged so far but the %d file(s) in %d directories whose metadata (.zgroup, .zarray or zarr.json) has not arrived", files, dirs))
		} else {
			lines = append(lines, "published every write acknowledged so far")
		}
	}
	if err := unmount(u.mnt, true); err != nil {
		lines = append(lines, fmt.Sprintf("detaching failed: %v", err))
		code = 1
	} else {
		lines = append(lines, "detached; zarrfs publishes what its open files still write and exits when the last is closed")
	}
	for _, l := range lines {
		u.logger.Warn(l, "mountpoint", u.mnt)
	}
	if r != nil {
		r.detached(lines, code)
	}
}

// finish publishes what is left once the mount is gone, and tells the
// waiting umounts what became of the writes; the exit code is 1 when
// some could not be published.
func (u *unmounter) finish(ctx context.Context) int {
	u.mu.Lock()
	u.gone = true
	u.mu.Unlock()
	var lines []string
	code := 0
	dropped, lost := u.droppedLine()
	switch {
	case u.writer == nil:
		lines = append(lines, "read-only: nothing to publish")
	default:
		pending := u.writer.Unpublished()
		err := u.writer.Close(context.WithoutCancel(ctx))
		switch {
		case errors.Is(err, writeback.ErrJournalLost):
			// No replay can happen: say so rather than promise one.
			lines = append(lines, fmt.Sprintf("%d updates could not be published and are lost: %v", u.writer.Unpublished(), err))
			code = 1
		case err != nil:
			lines = append(lines, fmt.Sprintf("%d updates could not be published and stay in the journal under %s (zarrfs recover or the next read-write mount publishes them): %v", u.writer.Unpublished(), u.journals, err))
			code = 1
		case lost:
			lines = append(lines, fmt.Sprintf("published the %d pending updates", pending))
		default:
			lines = append(lines, fmt.Sprintf("published the %d pending updates: every acknowledged write is in the store", pending))
		}
	}
	if dropped != "" {
		lines = append(lines, dropped)
	}
	if lost {
		code = 1
	}
	for _, l := range lines {
		if code == 0 {
			u.logger.Info(l, "mountpoint", u.mnt)
		} else {
			u.logger.Error(l, "mountpoint", u.mnt)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reported, u.report, u.code = true, lines, code
	for _, r := range u.waiting {
		r.finish(lines, code)
	}
	return code
}

// abandonedNow counts the directories whose metadata has not arrived
// and the files in them (none when the views cannot tell).
func (u *unmounter) abandonedNow() (dirs, files int, bytes int64) {
	if u.abandoned == nil {
		return 0, 0, 0
	}
	return u.abandoned()
}

// droppedLine says what the views drop at unmount, "" when nothing; lost
// when that holds a file a close acknowledged (an empty directory holds no
// write).
func (u *unmounter) droppedLine() (line string, lost bool) {
	dirs, files, bytes := u.abandonedNow()
	if dirs == 0 {
		return "", false
	}
	return fmt.Sprintf("dropped %d directories made in the mount, holding %d file(s) of %d bytes: their metadata (.zgroup, .zarray or zarr.json) never arrived, so they are not in the store (the log names each)", dirs, files, bytes), files > 0
}

// umountVia asks the mount process of mnt to unmount and relays its
// report; ok is false when no mount process answers there.
func umountVia(mnt string, force bool, stdout, stderr io.Writer) (code int, ok bool) {
	path, err := controlPath(mnt)
	if err != nil || privateDir(filepath.Dir(path)) != nil {
		return 0, false
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return 0, false
	}
	defer conn.Close()
	cred, err := peerCred(conn)
	if err != nil {
		return fail(stderr, fmt.Errorf("umount %s: %v", mnt, err)), true
	}
	req := "umount"
	if force {
		req += " --force"
	}
	fmt.Fprintln(conn, req)
	sc := bufio.NewScanner(conn)
	code = -1
	detached := false
	for sc.Scan() {
		last, n, _ := strings.Cut(sc.Text(), " ")
		if last == "exit" || last == "detached" {
			code, _ = strconv.Atoi(n)
			detached = last == "detached"
			break
		}
		fmt.Fprintln(stdout, sc.Text())
	}
	if code == -1 {
		return fail(stderr, fmt.Errorf("umount %s: the mount process ended without a report: its journal holds what it did not publish", mnt)), true
	}
	if code != 0 {
		return fail(stderr, fmt.Errorf("umount %s failed", mnt)), true
	}
	if !detached && int(cred.Pid) != os.Getpid() {
		waitExit(int(cred.Pid))
	}
	return 0, true
}

// waitExit waits (a minute at most) until process pid has exited.
func waitExit(pid int) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		// The state follows the command name in parentheses; Z: exited,
		// not yet reaped by its parent.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i:]), ") Z") {
			return
		}
	}
}
