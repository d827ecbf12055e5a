// Package zipstore is a read-only store packed in a zip file: zarr-python's
// ZipStore, or OME-Zarr's single-file .ozx. Go's archive/zip reads the
// central directory once. A member stored uncompressed (STORED, what
// zarr-python and OME-Zarr write) is a byte range of the zip file and is
// read by range like any file; a compressed one is inflated whole when it
// is opened (store.Open, which the mount keeps open per shard) or read.
package zipstore

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// Store is the tree of values in a zip file.
type Store struct {
	file    io.ReaderAt
	closer  io.Closer
	path    string
	gen     string // the zip file's generation: every value's changes with it
	members map[string]*member
	// children lists the names directly below each prefix ("" is the root).
	children map[string][]store.Entry
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
	_ store.Opener = (*Store)(nil)
)

// member is one value: a file of the zip.
type member struct {
	zf     *zip.File
	offset int64 // of its (compressed) data in the zip file
	info   store.Info
	// broken says why the member cannot be read (its data runs past the
	// end of the zip file); nil when it can.
	broken error
}

// Open reads the central directory of the zip file at name.
func Open(name string) (*Store, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if abs, err := filepath.Abs(name); err == nil {
		name = abs
	}
	s, err := New(f, fi.Size(), name, fmt.Sprintf("%x:%x", fi.ModTime().UnixNano(), fi.Size()))
	if err != nil {
		if notZip(f) {
			err = notZipError(name)
		}
		f.Close()
		return nil, err
	}
	s.closer = f
	return s, nil
}

// notZip reports whether f does not start as zip files do (a local file
// header, or the end of the central directory of an empty zip).
func notZip(f io.ReaderAt) bool {
	magic := make([]byte, 4)
	if _, err := f.ReadAt(magic, 0); err != nil {
		return true
	}
	return string(magic) != "PK\x03\x04" && string(magic) != "PK\x05\x06"
}

// notZipError says that the file at name is no store.
func notZipError(name string) error {
	switch filepath.Base(name) {
	case "zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata":
		return fmt.Errorf("%s is a Zarr metadata file, not a store: give the directory holding it", name)
	}
	return fmt.Errorf("%s is a file but not a zip archive: a store is a directory, a zip file (.zip, .ozx) or a URL", name)
}

// New reads the central directory of the zip of size bytes in r, named
// name; gen is the zip's generation (it changes when the zip does).
func New(r io.ReaderAt, size int64, name, gen string) (*Store, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("open store %s: the zip file's central directory: %w", name, err)
	}
	s := &Store{file: r, path: name, members: map[string]*member{}, children: map[string][]store.Entry{}, gen: gen}
	for _, zf := range zr.File {
		if strings.HasSuffix(zf.Name, "/") || store.ValidateKey(zf.Name) != nil {
			continue // directories, and names that are no key (absolute, "..")
		}
		m := &member{zf: zf}
		if m.offset, err = zf.DataOffset(); err != nil {
			m.broken = fmt.Errorf("its local header cannot be read: %w", err)
		} else if end := m.offset + int64(zf.CompressedSize64); end > size || end < m.offset {
			m.broken = fmt.Errorf("its %d bytes at offset %d run past the end of the zip file (%d bytes): %w", zf.CompressedSize64, m.offset, size, io.ErrUnexpectedEOF)
		} else if zf.Method == zip.Store && zf.CompressedSize64 != zf.UncompressedSize64 {
			m.broken = fmt.Errorf("stored, but %d bytes in the zip for %d of content", zf.CompressedSize64, zf.UncompressedSize64)
		}
		if zf.Method != zip.Store && zf.Method != zip.Deflate && m.broken == nil {
			m.broken = fmt.Errorf("compression method %d: only stored and deflated members are read", zf.Method)
		}
		m.info = store.Info{Size: int64(zf.UncompressedSize64), ModTime: zf.Modified,
			Generation: store.Generation(fmt.Sprintf("%s:%x", s.gen, m.offset))}
		s.members[zf.Name] = m // a later member of the same name replaces an earlier one
	}
	for key := range s.members {
		s.addParents(key)
	}
	for _, entries := range s.children {
		slices.SortFunc(entries, func(a, b store.Entry) int { return strings.Compare(a.Name, b.Name) })
	}
	return s, nil
}

// addParents records key, and each directory above it, in its parent's
// listing.
func (s *Store) addParents(key string) {
	dir := false
	for {
		parent, name := path.Split(key)
		parent = strings.TrimSuffix(parent, "/")
		entry := store.Entry{Name: name, Dir: dir}
		if slices.Contains(s.children[parent], entry) {
			return
		}
		s.children[parent] = append(s.children[parent], entry)
		if parent == "" {
			return
		}
		key, dir = parent, true
	}
}

func (s *Store) String() string { return s.path }

// Remote is false: a zip file is a local file.
func (s *Store) Remote() bool { return false }

func (s *Store) Close() error {
	if s.closer == nil {
		return nil
	}
	return s.closer.Close()
}

func (s *Store) member(key string) (*member, error) {
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	m, ok := s.members[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	if m.broken != nil {
		return nil, fmt.Errorf("%s: zip member %s: %w", s.path, key, m.broken)
	}
	return m, nil
}

func (s *Store) Stat(_ context.Context, key string) (store.Info, error) {
	m, err := s.member(key)
	if err != nil {
		return store.Info{}, err
	}
	return m.info, nil
}

// Get reads span of the value: a range of the zip file for a stored
// member, of the inflated member otherwise.
func (s *Store) Get(ctx context.Context, key string, span store.Span, cond store.Cond) ([]byte, store.Info, error) {
	m, err := s.member(key)
	if err != nil {
		return nil, store.Info{}, err
	}
	if err := cond.Check(key, true, m.info); err != nil {
		return nil, m.info, err
	}
	off, n, err := span.Resolve(m.info.Size)
	if err != nil {
		return nil, m.info, fmt.Errorf("%s: %w", key, err)
	}
	o, err := s.open(m)
	if err != nil {
		return nil, m.info, fmt.Errorf("%s: %w", key, err)
	}
	b := make([]byte, n)
	if _, err := o.ReadAt(b, off); err != nil && !(err == io.EOF && off+n == m.info.Size) {
		return nil, m.info, fmt.Errorf("%s: %w", key, err)
	}
	return b, m.info, nil
}

// ReadAt reads len(p) bytes at off of the value, which must be at gen.
func (s *Store) ReadAt(_ context.Context, key string, gen store.Generation, p []byte, off int64) error {
	m, err := s.member(key)
	if err != nil {
		return err
	}
	if m.info.Generation != gen {
		return fmt.Errorf("%w: %s changed", store.ErrPrecondition, key)
	}
	o, err := s.open(m)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if _, err := o.ReadAt(p, off); err != nil && !(err == io.EOF && off+int64(len(p)) == m.info.Size) {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// Open opens the value for random reads: a section of the zip file, or
// the member inflated (at most store.MaxValueSize bytes).
func (s *Store) Open(_ context.Context, key string) (store.Object, error) {
	m, err := s.member(key)
	if err != nil {
		return nil, err
	}
	o, err := s.open(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return object{ReaderAt: o, info: m.info}, nil
}

func (s *Store) open(m *member) (io.ReaderAt, error) {
	if m.zf.Method == zip.Store {
		return io.NewSectionReader(s.file, m.offset, m.info.Size), nil
	}
	if err := store.All.CheckLength(m.info.Size); err != nil {
		return nil, err
	}
	rc, err := m.zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, m.info.Size+1))
	if err != nil {
		return nil, err // a checksum error of the zip included
	}
	if int64(len(b)) != m.info.Size {
		return nil, fmt.Errorf("inflated %d bytes, the central directory says %d: %w", len(b), m.info.Size, io.ErrUnexpectedEOF)
	}
	return bytes.NewReader(b), nil
}

// object is an opened value.
type object struct {
	io.ReaderAt
	info store.Info
}

func (o object) Info() store.Info { return o.info }
func (o object) Close() error     { return nil }

// List yields every key below prefix.
func (s *Store) List(_ context.Context, prefix string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if err := store.ValidatePrefix(prefix); err != nil {
			yield("", err)
			return
		}
		for _, key := range slices.Sorted(func(yield func(string) bool) {
			for k := range s.members {
				if strings.HasPrefix(k, prefix) && !yield(k) {
					return
				}
			}
		}) {
			if !yield(key, nil) {
				return
			}
		}
	}
}

// ListDir yields the children of prefix, sorted.
func (s *Store) ListDir(_ context.Context, prefix string) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if err := store.ValidatePrefix(prefix); err != nil {
			yield(store.Entry{}, err)
			return
		}
		for _, e := range s.children[strings.TrimSuffix(prefix, "/")] {
			if !yield(e, nil) {
				return
			}
		}
	}
}
