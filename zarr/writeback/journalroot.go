package writeback

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// JournalRoot is the directory journals live in. Stores arrive as archives
// and live in shared directories, so what is under it may have been put
// there by someone else: it is opened without following symbolic links,
// every file and directory under it is reached through os.Root (nothing
// leads out of it), and only what zarrfs recognises as its own is removed.
type JournalRoot struct {
	root *os.Root
	path string
}

// ErrUntrusted: a directory zarrfs would keep its state in is not one it
// may use.
var ErrUntrusted = errors.New("not a private directory of this user")

// OpenJournalRoot opens base/sub[0]/sub[1]/... . base is used as named (the
// user chose it); each of sub must be a plain directory (not a symbolic
// link) owned by this process's user and not writable by group or others.
// With create, missing ones are made 0700; without, a missing one gives
// (nil, nil): there are no journals.
func OpenJournalRoot(base string, create bool, sub ...string) (*JournalRoot, error) {
	r, err := os.OpenRoot(base)
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p := base
	for _, name := range sub {
		p = filepath.Join(p, name)
		next, err := openPrivateDir(r, name, create)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if next == nil {
			return nil, nil
		}
		r = next
	}
	return &JournalRoot{root: r, path: p}, nil
}

// LocalJournalRoot opens the journal directory inside the local store at
// dir, dir/.zarrfs/journal, where every mount of the store finds it.
func LocalJournalRoot(dir string, create bool) (*JournalRoot, error) {
	return OpenJournalRoot(dir, create, store.StateDir, "journal")
}

// String is the root's path.
func (r *JournalRoot) String() string { return r.path }

// Close releases the directory.
func (r *JournalRoot) Close() error { return r.root.Close() }

// openPrivateDir opens the directory name in r without following a
// symbolic link, after checking it is private to this user; with create,
// it is made 0700 when missing. A missing one without create is (nil, nil).
func openPrivateDir(r *os.Root, name string, create bool) (*os.Root, error) {
	if create {
		if err := r.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := private(fi); err != nil {
		return nil, err
	}
	sub, err := r.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	// name may have been replaced between the check and the open: the
	// directory opened must be the one checked.
	if got, err := sub.Stat("."); err != nil || !os.SameFile(got, fi) {
		sub.Close()
		return nil, fmt.Errorf("%w: replaced while being opened", ErrUntrusted)
	}
	return sub, nil
}

// private checks that fi is a directory only this process's user can
// change.
func private(fi fs.FileInfo) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: a symbolic link", ErrUntrusted)
	case !fi.IsDir():
		return fmt.Errorf("%w: not a directory", ErrUntrusted)
	case st == nil || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%w: owned by uid %d, not by uid %d", ErrUntrusted, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%w: writable by group or others (mode %#o)", ErrUntrusted, fi.Mode().Perm())
	}
	return nil
}

// openRegular opens name in r for reading, or for reading and writing,
// and checks it is a regular file. O_NONBLOCK keeps a FIFO planted in its
// place from blocking the open; r keeps a symbolic link from leading out.
func openRegular(r *os.Root, name string, write bool) (*os.File, error) {
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	f, err := r.OpenFile(name, flag|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return f, nil
}

// ownerMagic is the content of a journal's owner file: what marks a
// directory as a journal zarrfs made.
const ownerMagic = "zarrfs journal 1\n"

// openOwner opens the owner file of the journal directory dir and checks
// that zarrfs wrote it: marked, or empty as zarrfs wrote it before it
// marked them (their journals may hold acknowledged writes).
func openOwner(dir *os.Root, write bool) (*os.File, error) {
	f, err := openRegular(dir, ownerFile, write)
	if err != nil {
		return nil, err
	}
	b := make([]byte, len(ownerMagic)+1)
	n, err := io.ReadFull(f, b)
	if (err != nil && err != io.ErrUnexpectedEOF && err != io.EOF) || n > 0 && string(b[:n]) != ownerMagic {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a zarrfs journal's owner file", ErrUntrusted, ownerFile)
	}
	return f, nil
}

// syncRoot makes the entries created in r durable.
func syncRoot(r *os.Root) error {
	f, err := r.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
