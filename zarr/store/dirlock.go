package store

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// lockSuffix names the lock file of a key. The protocol is tensorstore's
// file kvstore's: lock "<key>.__lock" with an OFD lock, confirm it is
// still the file at that name, write the new value into it, sync it and
// rename it onto the key. Writers using either implementation exclude
// each other, and readers only ever see whole values.
const lockSuffix = ".__lock"

// Update read-modify-writes key under its lock file: fn runs once, and
// patches are written in place.
func (d *Dir) Update(ctx context.Context, key string, fn func(cur Object) (Change, error)) error {
	dir, err := d.makeParent(key)
	if err != nil {
		return err
	}
	lock, err := d.lock(ctx, key+lockSuffix)
	if err != nil {
		return mapErr(key, err)
	}
	defer lock.Close() // releases the OFD lock
	change, err := d.withCurrent(key, fn)
	if err != nil {
		d.root.Remove(key + lockSuffix)
		return err
	}
	if err := d.apply(key, lock, change); err != nil {
		d.root.Remove(key + lockSuffix)
		return mapErr(key, err)
	}
	return mapErr(key, d.syncDir(dir))
}

// lock opens and locks the lock file at name, retrying while other
// updaters rename it away under us.
func (d *Dir) lock(ctx context.Context, name string) (*os.File, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := d.root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		if errors.Is(err, fs.ErrNotExist) { // a Prune removed the directory just made
			if _, err = d.makeParent(name); err == nil {
				f, err = d.root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
			}
		}
		if err != nil {
			return nil, err
		}
		if err := ofdLock(f, true); err != nil {
			f.Close()
			return nil, err
		}
		held, err1 := f.Stat()
		current, err2 := d.root.Lstat(name)
		if err1 == nil && err2 == nil && os.SameFile(held, current) {
			return f, nil
		}
		f.Close() // the previous holder published it as the value: retry
	}
}

// withCurrent calls fn with the current value of key.
func (d *Dir) withCurrent(key string, fn func(Object) (Change, error)) (Change, error) {
	cur, err := d.open(key)
	if errors.Is(err, ErrNotFound) {
		return fn(nil)
	}
	if err != nil {
		return Change{}, err
	}
	defer cur.Close()
	return fn(cur)
}

// apply carries out a change while the lock is held.
func (d *Dir) apply(key string, lock *os.File, c Change) error {
	lockName := key + lockSuffix
	switch {
	case c.Value != nil:
		if err := lock.Truncate(0); err != nil {
			return err
		}
		if _, err := writeSynced(lock, c.Value); err != nil {
			return err
		}
		return d.root.Rename(lockName, key)
	case c.Delete:
		if err := d.root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	case len(c.Patches) > 0:
		f, err := d.root.OpenFile(key, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		for _, p := range c.Patches {
			if _, err := f.WriteAt(p.Data, p.Offset); err != nil {
				f.Close()
				return err
			}
		}
		err = unix.Fdatasync(int(f.Fd()))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return d.root.Remove(lockName)
}

// ofdLock takes an exclusive open-file-description lock on the whole file.
// Unlike classic POSIX locks it belongs to the open file, not the process,
// so it excludes threads of one process too and is not dropped when some
// other descriptor of the file is closed.
func ofdLock(f *os.File, wait bool) error {
	cmd := unix.F_OFD_SETLK
	if wait {
		cmd = unix.F_OFD_SETLKW
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	for {
		err := unix.FcntlFlock(f.Fd(), cmd, &lk)
		if err != unix.EINTR {
			return err
		}
	}
}

// TryLock takes the exclusive OFD lock of an open file without waiting; it
// reports false when another open file holds it.
func TryLock(f *os.File) (bool, error) {
	err := ofdLock(f, false)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		return false, nil
	}
	return err == nil, err
}

// Locked reports whether another open file holds an OFD lock on f,
// without taking one, so a reader that may not write (or must not keep a
// writer from taking the lock later) can still tell.
func Locked(f *os.File) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}

// iovMax is the most buffers one vectored write takes (Linux's UIO_MAXIOV).
const iovMax = 1024

// WriteParts writes parts one after another into f at off with vectored
// writes, as few as the kernel's limit on buffers per call allows, and
// returns how many bytes it wrote.
func WriteParts(f *os.File, off int64, parts [][]byte) (int64, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	parts = slices.Clone(parts) // trimmed below as they are written
	var written int64
	for {
		for len(parts) > 0 && len(parts[0]) == 0 {
			parts = parts[1:]
		}
		if len(parts) == 0 {
			return written, nil
		}
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Pwritev(int(fd), parts[:min(len(parts), iovMax)], off+written)
			return true
		}); err != nil {
			return written, err
		}
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			return written, &os.PathError{Op: "pwritev", Path: f.Name(), Err: werr}
		}
		if n == 0 {
			return written, &os.PathError{Op: "pwritev", Path: f.Name(), Err: io.ErrShortWrite}
		}
		written += int64(n)
		for n > 0 {
			k := min(n, len(parts[0]))
			parts[0], n = parts[0][k:], n-k
			if len(parts[0]) == 0 {
				parts = parts[1:]
			}
		}
	}
}
