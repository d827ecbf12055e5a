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
	"slices"
	"strings"
	"syscall"
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
	_ Store  = (*Dir)(nil)
	_ Opener = (*Dir)(nil)
)

// OpenDir opens the directory at dir as a store.
func OpenDir(dir string, readOnly bool) (*Dir, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &Dir{root: root, path: dir, readOnly: readOnly}, nil
}

// Path is the directory the store was opened at.
func (d *Dir) Path() string { return d.path }

// Close releases the directory.
func (d *Dir) Close() error { return d.root.Close() }

// ReadOnly reports whether the store refuses changes.
func (d *Dir) ReadOnly() bool { return d.readOnly }

// mapErr turns file-system errors into store errors naming the key.
func mapErr(key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	case strings.Contains(err.Error(), "escapes from parent"):
		// os.Root's error for symlinks and paths leading out of the root.
		return fmt.Errorf("%w %q: leads out of the store", ErrInvalidKey, key)
	}
	return fmt.Errorf("%s: %w", key, err)
}

// Get returns the whole value stored at key.
func (d *Dir) Get(_ context.Context, key string) ([]byte, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	b, err := d.root.ReadFile(key)
	return b, mapErr(key, err)
}

// GetRange returns length bytes at offset (length < 0: to the end).
func (d *Dir) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	f, err := d.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := f.Info().Size
	if length < 0 {
		length = size - offset
	}
	if offset < 0 || length < 0 || offset > size || length > size-offset {
		return nil, fmt.Errorf("%s: range [%d, %d+%d) of %d bytes: %w", key, offset, offset, length, size, io.ErrUnexpectedEOF)
	}
	b := make([]byte, length)
	if _, err := f.ReadAt(b, offset); err != nil {
		return nil, mapErr(key, err)
	}
	return b, nil
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

func fileInfo(fi fs.FileInfo) Info {
	info := Info{Size: fi.Size(), ModTime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.Version = fmt.Sprintf("%x:%x:%x:%x", st.Dev, st.Ino, fi.ModTime().UnixNano(), fi.Size())
	} else {
		info.Version = fmt.Sprintf("%x:%x", fi.ModTime().UnixNano(), fi.Size())
	}
	return info
}

// Put writes value to a temporary file next to key, syncs it, renames it
// onto key and syncs the directory, so the value is replaced atomically
// and survives a crash once Put returns.
func (d *Dir) Put(_ context.Context, key string, value []byte) error {
	dir, err := d.makeParent(key)
	if err != nil {
		return err
	}
	tmp := tempName(key)
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return mapErr(key, err)
	}
	_, err = f.Write(value)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.root.Rename(tmp, key)
	}
	if err != nil {
		d.root.Remove(tmp)
		return mapErr(key, err)
	}
	return mapErr(key, d.syncDir(dir))
}

// makeParent checks that key may be written and creates the directory it
// goes in, which it returns.
func (d *Dir) makeParent(key string) (string, error) {
	if err := d.writable(key); err != nil {
		return "", err
	}
	dir := path.Dir(key)
	if dir != "." {
		if err := d.root.MkdirAll(dir, 0o755); err != nil {
			return "", mapErr(key, err)
		}
	}
	return dir, nil
}

// tempName returns a fresh hidden name in key's directory.
func tempName(key string) string {
	var r [8]byte
	rand.Read(r[:])
	dir, name := path.Split(key)
	return dir + "." + name + tempMarker + hex.EncodeToString(r[:])
}

func (d *Dir) syncDir(dir string) error {
	f, err := d.root.Open(dir)
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

// Delete removes the value at key and syncs its directory.
func (d *Dir) Delete(_ context.Context, key string) error {
	if err := d.writable(key); err != nil {
		return err
	}
	fi, err := d.root.Lstat(key)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return mapErr(key, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: is a directory, not a value", key)
	}
	if err := d.root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return mapErr(key, err)
	}
	return mapErr(key, d.syncDir(path.Dir(key)))
}

// List yields every key below prefix, directory by directory.
func (d *Dir) List(ctx context.Context, prefix string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if err := validatePrefix(prefix); err != nil {
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
		if err := validatePrefix(prefix); err != nil {
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
					if err != nil {
						continue // dangling or leading out of the store
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

// Open opens the value at key for random reads.
func (d *Dir) Open(_ context.Context, key string) (File, error) {
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

var _ FdFile = (*dirFile)(nil)

func (f *dirFile) Info() Info { return f.info }
