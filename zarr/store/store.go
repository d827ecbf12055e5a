// Package store defines the key-value store a Zarr hierarchy lives in, and
// implements it for a local directory. Stores in object storage and on web
// servers implement it in the packages below this one.
//
// Keys are relative, '/'-separated paths such as "group/array/c/0/1".
// Keys that could leave the store ("..", ".", empty parts, absolute paths,
// backslashes, NUL) are refused with ErrInvalidKey before any I/O.
//
// Every value has a generation, which changes whenever the value is
// replaced. Reads can be tied to a generation and writes made conditional
// on one, as HTTP does with ETags: that is what lets a reader never mix
// two versions of a shard, and writers on different machines update one
// shard without losing each other's changes (Update).
package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
	"time"
)

// StateDir is the directory at the root of a local store where zarrfs
// keeps its own state (write journals); it is not part of the hierarchy
// and listings of the root hide it.
const StateDir = ".zarrfs"

// Errors returned by stores, wrapped with the key.
var (
	ErrNotFound   = errors.New("key not found")
	ErrInvalidKey = errors.New("invalid key")
	ErrReadOnly   = errors.New("store is read-only")
	// ErrPrecondition: a condition (Cond) did not hold: the value is at
	// another generation than the one required, or exists when it must not.
	ErrPrecondition = errors.New("precondition failed")
	// ErrNotModified: a read with Cond.IfNoneMatch found the value still
	// at that generation; nothing was read.
	ErrNotModified = errors.New("not modified")
	// ErrNoListing: the store cannot list its keys (a web server).
	ErrNoListing = errors.New("store cannot list keys")
	// ErrTooLarge: something is larger than zarrfs holds in memory - a
	// whole value (MaxValueSize), a chunk (the codecs' bounds), a file's
	// content (the key space's) - wrapped with what and the bound. The one
	// error of the kind, here in the lowest package so that every layer
	// wraps it.
	ErrTooLarge = errors.New("too large")
)

// MaxValueSize bounds the reads of whole values (All): metadata documents,
// shards read for a rewrite. A sparse or hostile object of terabytes is
// refused, not allocated.
const MaxValueSize = 2 << 30

// Generation identifies one version of a value; "" is none. It is opaque:
// device, inode, modification time and size for a local file, the ETag for
// an object.
type Generation string

// AnyGeneration in Cond.IfNoneMatch of a write requires that the value
// does not exist (HTTP's If-None-Match: *).
const AnyGeneration Generation = "*"

// Info describes a stored value.
type Info struct {
	Size       int64
	ModTime    time.Time
	Generation Generation
}

// Span selects bytes of a value.
type Span struct {
	Offset int64
	Length int64 // < 0: to the end
	// Suffix > 0 selects the last Suffix bytes instead (all of a shorter
	// value), so that an index at the end of a shard costs one request
	// without knowing the shard's size.
	Suffix int64
	// Max > 0 refuses, with ErrTooLarge, a selection longer than Max.
	Max int64
	// Bufs, when set, receive one after another an answer of exactly
	// their total length (a range of that length answered as asked), and
	// Get then returns Bufs[0]: a reader with buffers of its own
	// (ReadScatterByGet) needs no other buffer and no copy, and one range
	// read into a buffer per chunk leaves no chunk sharing the memory of
	// another.
	Bufs [][]byte
}

// All selects a whole value of at most MaxValueSize bytes.
var All = Span{Length: -1, Max: MaxValueSize}

// Range selects length bytes at offset.
func Range(offset, length int64) Span { return Span{Offset: offset, Length: length} }

// Last selects the last n bytes.
func Last(n int64) Span { return Span{Suffix: n} }

// Resolve returns the offset and length the span selects in a value of
// size bytes; a range past the end is an error wrapping io.ErrUnexpectedEOF.
func (s Span) Resolve(size int64) (offset, length int64, err error) {
	if s.Suffix > 0 {
		n := min(s.Suffix, size)
		return size - n, n, nil
	}
	offset, length = s.Offset, s.Length
	if length < 0 {
		length = size - offset
	}
	if offset < 0 || length < 0 || offset > size || length > size-offset {
		return 0, 0, fmt.Errorf("range [%d, %d+%d) of %d bytes: %w", s.Offset, s.Offset, s.Length, size, io.ErrUnexpectedEOF)
	}
	if err := s.CheckLength(length); err != nil {
		return 0, 0, err
	}
	return offset, length, nil
}

// ReadBody reads a response body that holds the span's selection, of
// declared length when that is >= 0, refusing more than s.Max bytes (or
// MaxValueSize: a server may answer a range with the whole value) before
// reading them. It returns the body's bytes, n of them, in parts one
// after another: Bufs when declared is their total, else one buffer of
// declared length (growing one as the body comes, as io.ReadAll does,
// allocates about twice the body, tens of MiB at once for the spans of a
// whole-array read). A body longer or shorter than declared gives an n
// other than declared (one more when longer), for the caller to refuse.
func (s Span) ReadBody(body io.Reader, declared int64) (parts [][]byte, n int64, err error) {
	if s.Max <= 0 {
		s.Max = MaxValueSize
	}
	if err := s.CheckLength(declared); err != nil {
		return nil, 0, err
	}
	if declared < 0 {
		b, err := io.ReadAll(io.LimitReader(body, s.Max+1))
		if err != nil {
			return nil, 0, err
		}
		return [][]byte{b}, int64(len(b)), s.CheckLength(int64(len(b)))
	}
	parts = s.Bufs
	if len(parts) == 0 || TotalLen(parts) != declared {
		parts = [][]byte{make([]byte, declared)}
	}
	for _, p := range parts {
		k, err := io.ReadFull(body, p)
		n += int64(k)
		switch {
		case err == io.ErrUnexpectedEOF || err == io.EOF:
			return parts, n, nil
		case err != nil:
			return nil, 0, err
		}
	}
	var more [1]byte
	if extra, err := io.ReadFull(body, more[:]); extra > 0 {
		n++
	} else if err != io.EOF {
		return nil, 0, err
	}
	return parts, n, nil
}

// TotalLen is the length of bufs together.
func TotalLen(bufs [][]byte) int64 {
	n := int64(0)
	for _, b := range bufs {
		n += int64(len(b))
	}
	return n
}

// CheckLength refuses a selection of length bytes longer than s.Max.
func (s Span) CheckLength(length int64) error {
	if s.Max > 0 && length > s.Max {
		return fmt.Errorf("%w to read whole: %d bytes, more than %d", ErrTooLarge, length, s.Max)
	}
	return nil
}

// Cond makes a read or a write conditional on the generation of the value.
type Cond struct {
	// IfMatch: the value must be at this generation; ErrPrecondition
	// otherwise (a missing value included).
	IfMatch Generation
	// IfNoneMatch: reads give ErrNotModified when the value is at this
	// generation; writes with AnyGeneration give ErrPrecondition when the
	// value exists.
	IfNoneMatch Generation
}

// Check applies the condition to the value's current state (exists,
// info); stores that evaluate conditions themselves use it.
func (c Cond) Check(key string, exists bool, info Info) error {
	switch {
	case c.IfMatch != "" && (!exists || info.Generation != c.IfMatch):
		return fmt.Errorf("%w: %s changed", ErrPrecondition, key)
	case c.IfNoneMatch == AnyGeneration && exists:
		return fmt.Errorf("%w: %s exists", ErrPrecondition, key)
	case c.IfNoneMatch != "" && exists && info.Generation == c.IfNoneMatch:
		return fmt.Errorf("%w: %s", ErrNotModified, key)
	}
	return nil
}

// Entry is one name in a directory-style listing.
type Entry struct {
	Name string
	Dir  bool // a prefix with keys below it, not a value
}

// The interfaces below are the operations a store may offer, in the
// style of io/fs: a store implements Reader and RangeReader, and Lister and
// Writer only when it can list and take writes. The functions of this
// package (List, Put, ReadOnly...) call the optional ones where a store
// has them and refuse with ErrNoListing or ErrReadOnly where it has not.

// Reader reads values whole or in spans, and describes them.
type Reader interface {
	// Get reads span of the value at key in one request and describes the
	// value.
	Get(ctx context.Context, key string, span Span, cond Cond) ([]byte, Info, error)
	Stat(ctx context.Context, key string) (Info, error)
}

// RangeReader reads parts of one generation of a value.
type RangeReader interface {
	// ReadAt reads len(p) bytes at off of the value at key into p. The
	// value must be at generation gen: ErrPrecondition otherwise, so bytes
	// of two generations are never mixed.
	ReadAt(ctx context.Context, key string, gen Generation, p []byte, off int64) error
}

// Lister is implemented by stores that can list their keys (not a web
// server).
type Lister interface {
	// List yields every key below prefix ("" for all).
	List(ctx context.Context, prefix string) iter.Seq2[string, error]
	// ListDir yields the immediate children of a prefix ("" for the root).
	ListDir(ctx context.Context, prefix string) iter.Seq2[Entry, error]
}

// InfoLister is implemented by stores whose listings describe each value
// with the generation their reads are tied to and condition on (an object
// store's ETag): one listing then checks many values for changes.
type InfoLister interface {
	// ListInfo yields every value below prefix ("" for all) with its Info.
	ListInfo(ctx context.Context, prefix string) iter.Seq2[Listed, error]
}

// Listed is one value of a listing, described.
type Listed struct {
	Key  string
	Info Info
}

// Writer is implemented by stores that take writes, conditional on
// generations (not a web server or a zip file).
type Writer interface {
	// Put replaces the value with parts, one after another, if cond holds:
	// atomically (readers see the old or the new value, never a mix) and
	// durably once Put returns. It describes the new value.
	Put(ctx context.Context, key string, parts [][]byte, cond Cond) (Info, error)
	// Delete removes the value if cond holds; a missing value is not an
	// error unless cond requires a generation.
	Delete(ctx context.Context, key string, cond Cond) error
	// ReadOnly reports whether the store was opened read-only: Put and
	// Delete are then refused.
	ReadOnly() bool
}

// Store is a Zarr key-value store: what every store does. A store that
// lists or takes writes is also a Lister or a Writer.
type Store interface {
	Reader
	RangeReader
	// Remote reports whether the values are fetched from a server (object
	// storage, a web server) rather than read from local files: what is
	// read from a remote store is worth keeping in a disk cache and sharing
	// in a cluster, and writes to it journal outside it (--journal-dir).
	Remote() bool
	// String names the store: its path or URL, for logs and for keys
	// (caches, journals) that must tell stores apart.
	String() string
	io.Closer
}

// List yields every key below prefix ("" for all), or ErrNoListing when
// the store cannot list.
func List(ctx context.Context, s Store, prefix string) iter.Seq2[string, error] {
	if l, ok := s.(Lister); ok {
		return l.List(ctx, prefix)
	}
	return func(yield func(string, error) bool) { yield("", fmt.Errorf("%s: %w", s, ErrNoListing)) }
}

// ListDir yields the immediate children of a prefix ("" for the root), or
// ErrNoListing when the store cannot list.
func ListDir(ctx context.Context, s Store, prefix string) iter.Seq2[Entry, error] {
	if l, ok := s.(Lister); ok {
		return l.ListDir(ctx, prefix)
	}
	return func(yield func(Entry, error) bool) { yield(Entry{}, fmt.Errorf("%s: %w", s, ErrNoListing)) }
}

// Writable returns the store as a Writer when it takes writes: it is one
// and was not opened read-only.
func Writable(s Store) (Writer, bool) {
	w, ok := s.(Writer)
	if !ok || w.ReadOnly() {
		return nil, false
	}
	return w, true
}

// ReadOnly reports whether the store refuses writes.
func ReadOnly(s Store) bool {
	_, ok := Writable(s)
	return !ok
}

// Put replaces the value at key with parts if cond holds (Writer.Put), or
// fails with ErrReadOnly when the store takes no writes.
func Put(ctx context.Context, s Store, key string, parts [][]byte, cond Cond) (Info, error) {
	w, ok := s.(Writer)
	if !ok {
		return Info{}, fmt.Errorf("%w: %s", ErrReadOnly, key)
	}
	return w.Put(ctx, key, parts, cond)
}

// Delete removes the value at key if cond holds (Writer.Delete), or fails
// with ErrReadOnly when the store takes no writes.
func Delete(ctx context.Context, s Store, key string, cond Cond) error {
	w, ok := s.(Writer)
	if !ok {
		return fmt.Errorf("%w: %s", ErrReadOnly, key)
	}
	return w.Delete(ctx, key, cond)
}

// ScatterReader is implemented by stores that read one range of a value
// into several buffers (ReadScatter) with one request.
type ScatterReader interface {
	// ReadScatter reads the bytes at off of the value at key into bufs,
	// one after another, as RangeReader.ReadAt reads them into one.
	ReadScatter(ctx context.Context, key string, gen Generation, bufs [][]byte, off int64) error
}

// ReadScatter reads the bytes at off of generation gen of the value at
// key into bufs, one after another: with one request where r is a
// ScatterReader, else by one ReadAt and a copy.
func ReadScatter(ctx context.Context, r RangeReader, key string, gen Generation, bufs [][]byte, off int64) error {
	if s, ok := r.(ScatterReader); ok {
		return s.ReadScatter(ctx, key, gen, bufs, off)
	}
	if len(bufs) == 1 {
		return r.ReadAt(ctx, key, gen, bufs[0], off)
	}
	b := make([]byte, TotalLen(bufs)) // no more than bufs hold already
	if err := r.ReadAt(ctx, key, gen, b, off); err != nil {
		return err
	}
	scatter(bufs, b)
	return nil
}

// scatter copies b into bufs, one after another.
func scatter(bufs [][]byte, b []byte) {
	for _, p := range bufs {
		b = b[copy(p, b):]
	}
}

// ReadAtByGet is ReadAt for stores whose reads are requests
// (ReadScatterByGet into p alone).
func ReadAtByGet(ctx context.Context, s Reader, key string, gen Generation, p []byte, off int64) error {
	return ReadScatterByGet(ctx, s, key, gen, [][]byte{p}, off)
}

// ReadScatterByGet is ReadScatter for stores whose reads are requests: one
// ranged Get conditional on gen, which must be given, so that the bytes
// come from that generation or the read fails. The answer goes straight
// into bufs (Span.Bufs).
func ReadScatterByGet(ctx context.Context, s Reader, key string, gen Generation, bufs [][]byte, off int64) error {
	// Empty buffers receive nothing; without them, the answer went into
	// bufs when Get returns bufs[0].
	bufs = slices.DeleteFunc(slices.Clone(bufs), func(b []byte) bool { return len(b) == 0 })
	if len(bufs) == 0 {
		return nil
	}
	if gen == "" {
		return fmt.Errorf("%s: a read tied to no generation", key)
	}
	span := Range(off, TotalLen(bufs))
	span.Bufs = bufs
	b, _, err := s.Get(ctx, key, span, Cond{IfMatch: gen})
	if err != nil {
		return err
	}
	if len(b) == 0 || &b[0] != &bufs[0][0] { // not read into bufs (a whole value came)
		scatter(bufs, b)
	}
	return nil
}

// ReadAll returns the whole value at key.
func ReadAll(ctx context.Context, s Store, key string) ([]byte, error) {
	b, _, err := s.Get(ctx, key, All, Cond{})
	return b, err
}

// Write replaces the value at key with b unconditionally.
func Write(ctx context.Context, s Store, key string, b []byte) error {
	_, err := Put(ctx, s, key, [][]byte{b}, Cond{})
	return err
}

// Object is one generation of a value, open for random reads.
type Object interface {
	io.ReaderAt
	Info() Info
	io.Closer
}

// Opener is implemented by stores that open values natively for random
// reads (a local file); see Open.
type Opener interface {
	Open(ctx context.Context, key string) (Object, error)
}

// Open opens the current generation of the value at key for random reads
// within one operation that reads much of it (checking, compacting or
// rewriting a shard): natively where the store is an Opener, otherwise by
// reading the whole value with one request.
func Open(ctx context.Context, s Store, key string) (Object, error) {
	if o, ok := s.(Opener); ok {
		return o.Open(ctx, key)
	}
	b, info, err := s.Get(ctx, key, All, Cond{})
	if err != nil {
		return nil, err
	}
	return NewBytesObject(b, info), nil
}

// NewBytesObject returns an Object holding b.
func NewBytesObject(b []byte, info Info) Object {
	info.Size = int64(len(b))
	return &bytesObject{Reader: bytes.NewReader(b), info: info}
}

type bytesObject struct {
	*bytes.Reader
	info Info
}

func (o *bytesObject) Info() Info   { return o.info }
func (o *bytesObject) Close() error { return nil }

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

// ValidatePrefix accepts "" (the root) and otherwise what ValidateKey
// accepts, with or without a trailing '/'.
func ValidatePrefix(prefix string) error {
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

// Prune removes the directories a delete of key left empty, up to stop
// (Dir.Prune); stores without directories have none.
func Prune(s Store, key, stop string) error {
	if p, ok := s.(interface{ Prune(key, stop string) error }); ok {
		return p.Prune(key, stop)
	}
	return nil
}

// Linked reports whether a directory on the way to key is a symbolic link
// (Dir.Linked); stores without links have none.
func Linked(s Store, key string) (bool, error) {
	if l, ok := s.(interface{ Linked(string) (bool, error) }); ok {
		return l.Linked(key)
	}
	return false, nil
}
