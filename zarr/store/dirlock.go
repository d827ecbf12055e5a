package store

import (
	"context"
	"errors"
	"fmt"
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
// patches are written in place where that changes nothing but the value.
func (d *Dir) Update(ctx context.Context, key string, fn func(cur Object) (Change, error)) error {
	err := d.update(ctx, key, fn)
	if errors.Is(err, errPruned) {
		err = d.update(ctx, key, fn)
	}
	return mapErr(key, err)
}

// errPruned: a Prune removed the directory Update made before it could
// take its lock; fn has not run.
var errPruned = errors.New("directory removed")

func (d *Dir) update(ctx context.Context, key string, fn func(cur Object) (Change, error)) error {
	dir, name, err := d.parent(key, true)
	if err != nil {
		return err
	}
	defer dir.Close()
	lockName := name + lockSuffix
	lock, err := lockAt(ctx, dir, lockName)
	if errors.Is(err, fs.ErrNotExist) {
		return errPruned
	}
	if err != nil {
		return fmt.Errorf("%s: %w", key+lockSuffix, err)
	}
	defer lock.Close() // releases the OFD lock
	cur, err := d.current(dir, key, name)
	if err != nil {
		unix.Unlinkat(fd(dir), lockName, 0)
		return err
	}
	var change Change
	if cur == nil {
		change, err = fn(nil)
	} else {
		defer cur.Close()
		change, err = fn(cur)
	}
	if err == nil {
		err = apply(dir, name, lock, cur, change)
	}
	if err != nil {
		unix.Unlinkat(fd(dir), lockName, 0)
		return err
	}
	return dir.Sync()
}

// lockAt opens and locks the lock file name in dir, retrying while other
// updaters rename it away under us. A lock file that is not a plain file
// of its own (a symbolic link, another kind of file, or a file with other
// links: a hard link planted to a value elsewhere, which writing the new
// value into the lock file would change) is refused.
func lockAt(ctx context.Context, dir *os.File, name string) (*os.File, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := openAt(dir, name, unix.O_RDWR|unix.O_CREAT)
		if errors.Is(err, unix.ELOOP) {
			return nil, errors.New("the lock file is a symbolic link")
		}
		if err != nil {
			return nil, err
		}
		if err := ofdLock(f, true); err != nil {
			f.Close()
			return nil, err
		}
		var held, current unix.Stat_t
		err1 := unix.Fstat(int(f.Fd()), &held)
		err2 := unix.Fstatat(fd(dir), name, &current, unix.AT_SYMLINK_NOFOLLOW)
		if err1 == nil && err2 == nil && held.Dev == current.Dev && held.Ino == current.Ino {
			if err := plainFile(&held); err != nil {
				f.Close()
				return nil, fmt.Errorf("the lock file %w", err)
			}
			return f, nil
		}
		f.Close() // the previous holder published it as the value: retry
	}
}

// plainFile refuses a file that is not a regular file with one link: what
// is written into it would change another name's value too.
func plainFile(st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("is not a regular file (mode %o)", st.Mode)
	}
	if st.Nlink != 1 {
		return fmt.Errorf("has %d links", st.Nlink)
	}
	return nil
}

// current opens the value of key, the file name in dir, as a reader of
// the store would: a symbolic link at name is followed within the store.
// It returns nil when there is none.
func (d *Dir) current(dir *os.File, key, name string) (*dirFile, error) {
	f, err := openAt(dir, name, unix.O_RDONLY)
	if errors.Is(err, unix.ELOOP) {
		cur, err := d.open(key)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		return cur, err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = fmt.Errorf("%w: %s is a directory", ErrNotFound, key)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &dirFile{File: f, info: fileInfo(fi)}, nil
}

// apply carries out a change of the file name in dir, whose value was cur,
// while the lock file is held: a new value is written into the lock file,
// which is renamed onto name. Patches are written in place only into the
// very file cur read when it is a plain file of its own; the value behind
// a symbolic link, or with other hard links (another key's, a snapshot's
// outside the store), is copied into the lock file with the patches
// applied and renamed onto name instead, so that only key changes.
func apply(dir *os.File, name string, lock *os.File, cur *dirFile, c Change) error {
	lockName := name + lockSuffix
	switch {
	case c.Value != nil:
		if err := lock.Truncate(0); err != nil {
			return err
		}
		if _, err := writeSynced(lock, c.Value); err != nil {
			return err
		}
		return unix.Renameat(fd(dir), lockName, fd(dir), name)
	case c.Delete:
		if err := unix.Unlinkat(fd(dir), name, 0); err != nil && err != unix.ENOENT {
			return &os.PathError{Op: "unlink", Path: name, Err: err}
		}
	case len(c.Patches) > 0:
		if cur == nil {
			return fmt.Errorf("%w: no value to patch", ErrNotFound)
		}
		f, err := patchable(dir, name, cur)
		if err != nil {
			return err
		}
		if f == nil {
			return copyPatched(dir, name, lock, cur, c.Patches)
		}
		err = patch(f, c.Patches)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return unix.Unlinkat(fd(dir), lockName, 0)
}

// patchable opens the file name in dir for patches in place when it is
// the file cur read, a regular file with no other link; nil otherwise.
func patchable(dir *os.File, name string, cur *dirFile) (*os.File, error) {
	f, err := openAt(dir, name, unix.O_WRONLY)
	if errors.Is(err, unix.ELOOP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st, read unix.Stat_t
	err1 := unix.Fstat(int(f.Fd()), &st)
	err2 := unix.Fstat(int(cur.Fd()), &read)
	if err1 != nil || err2 != nil || st.Dev != read.Dev || st.Ino != read.Ino || plainFile(&st) != nil {
		f.Close()
		return nil, errors.Join(err1, err2)
	}
	return f, nil
}

// patch writes patches into f and syncs it.
func patch(f *os.File, patches []Patch) error {
	for _, p := range patches {
		if _, err := f.WriteAt(p.Data, p.Offset); err != nil {
			return err
		}
	}
	return unix.Fdatasync(int(f.Fd()))
}

// copyPatched writes cur's value with the patches applied into the lock
// file and renames it onto name.
func copyPatched(dir *os.File, name string, lock *os.File, cur *dirFile, patches []Patch) error {
	size := cur.info.Size
	for _, p := range patches {
		if p.Offset < 0 || p.Offset+int64(len(p.Data)) > size {
			return fmt.Errorf("patch of %d bytes at %d lies outside the value's %d bytes", len(p.Data), p.Offset, size)
		}
	}
	if err := lock.Truncate(0); err != nil {
		return err
	}
	if _, err := io.Copy(lock, io.NewSectionReader(cur, 0, size)); err != nil {
		return err
	}
	if err := patch(lock, patches); err != nil {
		return err
	}
	return unix.Renameat(fd(dir), name+lockSuffix, fd(dir), name)
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
