package writeback

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// JournalRoot is the directory journals live in. Stores arrive as archives
// and live in shared directories, so what is under it may have been put
// there by someone else: it is opened without following symbolic links,
// every file and directory under it is reached through os.Root (nothing
// leads out of it), and only what zarrfs recognises as its own is removed.
//
// Every journal names the store its writes belong to, and is replayed into
// that store only. The journals of remote stores share a base directory
// (--journal-dir), one directory per store: a journal of the store found
// in another store's directory (moved there) is still the store's, and the
// journals of the same bucket and prefix through another endpoint are
// found to be named (Strays).
type JournalRoot struct {
	root *os.Root // nil: the store's directory does not exist (yet)
	path string
	// store is what journals made here name, and what the journals
	// replayed from here must name (inStore for a local store's).
	store string
	// base holds the directories of every remote store's journals (nil
	// for the journals inside a local store); name is this root's there.
	base     *os.Root
	basePath string
	name     string
}

// inStore is the store the journals inside a local store name: the store
// holding them, wherever it was moved (they move with it, and no other
// user can move them out of its private state directory).
const inStore = "."

// ErrUntrusted: a directory zarrfs would keep its state in is not one it
// may use.
var ErrUntrusted = errors.New("not a private directory of this user")

// openJournalRoot opens base/sub[0]/sub[1]/... . base is used as named;
// each of sub must be a plain directory (not a symbolic link) owned by
// this process's user and not writable by group or others. With create,
// missing ones are made 0700; without, a missing one gives (nil, nil):
// there are no journals.
func openJournalRoot(base string, create bool, sub ...string) (*JournalRoot, error) {
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
	r, err := openJournalRoot(dir, create, store.StateDir, "journal")
	if r != nil {
		r.store = inStore
	}
	return r, err
}

// StoreJournalRoot opens the journal directory of the remote store named
// identity (its String) under base, the directory holding every remote
// store's journals (--journal-dir): base/NAME, NAME a hash of identity.
// No other user may be able to change base: it and every directory above
// it must belong to this user or root, and none may be writable by others
// but one with the sticky bit above base (/tmp), where others cannot move
// what they do not own; otherwise ErrUntrusted says why. With create,
// base and the store's directory are made (0700) where missing; without,
// a missing base gives (nil, nil): there are no journals.
func StoreJournalRoot(base, identity string, create bool) (*JournalRoot, error) {
	if create {
		if err := os.MkdirAll(base, 0o700); err != nil {
			return nil, fmt.Errorf("journal directory: %w", err)
		}
	}
	if err := checkBase(base); err != nil {
		if errors.Is(err, fs.ErrNotExist) && !create {
			return nil, nil
		}
		return nil, fmt.Errorf("journal directory %s: %w", base, err)
	}
	b, err := os.OpenRoot(base)
	if err != nil {
		return nil, fmt.Errorf("journal directory: %w", err)
	}
	name := storeDirName(identity)
	r := &JournalRoot{path: filepath.Join(base, name), store: identity, base: b, basePath: base, name: name}
	if r.root, err = openPrivateDir(b, name, create); err != nil {
		b.Close()
		return nil, fmt.Errorf("%s: %w", r.path, err)
	}
	return r, nil
}

// storeDirName is the name of a remote store's journal directory under
// the base: a hash of its identity.
func storeDirName(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return hex.EncodeToString(sum[:8])
}

// isStoreDirName reports whether name can be a store's journal directory.
func isStoreDirName(name string) bool {
	_, err := hex.DecodeString(name)
	return err == nil && len(name) == 16 && strings.ToLower(name) == name
}

// checkBase checks that no user but this one and root can change what is
// in the directory at path, or which directory path leads to: path, and
// each directory above it, as named and with symbolic links resolved,
// belongs to this user or root; path is writable by no one else, and a
// directory above it only with the sticky bit set. A symbolic link on
// the way must belong to this user or root too.
func checkBase(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	for _, p := range []string{abs, resolved} {
		for dir, top := p, true; ; dir, top = filepath.Dir(dir), false {
			fi, err := os.Lstat(dir)
			if err != nil {
				return err
			}
			if err := trusted(dir, fi, top); err != nil {
				return err
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
	}
	return nil
}

// trusted checks the directory (or symbolic link) dir on the way to a
// journal base: owned by this user or root, and, when it is the base,
// writable by no one else, else by others only with the sticky bit.
func trusted(dir string, fi fs.FileInfo, base bool) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	uid := os.Geteuid()
	switch {
	case st == nil:
		return fmt.Errorf("%w: %s: no owner", ErrUntrusted, dir)
	case int(st.Uid) != uid && st.Uid != 0:
		return fmt.Errorf("%w: %s is owned by uid %d, not by uid %d or root: that user can move the journals in it", ErrUntrusted, dir, st.Uid, uid)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrUntrusted, dir)
	case fi.Mode().Perm()&0o022 != 0 && (base || fi.Mode()&fs.ModeSticky == 0):
		return fmt.Errorf("%w: %s is writable by group or others (mode %v): they can move the journals in it", ErrUntrusted, dir, fi.Mode())
	}
	return nil
}

// String is the root's path.
func (r *JournalRoot) String() string { return r.path }

// Close releases the directories.
func (r *JournalRoot) Close() error {
	var err error
	if r.root != nil {
		err = r.root.Close()
	}
	if r.base != nil {
		err = errors.Join(err, r.base.Close())
	}
	return err
}

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

// ownerMagic starts a journal's owner file, what marks a directory as a
// journal zarrfs made; the line after it names the store the journal's
// writes belong to (ownerContent). legacyOwnerMagic is what journals held
// before they named their store (or they were empty): they are replayed
// only from their store's own directory (JournalRoot).
const (
	ownerMagic       = "zarrfs journal 2\n"
	legacyOwnerMagic = "zarrfs journal 1\n"
	maxOwnerSize     = 64 << 10
)

// ownerContent is the content of the owner file of a journal of store.
func ownerContent(store string) string {
	return ownerMagic + "store " + strconv.Quote(store) + "\n"
}

// openOwner opens the owner file of the journal directory dir, checks
// that zarrfs wrote it and returns the store it names ("" for a journal
// made before journals named their store).
func openOwner(dir *os.Root, write bool) (*os.File, string, error) {
	f, err := openRegular(dir, ownerFile, write)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxOwnerSize))
	if err == nil {
		store, ok := parseOwner(string(b))
		if ok {
			return f, store, nil
		}
		err = fmt.Errorf("%w: %s is not a zarrfs journal's owner file", ErrUntrusted, ownerFile)
	}
	f.Close()
	return nil, "", err
}

// parseOwner reads an owner file's content: the store it names, "" for
// a legacy one; ok is false for what zarrfs did not write.
func parseOwner(b string) (store string, ok bool) {
	if b == "" || b == legacyOwnerMagic {
		return "", true
	}
	line, found := strings.CutPrefix(b, ownerMagic+"store ")
	quoted, end := strings.CutSuffix(line, "\n")
	if !found || !end || strings.Contains(quoted, "\n") {
		return "", false
	}
	store, err := strconv.Unquote(quoted)
	return store, err == nil && store != ""
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
