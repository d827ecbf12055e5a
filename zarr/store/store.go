// Package store defines the key-value store a Zarr hierarchy lives in and
// implements it for a local directory.
//
// Keys are relative, '/'-separated paths such as "group/array/c/0/1".
// Keys that could leave the store ("..", ".", empty parts, absolute paths,
// backslashes, NUL) are refused with ErrInvalidKey before any I/O.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"
)

// StateDir is the directory at the root of a store where zarrfs keeps its
// own state (write journals); it is not part of the hierarchy and listings
// of the root hide it.
const StateDir = ".zarrfs"

// Errors returned by stores, wrapped with the key.
var (
	ErrNotFound   = errors.New("key not found")
	ErrInvalidKey = errors.New("invalid key")
	ErrReadOnly   = errors.New("store is read-only")
)

// Info describes a stored value.
type Info struct {
	Size    int64
	ModTime time.Time
	// Version changes whenever the value is replaced (for files: device,
	// inode, mtime and size), so caches can tell a value was rewritten.
	Version string
}

// Entry is one name in a directory-style listing.
type Entry struct {
	Name string
	Dir  bool // a prefix with keys below it, not a value
}

// Store is a Zarr key-value store.
type Store interface {
	// Get returns the whole value.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns length bytes at offset; length < 0 reads to the end.
	// Reading past the end is an error wrapping io.ErrUnexpectedEOF.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
	Stat(ctx context.Context, key string) (Info, error)
	// Put replaces the value atomically: readers see the old or the new
	// value, never a mix, and after Put returns the value is durable.
	Put(ctx context.Context, key string, value []byte) error
	// Delete removes the value; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List yields every key below prefix ("" for all).
	List(ctx context.Context, prefix string) iter.Seq2[string, error]
	// ListDir yields the immediate children of a prefix ("" for the root).
	ListDir(ctx context.Context, prefix string) iter.Seq2[Entry, error]
	// ReadOnly reports whether Put and Delete are refused.
	ReadOnly() bool
}

// File is an open value that supports random reads without reading it
// whole, such as a shard.
type File interface {
	io.ReaderAt
	io.Closer
	Info() Info
}

// Opener is implemented by stores that can open values for random access.
type Opener interface {
	Open(ctx context.Context, key string) (File, error)
}

// FdFile is a File backed by an operating-system file descriptor, which
// lets the FUSE layer splice byte ranges without copying them.
type FdFile interface {
	File
	Fd() uintptr
}

// ValidateKey checks that key is a clean relative path inside the store.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if strings.HasPrefix(key, "/") {
		return fmt.Errorf("%w %q: absolute path", ErrInvalidKey, key)
	}
	if strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("%w %q: backslash or NUL", ErrInvalidKey, key)
	}
	for part := range strings.SplitSeq(key, "/") {
		switch part {
		case "":
			return fmt.Errorf("%w %q: empty path element", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w %q: %q path element", ErrInvalidKey, key, part)
		}
	}
	return nil
}

// validatePrefix accepts "" (the root) and otherwise what ValidateKey
// accepts, with or without a trailing '/'.
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return ValidateKey(strings.TrimSuffix(prefix, "/"))
}

// Join joins key parts with '/', skipping empty parts.
func Join(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		p = strings.Trim(p, "/")
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(p)
	}
	return b.String()
}

// Open opens the value at key for random reads in any store: natively when
// the store is an Opener, otherwise through GetRange.
func Open(ctx context.Context, s Store, key string) (File, error) {
	if o, ok := s.(Opener); ok {
		return o.Open(ctx, key)
	}
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	return &rangeFile{ctx: ctx, s: s, key: key, info: info}, nil
}

// rangeFile reads a value of a store without Opener by ranges.
type rangeFile struct {
	ctx  context.Context
	s    Store
	key  string
	info Info
}

func (f *rangeFile) ReadAt(p []byte, off int64) (int, error) {
	b, err := f.s.GetRange(f.ctx, f.key, off, int64(len(p)))
	return copy(p, b), err
}

func (f *rangeFile) Close() error { return nil }
func (f *rangeFile) Info() Info   { return f.info }
