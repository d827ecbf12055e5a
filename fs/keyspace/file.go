package keyspace

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// File is a metadata document or a chunk of a view.
type File struct {
	fs   *FS
	view View
	path string
	// Metadata documents: the directory and the document's name.
	node    *vnode
	docName string
	// Chunk files: the array and the chunk's coordinates in the view's grid.
	arr    *arrayView
	coords []int
	// Temporary files.
	temp *tempFile
}

// doc returns the current content of a metadata document.
func (f *File) doc() []byte {
	for _, d := range f.fs.docs(f.node) {
		if d.name == f.docName {
			return d.data
		}
	}
	return nil
}

// Path is the file's path within its view.
func (f *File) Path() string { return f.path }

func (f *File) docAttr() Attr {
	return Attr{Ino: inode(f.view, f.path), Size: int64(len(f.doc())), Mtime: f.fs.mtime}
}

// Attr describes the file. For a chunk it consults the shard index; an
// empty chunk is ErrNotFound.
func (f *File) Attr(ctx context.Context) (Attr, error) {
	if f.temp != nil {
		return f.tempAttr(), nil
	}
	if f.arr == nil {
		return f.docAttr(), nil
	}
	loc, ok, err := f.arr.locate(ctx, f.coords, false)
	if err != nil {
		return Attr{}, err
	}
	if !ok {
		return Attr{}, ErrNotFound
	}
	attr := Attr{Ino: inode(f.view, f.path), Size: loc.n - int64(f.arr.drop), Mtime: loc.mtime}
	if f.arr.target != nil {
		b, err := f.transcoded(ctx, loc)
		if err != nil {
			return Attr{}, err
		}
		attr.Size = int64(len(b))
	}
	return attr, nil
}

// Handle is an open file: either bytes in memory (metadata, transcoded
// chunks) or a byte range of an open shard file.
type Handle struct {
	data    []byte
	file    store.Object
	off     int64
	size    int64
	release func()
	served  *atomic.Uint64 // the Stats counter of the bytes read
	// Generation is the shard generation the handle reads; it changes
	// when the chunk's shard is rewritten.
	Generation store.Generation
}

// Size is the size of the file's content.
func (h *Handle) Size() int64 { return h.size }

// ReadAt reads the file's content.
func (h *Handle) ReadAt(p []byte, off int64) (int, error) {
	if off >= h.size {
		return 0, io.EOF
	}
	if rest := h.size - off; int64(len(p)) > rest {
		p = p[:rest]
	}
	var n int
	var err error
	if h.file == nil {
		n = copy(p, h.data[off:])
	} else if n, err = h.file.ReadAt(p, h.off+off); err == io.EOF && n == len(p) {
		err = nil
	}
	if h.served != nil {
		h.served.Add(uint64(n))
	}
	return n, err
}

// Close releases the shard file.
func (h *Handle) Close() {
	if h.release != nil {
		h.release()
		h.release = nil
	}
}

// Open opens the file for reading. Chunk files are located afresh (the
// shard is checked for changes) and a dropped trailing checksum is
// verified before the bytes are served.
func (f *File) Open(ctx context.Context) (*Handle, error) { return f.open(ctx, true) }

// Upcoming reports whether the file is the chunk that a reader reading
// its array's chunks in key order reads next: its content is then worth
// handing to the kernel before the reader asks for it. Chunks of arrays
// read in no order are not, so that listing or stat-ing a chunk directory
// reads no chunk.
func (f *File) Upcoming() bool {
	if f.arr == nil || f.temp != nil {
		return false
	}
	f.arr.seq.mu.Lock()
	defer f.arr.seq.mu.Unlock()
	return f.arr.seq.follows(f.arr, f.coords)
}

// ReadAt reads the file's content without an open handle: chunks are
// located with the cached shard index (revalidated as Options.Revalidate
// says), so that a mount whose kernel opens files without asking zarrfs
// still serves current, verified bytes.
func (f *File) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	h, err := f.open(ctx, false)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	return h.ReadAt(p, off)
}

// open opens the file for reading; fresh checks the chunk's shard for
// changes whatever the age of its cached index.
func (f *File) open(ctx context.Context, fresh bool) (*Handle, error) {
	if f.temp != nil {
		f.temp.mu.Lock()
		b := slices.Clone(f.temp.data)
		f.temp.mu.Unlock()
		return &Handle{data: b, size: int64(len(b))}, nil
	}
	if f.arr == nil {
		b := f.doc()
		return &Handle{data: b, size: int64(len(b)), served: &f.fs.counts.metadataBytes}, nil
	}
	for range 3 { // retry when the shard is replaced under us
		loc, ok, err := f.arr.locate(ctx, f.coords, fresh)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, ErrNotFound
		}
		if f.arr.target != nil {
			b, err := f.transcoded(ctx, loc)
			if err != nil {
				return nil, err
			}
			return &Handle{data: b, size: int64(len(b)), served: &f.fs.counts.transcodedBytes, Generation: loc.gen}, nil
		}
		if loc.data != nil { // a pending update, validated when written
			n := loc.n - int64(f.arr.drop)
			return &Handle{data: loc.data[:n], size: n, served: &f.fs.counts.passThroughBytes, Generation: loc.gen}, nil
		}
		if f.fs.files == nil { // a store read by ranges
			b, err := f.arr.readStored(ctx, loc)
			if errors.Is(err, errStale) {
				continue
			}
			f.fs.readAhead.after(f.arr, f.coords)
			if err == nil {
				err = f.verifyTrailer(ctx, loc, b)
			}
			if err != nil {
				return nil, err
			}
			n := loc.n - int64(f.arr.drop)
			return &Handle{data: b[:n], size: n, served: &f.fs.counts.passThroughBytes, Generation: loc.gen}, nil
		}
		file, release, err := f.fs.files.acquire(ctx, loc.key, loc.gen)
		if errors.Is(err, errStale) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := f.verifyTrailerOf(ctx, file, loc); err != nil {
			release()
			return nil, err
		}
		return &Handle{file: file, off: loc.off, size: loc.n - int64(f.arr.drop), release: release, served: &f.fs.counts.passThroughBytes, Generation: loc.gen}, nil
	}
	return nil, fmt.Errorf("%s: the shard keeps changing", f.path)
}

// readStored reads a chunk's stored bytes: from an open shard file, or
// by ranges tied to the shard's generation (errStale when the shard was
// replaced since its index was read; see readRange).
func (av *arrayView) readStored(ctx context.Context, loc location) ([]byte, error) {
	if loc.data != nil {
		return loc.data, nil
	}
	if av.fs.files == nil {
		return av.readRange(ctx, loc)
	}
	if err := av.fitsInMemory(ctx, loc); err != nil {
		return nil, err
	}
	b := make([]byte, loc.n)
	file, release, err := av.fs.files.acquire(ctx, loc.key, loc.gen)
	if err != nil {
		return nil, err
	}
	defer release()
	if _, err := file.ReadAt(b, loc.off); err != nil && !(err == io.EOF) {
		return nil, fmt.Errorf("%s: %w", loc.key, err)
	}
	return b, nil
}

// fitsInMemory refuses to read a stored chunk whole when it is larger than
// any chunk of the array encodes to: a corrupt index entry, or one in a
// sparse shard, must not make the daemon allocate gigabytes. Reads by
// range still serve such a chunk's file as stored.
func (av *arrayView) fitsInMemory(ctx context.Context, loc location) error {
	if limit := av.source.MaxEncodedSize(); loc.n > limit {
		err := fmt.Errorf("%w: %s: an inner chunk of %d bytes at offset %d, more than any chunk of this array encodes to (%d)", ErrCorrupt, loc.key, loc.n, loc.off, limit)
		av.fs.logOnce(ctx, loc.key, "inner chunk too large to read whole", "error", err)
		return err
	}
	return nil
}

// verifyTrailerOf verifies the chunk at loc of an open shard file, reading
// it only when it was not verified before.
func (f *File) verifyTrailerOf(ctx context.Context, file store.Object, loc location) error {
	if _, ok := f.fs.cache.Get(trailerKey(loc)); !f.arr.verify || ok {
		return nil
	}
	if err := f.arr.fitsInMemory(ctx, loc); err != nil {
		return err
	}
	b := make([]byte, loc.n)
	if _, err := file.ReadAt(b, loc.off); err != nil && err != io.EOF {
		return fmt.Errorf("%s: %w", loc.key, err)
	}
	return f.verifyTrailer(ctx, loc, b)
}

// verifyTrailer checks the crc32c that ends the chunk b stored at loc,
// once per shard generation: no view serves bytes that fail their checksum
// (v2 readers could not tell, as the view leaves the checksum out; not
// every v3 reader checks it).
func (f *File) verifyTrailer(ctx context.Context, loc location, b []byte) error {
	if !f.arr.verify {
		return nil
	}
	key := trailerKey(loc)
	if _, ok := f.fs.cache.Get(key); ok {
		return nil
	}
	if len(b) < 4 || codec.CRC32C(b[:len(b)-4]) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		f.fs.logOnce(ctx, loc.key, "inner chunk checksum mismatch: its files give EIO", "chunk", f.path)
		return fmt.Errorf("%w: %s: crc32c of inner chunk at offset %d does not match", ErrCorrupt, loc.key, loc.off)
	}
	f.fs.cache.Add(key, struct{}{}, int64(len(key)+16))
	return nil
}

func trailerKey(loc location) string {
	return fmt.Sprintf("crc\x00%s\x00%s\x00%d", loc.key, loc.gen, loc.off)
}

// transcoded returns the chunk re-encoded with the view's codecs (cached),
// and has the chunks after it prepared when it is read in sequence.
func (f *File) transcoded(ctx context.Context, loc location) ([]byte, error) {
	b, err := f.arr.transcoded(ctx, f.coords, loc)
	if err == nil {
		f.fs.readAhead.after(f.arr, f.coords)
	}
	return b, err
}

// Xattr is an extended attribute.
type Xattr struct {
	Name  string
	Value string
}

// Xattrs say where a chunk file's bytes live: the shard's store key, the
// offset and size of the stored inner chunk, and the view's codecs.
func (f *File) Xattrs(ctx context.Context) ([]Xattr, error) {
	if f.arr == nil {
		return nil, nil
	}
	loc, ok, err := f.arr.locate(ctx, f.coords, false)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	return []Xattr{
		{"user.zarr.shard", loc.key},
		{"user.zarr.offset", strconv.FormatInt(loc.off, 10)},
		{"user.zarr.nbytes", strconv.FormatInt(loc.n, 10)},
		{"user.zarr.codecs", f.arr.codecs},
	}, nil
}

// String names the file for logs.
func (f *File) String() string { return fmt.Sprintf("%s:/%s", f.view, strings.TrimPrefix(f.path, "/")) }
