package store

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Renamer is implemented by stores that move every key below one prefix
// to another at once, readers seeing all of them at one prefix or all at
// the other: a local directory store, with one rename(2).
type Renamer interface {
	// RenamePrefix moves the keys below from to below to, failing with
	// ErrPrecondition when anything is at to already.
	RenamePrefix(ctx context.Context, from, to string) error
}

var _ Renamer = (*Dir)(nil)

// RenamePrefix renames the directory from to to (renameat2 with
// RENAME_NOREPLACE) and syncs both parent directories. Every directory on
// the way to either is opened without following a symbolic link, so the
// rename never reaches out of the store nor through a link within it.
func (d *Dir) RenamePrefix(ctx context.Context, from, to string) error {
	if err := d.writable(from); err != nil {
		return err
	}
	if err := d.writable(to); err != nil {
		return err
	}
	if from == to || strings.HasPrefix(to, from+"/") {
		return fmt.Errorf("%w: %s cannot move into itself (%s)", ErrInvalidKey, from, to)
	}
	srcDir, err := d.openDirNoFollow(path.Dir(from))
	if err != nil {
		return mapErr(from, err)
	}
	defer unix.Close(srcDir)
	dstDir, err := d.openDirNoFollow(path.Dir(to))
	if err != nil {
		return mapErr(to, err)
	}
	defer unix.Close(dstDir)
	err = unix.Renameat2(srcDir, path.Base(from), dstDir, path.Base(to), unix.RENAME_NOREPLACE)
	switch {
	case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
		return fmt.Errorf("%w: %s exists", ErrPrecondition, to)
	case err != nil:
		return mapErr(from, err)
	}
	if err := unix.Fsync(dstDir); err != nil {
		return mapErr(to, err)
	}
	return mapErr(from, unix.Fsync(srcDir))
}

// openDirNoFollow opens the directory at dir ("." for the root) of the
// store, one element at a time, refusing a symbolic link anywhere.
func (d *Dir) openDirNoFollow(dir string) (int, error) {
	root, err := d.root.Open(".")
	if err != nil {
		return -1, err
	}
	fd, err := unix.Dup(int(root.Fd()))
	root.Close()
	if err != nil {
		return -1, err
	}
	if dir == "." {
		return fd, nil
	}
	for _, name := range strings.Split(dir, "/") {
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		var st unix.Stat_t
		if err != nil && unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = fmt.Errorf("%w %q: a symbolic link on the way", ErrInvalidKey, dir)
		}
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("%s: %w", dir, err)
		}
		fd = next
	}
	return fd, nil
}
