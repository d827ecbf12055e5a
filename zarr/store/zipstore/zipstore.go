// Package zipstore is a read-only store packed in a zip file: zarr-python's
// ZipStore, or OME-Zarr's single-file .ozx. The central directory is read
// once into a compact index sorted by key (directory.go). A member stored
// uncompressed (STORED, what zarr-python and OME-Zarr write) is a byte
// range of the zip file and is read by range like any file; a deflated
// one is inflated as far as each read needs, never held whole
// (inflate.go).
package zipstore

import (
	"context"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// Store is the tree of values in a zip file.
type Store struct {
	file   io.ReaderAt
	closer io.Closer
	path   string
	size   int64
	gen    string   // the zip file's generation: every value's changes with it
	sorted []member // by key
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
	_ store.Opener = (*Store)(nil)
)

// Open reads the central directory of the zip file at name, stopping when
// ctx is done.
func Open(ctx context.Context, name string) (*Store, error) {
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
	s, err := New(ctx, f, fi.Size(), name, fmt.Sprintf("%x:%x", fi.ModTime().UnixNano(), fi.Size()))
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
func New(ctx context.Context, r io.ReaderAt, size int64, name, gen string) (*Store, error) {
	d, err := readDirectoryEnd(r, size)
	if err == nil {
		var members []member
		if members, err = readDirectory(ctx, r, d); err == nil {
			return &Store{file: r, path: name, size: size, gen: gen, sorted: members}, nil
		}
	}
	return nil, fmt.Errorf("open store %s: the zip file's central directory: %w", name, err)
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

// member returns the member at key.
func (s *Store) member(key string) (*member, error) {
	if err := store.ValidateKey(key); err != nil {
		return nil, err
	}
	i, ok := slices.BinarySearchFunc(s.sorted, key, func(m member, k string) int { return strings.Compare(m.key, k) })
	if !ok {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	return &s.sorted[i], nil
}

// info describes a member.
func (s *Store) info(m *member) store.Info {
	return store.Info{Size: m.usize, ModTime: m.modTime(), Generation: store.Generation(fmt.Sprintf("%s:%x", s.gen, m.header))}
}

// data returns the offset of a member's data in the zip file, from its
// local header, or why it cannot be read.
func (s *Store) data(m *member) (int64, error) {
	var err error
	var off int64
	switch {
	case m.flags&flagEncrypted != 0:
		err = fmt.Errorf("encrypted")
	case m.method != methodStored && m.method != methodDeflated:
		err = fmt.Errorf("compression method %d: only stored and deflated members are read", m.method)
	case m.method == methodStored && m.csize != m.usize:
		err = fmt.Errorf("stored, but %d bytes in the zip for %d of content", m.csize, m.usize)
	default:
		var h [localHeaderLen]byte
		if _, rerr := s.file.ReadAt(h[:], m.header); rerr != nil || le32(h[:]) != localSignature {
			err = fmt.Errorf("its local header at offset %d cannot be read", m.header)
			break
		}
		off = m.header + localHeaderLen + int64(le16(h[26:])) + int64(le16(h[28:]))
		if end := off + m.csize; end > s.size || end < off {
			err = fmt.Errorf("its %d bytes at offset %d run past the end of the zip file (%d bytes): %w", m.csize, off, s.size, io.ErrUnexpectedEOF)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("%s: zip member %s: %w", s.path, m.key, err)
	}
	return off, nil
}

// reader returns the member's content for reads by range: a section of
// the zip file, or the member inflated as far as each read needs.
func (s *Store) reader(m *member) (content, error) {
	off, err := s.data(m)
	if err != nil {
		return nil, err
	}
	section := io.NewSectionReader(s.file, off, m.csize)
	if m.method == methodStored {
		return stored{section}, nil
	}
	return newInflated(section, m.usize, m.crc), nil
}

// content is a member's bytes, read by range.
type content interface {
	io.ReaderAt
	// readAt is ReadAt, stopping when ctx is done.
	readAt(ctx context.Context, p []byte, off int64) (int, error)
	io.Closer
}

// stored is a stored member: a section of the zip file.
type stored struct{ *io.SectionReader }

func (r stored) readAt(_ context.Context, p []byte, off int64) (int, error) { return r.ReadAt(p, off) }
func (stored) Close() error                                                 { return nil }

func (s *Store) Stat(_ context.Context, key string) (store.Info, error) {
	m, err := s.member(key)
	if err != nil {
		return store.Info{}, err
	}
	if _, err := s.data(m); err != nil {
		return store.Info{}, err
	}
	return s.info(m), nil
}

// Get reads span of the value: a range of the zip file for a stored
// member, of the inflated member otherwise.
func (s *Store) Get(ctx context.Context, key string, span store.Span, cond store.Cond) ([]byte, store.Info, error) {
	m, err := s.member(key)
	if err != nil {
		return nil, store.Info{}, err
	}
	info := s.info(m)
	if err := cond.Check(key, true, info); err != nil {
		return nil, info, err
	}
	off, n, err := span.Resolve(m.usize)
	if err != nil {
		return nil, info, fmt.Errorf("%s: %w", key, err)
	}
	r, err := s.reader(m)
	if err != nil {
		return nil, info, err
	}
	defer r.Close()
	b := make([]byte, n)
	if _, err := r.readAt(ctx, b, off); err != nil && !(err == io.EOF && off+n == m.usize) {
		return nil, info, fmt.Errorf("%s: %w", key, err)
	}
	return b, info, nil
}

// ReadAt reads len(p) bytes at off of the value, which must be at gen.
func (s *Store) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	m, err := s.member(key)
	if err != nil {
		return err
	}
	if s.info(m).Generation != gen {
		return fmt.Errorf("%w: %s changed", store.ErrPrecondition, key)
	}
	r, err := s.reader(m)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.readAt(ctx, p, off); err != nil && !(err == io.EOF && off+int64(len(p)) == m.usize) {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// Open opens the value for random reads: a section of the zip file, or
// the member inflated as far as each read needs (from where the last read
// ended, when it reads on).
func (s *Store) Open(_ context.Context, key string) (store.Object, error) {
	m, err := s.member(key)
	if err != nil {
		return nil, err
	}
	r, err := s.reader(m)
	if err != nil {
		return nil, err
	}
	return object{ReaderAt: r, Closer: r, info: s.info(m)}, nil
}

// object is an opened value.
type object struct {
	io.ReaderAt
	io.Closer
	info store.Info
}

func (o object) Info() store.Info { return o.info }

// List yields every key below prefix, sorted.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if err := store.ValidatePrefix(prefix); err != nil {
			yield("", err)
			return
		}
		for i := s.first(prefix); i < len(s.sorted) && strings.HasPrefix(s.sorted[i].key, prefix); i++ {
			if i%4096 == 0 && ctx.Err() != nil {
				yield("", ctx.Err())
				return
			}
			if !yield(s.sorted[i].key, nil) {
				return
			}
		}
	}
}

// ListDir yields the children of prefix in the order of their keys (a
// directory where its first key is), each once: a run of keys below a
// child directory is skipped with one search.
func (s *Store) ListDir(ctx context.Context, prefix string) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if err := store.ValidatePrefix(prefix); err != nil {
			yield(store.Entry{}, err)
			return
		}
		if prefix = strings.TrimSuffix(prefix, "/"); prefix != "" {
			prefix += "/"
		}
		for i := s.first(prefix); i < len(s.sorted) && strings.HasPrefix(s.sorted[i].key, prefix); {
			if err := ctx.Err(); err != nil {
				yield(store.Entry{}, err)
				return
			}
			rest := s.sorted[i].key[len(prefix):]
			name, _, dir := strings.Cut(rest, "/")
			if !yield(store.Entry{Name: name, Dir: dir}, nil) {
				return
			}
			i++
			if dir {
				// '0' follows '/': the first key past the directory's.
				i = s.first(prefix + name + "0")
			}
		}
	}
}

// first is the index of the first key at or after k.
func (s *Store) first(k string) int {
	i, _ := slices.BinarySearchFunc(s.sorted, k, func(m member, k string) int { return strings.Compare(m.key, k) })
	return i
}
