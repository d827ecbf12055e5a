package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// tempMarker is part of the names of files Put writes before renaming them
// into place; listings hide them, as they hide Update's lock files.
const tempMarker = ".zarrfs-tmp-"

// Dir is a store in a local directory. All access goes through os.Root,
// so symbolic links that lead out of the directory are refused.
type Dir struct {
	root     *os.Root
	path     string
	readOnly bool
}

var (
	_ Store   = (*Dir)(nil)
	_ Lister  = (*Dir)(nil)
	_ Writer  = (*Dir)(nil)
	_ Opener  = (*Dir)(nil)
	_ Updater = (*Dir)(nil)
)

// OpenDir opens the directory at dir as a store.
func OpenDir(dir string, readOnly bool) (*Dir, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &Dir{root: root, path: dir, readOnly: readOnly}, nil
}

// Path is the absolute path of the directory.
func (d *Dir) Path() string { return d.path }

// String is the directory's absolute path.
func (d *Dir) String() string { return d.path }

// Close releases the directory.
func (d *Dir) Close() error { return d.root.Close() }

// Remote is false: the values are local files.
func (d *Dir) Remote() bool { return false }

// ReadOnly reports whether the store refuses changes.
func (d *Dir) ReadOnly() bool { return d.readOnly }

// mapErr turns file-system errors into store errors naming the key.
func mapErr(key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrReadOnly):
		return err // names the key already
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	case strings.Contains(err.Error(), "escapes from parent"):
		// os.Root's error for symlinks and paths leading out of the root.
		return fmt.Errorf("%w %q: leads out of the store", ErrInvalidKey, key)
	}
	return fmt.Errorf("%s: %w", key, err)
}

// Get reads span of the value at key from one open file, so the bytes and
// the Info describe the same generation.
func (d *Dir) Get(ctx context.Context, key string, span Span, cond Cond) ([]byte, Info, error) {
	if cond.IfNoneMatch != "" && cond.IfNoneMatch != AnyGeneration {
		// Revalidation of an unchanged value costs one stat.
		if info, err := d.Stat(ctx, key); err == nil && info.Generation == cond.IfNoneMatch {
			return nil, info, fmt.Errorf("%w: %s", ErrNotModified, key)
		}
	}
	f, err := d.open(key)
	if err != nil {
		return nil, Info{}, err
	}
	defer f.Close()
	if err := cond.Check(key, true, f.info); err != nil {
		return nil, f.info, err
	}
	off, n, err := span.Resolve(f.info.Size)
	if err != nil {
		return nil, f.info, fmt.Errorf("%s: %w", key, err)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil && !(err == io.EOF) {
		return nil, f.info, mapErr(key, err)
	}
	return b, f.info, nil
}

// ReadAt reads from the file at key after checking its generation.
func (d *Dir) ReadAt(_ context.Context, key string, gen Generation, p []byte, off int64) error {
	f, err := d.open(key)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := (Cond{IfMatch: gen}).Check(key, true, f.info); err != nil {
		return err
	}
	if _, err := f.ReadAt(p, off); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return mapErr(key, err)
	}
	return nil
}

// Stat describes the value at key.
func (d *Dir) Stat(_ context.Context, key string) (Info, error) {
	if err := ValidateKey(key); err != nil {
		return Info{}, err
	}
	fi, err := d.root.Stat(key)
	if err != nil {
		return Info{}, mapErr(key, err)
	}
	if fi.IsDir() {
		return Info{}, fmt.Errorf("%w: %s is a directory", ErrNotFound, key)
	}
	return fileInfo(fi), nil
}

// fileInfo describes a file; its generation is device, inode, mtime and
// size, which change when it is replaced or written.
func fileInfo(fi fs.FileInfo) Info {
	info := Info{Size: fi.Size(), ModTime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.Generation = Generation(fmt.Sprintf("%x:%x:%x:%x", st.Dev, st.Ino, fi.ModTime().UnixNano(), fi.Size()))
	} else {
		info.Generation = Generation(fmt.Sprintf("%x:%x", fi.ModTime().UnixNano(), fi.Size()))
	}
	return info
}

// Put writes the parts to a temporary file next to key, syncs it, renames
// it onto key and syncs the directory, so the value is replaced atomically
// and survives a crash once Put returns. A conditional Put holds the key's
// update lock, so it excludes Update and other conditional writers.
func (d *Dir) Put(ctx context.Context, key string, parts [][]byte, cond Cond) (Info, error) {
	if cond != (Cond{}) {
		var info Info
		err := d.Update(ctx, key, func(cur Object) (Change, error) {
			if err := checkCurrent(key, cur, cond); err != nil {
				return Change{}, err
			}
			return Change{Value: parts}, nil
		})
		if err != nil {
			return Info{}, err
		}
		info, err = d.Stat(ctx, key)
		return info, err
	}
	info, err := d.put(key, parts)
	if errors.Is(err, fs.ErrNotExist) { // a Prune removed the directory just made
		info, err = d.put(key, parts)
	}
	return info, mapErr(key, err)
}

// put writes parts into a fresh temporary file in key's directory and
// renames it onto key's name there: the name is replaced, never a file
// it links to.
func (d *Dir) put(key string, parts [][]byte) (Info, error) {
	dir, name, err := d.parent(key, true)
	if err != nil {
		return Info{}, err
	}
	defer dir.Close()
	tmp := tempName(name)
	f, err := openAt(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
	if err != nil {
		return Info{}, err
	}
	info, err := writeSynced(f, parts)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(fd(dir), tmp, fd(dir), name)
	}
	if err != nil {
		unix.Unlinkat(fd(dir), tmp, 0)
		return Info{}, err
	}
	return info, dir.Sync()
}

// writeSynced writes parts into the empty file f, syncs it and describes it.
func writeSynced(f *os.File, parts [][]byte) (Info, error) {
	if _, err := WriteParts(f, 0, parts); err != nil {
		return Info{}, err
	}
	if err := f.Sync(); err != nil {
		return Info{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		return Info{}, err
	}
	return fileInfo(fi), nil
}

// checkCurrent applies cond to the value Update found.
func checkCurrent(key string, cur Object, cond Cond) error {
	if cur == nil {
		return cond.Check(key, false, Info{})
	}
	return cond.Check(key, true, cur.Info())
}

// parent checks that key may be written and opens the directory it goes
// in, making the missing ones when create is set, and returns it with
// key's last element. Each element is opened on its own without following
// a symbolic link (O_NOFOLLOW), relative to the one before, so a write
// never goes through a link, inside the store or out of it, even one
// planted while it runs: a key with a link on the way is refused naming
// it. Writes then name the file relative to the directory (openat,
// renameat, unlinkat).
func (d *Dir) parent(key string, create bool) (*os.File, string, error) {
	if err := d.writable(key); err != nil {
		return nil, "", err
	}
	dir, err := d.root.Open(".")
	if err != nil {
		return nil, "", err
	}
	elems := strings.Split(key, "/")
	for i, elem := range elems[:len(elems)-1] {
		if create {
			if err := unix.Mkdirat(fd(dir), elem, 0o755); err != nil && err != unix.EEXIST {
				dir.Close()
				return nil, "", &os.PathError{Op: "mkdir", Path: key, Err: err}
			}
		}
		next, err := openAt(dir, elem, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil && isSymlink(dir, elem) {
			err = fmt.Errorf("%w %q: %s is a symbolic link, and zarrfs does not write through links", ErrInvalidKey, key, strings.Join(elems[:i+1], "/"))
		}
		dir.Close()
		if err != nil {
			return nil, "", err
		}
		dir = next
	}
	return dir, elems[len(elems)-1], nil
}

// openAt opens name in the directory dir with flags, never following a
// symbolic link at name (ELOOP).
func openAt(dir *os.File, name string, flags int) (*os.File, error) {
	for {
		n, err := unix.Openat(fd(dir), name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(n), name), nil
	}
}

// isSymlink reports whether name in dir is a symbolic link.
func isSymlink(dir *os.File, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(fd(dir), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// fd is the descriptor of an open directory.
func fd(dir *os.File) int { return int(dir.Fd()) }

// tempName returns a fresh hidden name for a file that becomes name.
func tempName(name string) string {
	var r [8]byte
	rand.Read(r[:])
	return "." + name + tempMarker + hex.EncodeToString(r[:])
}

// SyncDir syncs the directory at dir, so that entries created or renamed
// in it survive a crash.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (d *Dir) writable(key string) error {
	if d.readOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, key)
	}
	return ValidateKey(key)
}

// Delete removes the value at key and syncs its directory; a conditional
// Delete holds the key's update lock.
func (d *Dir) Delete(ctx context.Context, key string, cond Cond) error {
	if err := d.writable(key); err != nil {
		return err
	}
	if cond != (Cond{}) {
		return d.Update(ctx, key, func(cur Object) (Change, error) {
			if err := checkCurrent(key, cur, cond); err != nil {
				return Change{}, err
			}
			return Change{Delete: true}, nil
		})
	}
	dir, name, err := d.parent(key, false)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return mapErr(key, err)
	}
	defer dir.Close()
	switch err := unix.Unlinkat(fd(dir), name, 0); {
	case err == unix.EISDIR:
		return fmt.Errorf("%s: is a directory, not a value", key)
	case err == unix.ENOENT:
		return nil
	case err != nil:
		return mapErr(key, err)
	}
	return mapErr(key, dir.Sync())
}

// List yields every key below prefix, directory by directory.
func (d *Dir) List(ctx context.Context, prefix string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if err := ValidatePrefix(prefix); err != nil {
			yield("", err)
			return
		}
		d.walk(ctx, strings.TrimSuffix(prefix, "/"), yield)
	}
}

// walk yields the keys below dir; it returns false when the consumer stopped.
func (d *Dir) walk(ctx context.Context, dir string, yield func(string, error) bool) bool {
	for e, err := range d.ListDir(ctx, dir) {
		if err != nil {
			return yield("", err)
		}
		key := Join(dir, e.Name)
		if e.Dir {
			if !d.walk(ctx, key, yield) {
				return false
			}
		} else if !yield(key, nil) {
			return false
		}
	}
	return true
}

// ListDir yields the children of prefix, sorted by name within batches of
// 4096 so huge directories stream. A missing prefix has no children.
func (d *Dir) ListDir(ctx context.Context, prefix string) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		if err := ValidatePrefix(prefix); err != nil {
			yield(Entry{}, err)
			return
		}
		dir := strings.TrimSuffix(prefix, "/")
		if dir == "" {
			dir = "."
		}
		f, err := d.root.Open(dir)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return
		}
		if err != nil {
			yield(Entry{}, mapErr(prefix, err))
			return
		}
		defer f.Close()
		for {
			if err := ctx.Err(); err != nil {
				yield(Entry{}, err)
				return
			}
			batch, err := f.ReadDir(4096)
			slices.SortFunc(batch, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
			for _, de := range batch {
				name := de.Name()
				if hidden(dir, name) {
					continue
				}
				isDir := de.IsDir()
				if de.Type()&fs.ModeSymlink != 0 {
					fi, err := d.root.Stat(Join(prefix, name))
					if errors.Is(mapErr(name, err), ErrInvalidKey) {
						// Listed, so that reading it fails naming the key
						// instead of the value silently missing.
						fi, err = os.Stat(filepath.Join(d.path, filepath.FromSlash(Join(prefix, name))))
					}
					if err != nil {
						continue // dangling
					}
					isDir = fi.IsDir()
				}
				if !yield(Entry{Name: name, Dir: isDir}, nil) {
					return
				}
			}
			if err == io.EOF || len(batch) == 0 {
				return
			}
			if err != nil {
				yield(Entry{}, mapErr(prefix, err))
				return
			}
		}
	}
}

// hidden reports whether a name in directory dir is store machinery rather
// than a key: temporary files of Put, lock files of Update, and StateDir.
func hidden(dir, name string) bool {
	return strings.Contains(name, tempMarker) || strings.HasSuffix(name, lockSuffix) || dir == "." && name == StateDir
}

// Reserved reports whether a name is one local directory stores keep for
// their machinery (temporary files, lock files, StateDir): a node created
// under such a name would write into that machinery.
func Reserved(name string) bool {
	return hidden(".", name)
}

// Open opens the value at key for random reads.
func (d *Dir) Open(_ context.Context, key string) (Object, error) {
	f, err := d.open(key)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (d *Dir) open(key string) (*dirFile, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	f, err := d.root.Open(key)
	if err != nil {
		return nil, mapErr(key, err)
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = fmt.Errorf("%w: %s is a directory", ErrNotFound, key)
	}
	if err != nil {
		f.Close()
		return nil, mapErr(key, err)
	}
	return &dirFile{File: f, info: fileInfo(fi)}, nil
}

// dirFile is an open file of a Dir store.
type dirFile struct {
	*os.File
	info Info
}

func (f *dirFile) Info() Info { return f.info }

// Linked reports whether a directory on the way to key is a symbolic
// link, so that the value at key lives elsewhere in the store: deleting it
// as key would delete what another key names.
func (d *Dir) Linked(key string) (bool, error) {
	parts := strings.Split(key, "/")
	for i := 1; i < len(parts); i++ {
		fi, err := d.root.Lstat(strings.Join(parts[:i], "/"))
		if err != nil {
			return false, mapErr(key, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return true, nil
		}
	}
	return false, nil
}

// Prune removes the directories on the way to key, from its parent up to
// but not including stop (a key prefix, "" for the root), that are empty
// once key was deleted, so a delete leaves no directory that held only
// what it deleted. It stops at the first directory that is not empty and
// never removes a symbolic link or anything behind one. Writers that made
// a directory which Prune then removed make it again (Put, Update).
func (d *Dir) Prune(key, stop string) error {
	if err := d.writable(key); err != nil {
		return err
	}
	if stop != "" && !strings.HasPrefix(key, stop+"/") {
		return fmt.Errorf("%w %q: not below %q", ErrInvalidKey, key, stop)
	}
	for dir := path.Dir(key); dir != "." && dir != stop; dir = path.Dir(dir) {
		// Reached without following a link (a link on the way, or at
		// dir, ends the pruning: what it leads to is not key's).
		parent, name, err := d.parent(dir, false)
		if err != nil {
			return nil // pruned with another key, or behind a link
		}
		err = unix.Unlinkat(fd(parent), name, unix.AT_REMOVEDIR)
		parent.Close()
		if err != nil {
			return nil // not empty: nor is any directory above it
		}
	}
	return nil
}
