package keyspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// File is a file of a view. Each kind has its own type: *Document (a
// metadata document), *Chunk (one chunk of the view's grid) and *Temp (a
// temporary file).
type File interface {
	// Path is the file's path within its view.
	Path() string
	// String names the file for logs.
	String() string
	// Attr describes the file; an empty chunk is ErrNotFound.
	Attr(ctx context.Context) (Attr, error)
	// Open opens the file for reading.
	Open(ctx context.Context) (*Handle, error)
	// ReadAt reads the file's content without an open handle, as a mount
	// whose kernel opens files without asking zarrfs does: current,
	// verified bytes.
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	// OpenWrite opens the file for writing, starting empty when truncate
	// is set (O_TRUNC) and from its current content otherwise.
	OpenWrite(ctx context.Context, truncate bool) (*WriteHandle, error)
	// Truncate resizes the file's content and commits it, as truncate(2)
	// by path does: it fails as close would when the result is refused.
	Truncate(ctx context.Context, size int64) error
	// ReadShared is ReadAt without a copy of what is in memory: it may
	// return bytes the file holds, which the caller must not modify.
	ReadShared(ctx context.Context, p []byte, off int64) ([]byte, error)
	// Xattrs are the file's extended attributes; only chunk files have
	// some (where their bytes live).
	Xattrs(ctx context.Context) ([]Xattr, error)
	// PushContent decides whether the file's content, of size bytes (as
	// its Attr said), is worth handing to a cache that keeps it before a
	// reader asks for it - the kernel's page cache of a read-only mount -
	// and returns it if so.
	PushContent(ctx context.Context, size int64) ([]byte, bool)
	// Delivered tells the file that n bytes of its content from off now
	// sit with a reader that keeps them: the kernel's page cache of a
	// read-only mount, which keeps a file's pages across opens.
	Delivered(ctx context.Context, off int64, n int)
}

var (
	_ File = (*Document)(nil)
	_ File = (*Chunk)(nil)
	_ File = (*Temp)(nil)
)

// place is where a file is: what every kind of file has.
type place struct {
	fs   *FS
	view View
	path string
}

func (p *place) Path() string { return p.path }

func (p *place) String() string {
	return fmt.Sprintf("%s:/%s", p.view, strings.TrimPrefix(p.path, "/"))
}

// The defaults of the files that are not chunks: no extended attributes,
// nothing pushed ahead of a reader, nothing to do on delivery.

func (p *place) Xattrs(context.Context) ([]Xattr, error) { return nil, nil }

func (p *place) PushContent(context.Context, int64) ([]byte, bool) { return nil, false }

func (p *place) Delivered(context.Context, int64, int) {}

// readCopy is the ReadShared of files whose bytes are copied into p.
func readCopy(ctx context.Context, f File, p []byte, off int64) ([]byte, error) {
	n, err := f.ReadAt(ctx, p, off)
	return p[:n], err
}

// Document is a metadata document of a group or array directory.
type Document struct {
	place
	node *vnode
	name string
}

// content returns the document's current bytes.
func (d *Document) content(ctx context.Context) ([]byte, error) {
	if d.view == V2 && d.name == zarr.ZMetadata {
		return d.fs.consolidatedDoc(ctx, d.node)
	}
	for _, doc := range d.fs.docs(d.node) {
		if doc.name == d.name {
			return doc.data, nil
		}
	}
	return nil, nil
}

func (d *Document) Attr(ctx context.Context) (Attr, error) {
	b, err := d.content(ctx)
	return Attr{Ino: d.fs.inode(d.view, d.path), Size: int64(len(b)), Mtime: d.fs.mtime}, err
}

// attr describes the document for a lookup, which does not fail on a
// .zmetadata that cannot be made: opening it does.
func (d *Document) attr() Attr {
	a, _ := d.Attr(context.Background())
	return a
}

func (d *Document) Open(ctx context.Context) (*Handle, error) {
	b, err := d.content(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.path, err)
	}
	return &Handle{data: b, size: int64(len(b)), served: &d.fs.counts.metadataBytes}, nil
}

func (d *Document) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	h, err := d.Open(ctx)
	return readOnce(h, err, p, off)
}

func (d *Document) ReadShared(ctx context.Context, p []byte, off int64) ([]byte, error) {
	return readCopy(ctx, d, p, off)
}

// OpenWrite opens the document for writing: only attributes are writable
// (.zattrs, and the attributes of zarr.json), the shape of arrays, and
// documents written again as they are (writeDoc).
func (d *Document) OpenWrite(ctx context.Context, truncate bool) (*WriteHandle, error) {
	if d.fs.Writable() && d.name != zarr.ZAttrs && d.name != zarr.ZarrJSON && d.name != zarr.ZMetadata && d.name != zarr.ZGroup && (d.name != zarr.ZArray || d.fs.arrayOf(d.node) == nil) {
		d.fs.logOnce(ctx, d.path, "metadata edit refused: only attributes (.zattrs, zarr.json attributes), the shape of arrays and consolidated metadata are writable")
		return nil, fmt.Errorf("%w: %s is not writable", ErrPermission, d.path)
	}
	return openBuffered(ctx, d.fs, d, maxDocSize, truncate, func(ctx context.Context, content []byte) error {
		return d.fs.writeDoc(ctx, d.node, d.view, d.name, content)
	})
}

func (d *Document) Truncate(ctx context.Context, size int64) error { return truncate(ctx, d, size) }

// Chunk is the file of one chunk of a view's grid: an inner chunk of a
// sharded array, or a chunk of an unsharded one.
type Chunk struct {
	place
	arr    *arrayView
	coords []int
}

// Attr describes the chunk from its shard's index; an empty chunk is
// ErrNotFound.
func (f *Chunk) Attr(ctx context.Context) (Attr, error) {
	loc, ok, err := f.arr.locateUnchecked(ctx, f.coords)
	if !ok {
		loc, ok, err = f.arr.locate(ctx, f.coords, false)
	}
	if err != nil {
		return Attr{}, err
	}
	if !ok {
		return Attr{}, ErrNotFound
	}
	attr := Attr{Ino: f.fs.inode(f.view, f.path), Size: loc.N - int64(f.arr.drop), Mtime: loc.ModTime}
	if !f.fs.Writable() && f.arr.eng.Watch(loc) {
		attr.KeepFor = engine.WatchFor
	}
	if f.arr.target == nil {
		return attr, nil
	}
	if size, fixed := f.arr.target.EncodedSize(); fixed {
		// Uncompressed: the size needs no transcode. It runs when the
		// chunk is read, and the chunks after it are prepared meanwhile.
		attr.Size = int64(size)
		if f.arr.eng.NoteLookup(f.coords) {
			f.fs.readAhead.from(f.arr, f.coords)
		}
		return attr, nil
	}
	b, err := f.transcoded(ctx, loc)
	if err != nil {
		return Attr{}, err
	}
	attr.Size = int64(len(b))
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
	b, err := h.read(p, off)
	if h.file == nil {
		copy(p, b)
	}
	return len(b), err
}

// read returns the content from off, up to len(p) bytes: the content
// itself when it is in memory, read into p otherwise.
func (h *Handle) read(p []byte, off int64) ([]byte, error) {
	if off >= h.size {
		return nil, io.EOF
	}
	if rest := h.size - off; int64(len(p)) > rest {
		p = p[:rest]
	}
	var n int
	var err error
	if h.file == nil {
		p, n = h.data[off:off+int64(len(p))], len(p)
	} else if n, err = h.file.ReadAt(p, h.off+off); err == io.EOF && n == len(p) {
		err = nil
	}
	if h.served != nil {
		h.served.Add(uint64(n))
	}
	return p[:n], err
}

// Close releases the shard file.
func (h *Handle) Close() {
	if h.release != nil {
		h.release()
		h.release = nil
	}
}

// Open opens the chunk for reading: it is located afresh (the shard is
// checked for changes) and a dropped trailing checksum is verified before
// the bytes are served.
func (f *Chunk) Open(ctx context.Context) (*Handle, error) { return f.open(ctx, true) }

// Upcoming reports whether a reader reads the chunk next, as the engine
// sees its array's readers (engine.Array.Upcoming): its content is then
// worth handing to the kernel before the reader asks for it.
func (f *Chunk) Upcoming() bool { return f.arr.eng.Upcoming(f.coords) }

// ReadAt locates the chunk with the cached shard index (revalidated as
// Options.Revalidate says).
func (f *Chunk) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	h, err := f.open(ctx, false)
	return readOnce(h, err, p, off)
}

// ReadShared is ReadAt without a copy of what is in memory (transcoded
// chunks, pending updates, ranges of stores read by ranges): it returns
// those bytes themselves, which the caller must not modify, and reads
// into p only what lies in a shard file. A transcoded chunk was copied
// once more on its way to the kernel.
func (f *Chunk) ReadShared(ctx context.Context, p []byte, off int64) ([]byte, error) {
	h, err := f.open(ctx, false)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return h.read(p, off)
}

// readOnce reads from a handle just opened (or the error opening it), and
// closes it.
func readOnce(h *Handle, err error, p []byte, off int64) (int, error) {
	if err != nil {
		return 0, err
	}
	defer h.Close()
	return h.ReadAt(p, off)
}

// open opens the chunk for reading; fresh checks its shard for changes
// whatever the age of its cached index.
func (f *Chunk) open(ctx context.Context, fresh bool) (*Handle, error) {
	for i := range 3 { // retry when the shard is replaced under us
		loc, ok, err := f.arr.locateUnchecked(ctx, f.coords)
		if fresh || !ok {
			loc, ok, err = f.arr.locate(ctx, f.coords, fresh)
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, ErrNotFound
		}
		if !f.fs.engine.OpensFiles() && loc.Data == nil && i == 0 {
			f.arr.eng.Touched(loc)
		}
		if f.arr.target != nil {
			b, err := f.transcoded(ctx, loc)
			if errors.Is(err, engine.ErrStale) {
				fresh = true
				continue
			}
			if err != nil {
				return nil, err
			}
			return &Handle{data: b, size: int64(len(b)), served: &f.fs.counts.transcodedBytes, Generation: loc.Gen}, nil
		}
		if loc.Data != nil { // a pending update, validated when written
			n := loc.N - int64(f.arr.drop)
			return &Handle{data: loc.Data[:n], size: n, served: &f.fs.counts.passThroughBytes, Generation: loc.Gen}, nil
		}
		if !f.fs.engine.OpensFiles() { // a store read by ranges
			b, err := f.arr.eng.ReadStored(ctx, loc)
			if errors.Is(err, engine.ErrStale) {
				fresh = true // locate it again in the shard's new index
				continue
			}
			if f.arr.eng.NoteRead(f.coords) {
				f.fs.readAhead.from(f.arr, f.coords)
			}
			if err == nil {
				err = f.verifyTrailer(ctx, loc, b)
			}
			if err != nil {
				return nil, err
			}
			n := loc.N - int64(f.arr.drop)
			return &Handle{data: b[:n], size: n, served: &f.fs.counts.passThroughBytes, Generation: loc.Gen}, nil
		}
		file, release, err := f.fs.engine.OpenShard(ctx, loc)
		if errors.Is(err, engine.ErrStale) {
			fresh = true
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := f.verifyTrailerOf(ctx, file, loc); err != nil {
			release()
			return nil, err
		}
		return &Handle{file: file, off: loc.Off, size: loc.N - int64(f.arr.drop), release: release, served: &f.fs.counts.passThroughBytes, Generation: loc.Gen}, nil
	}
	return nil, fmt.Errorf("%s: the shard keeps changing", f.path)
}

// verifyTrailerOf verifies the chunk at loc of an open shard file, reading
// it only when it was not verified before.
func (f *Chunk) verifyTrailerOf(ctx context.Context, file store.Object, loc engine.Location) error {
	if _, ok := f.fs.cache.Get(f.fs.trailerKey(loc)); !f.arr.verify || ok {
		return nil
	}
	if err := f.arr.eng.CheckSize(ctx, loc); err != nil {
		return err
	}
	b := make([]byte, loc.N)
	if _, err := file.ReadAt(b, loc.Off); err != nil && err != io.EOF {
		return fmt.Errorf("%s: %w", loc.Key, err)
	}
	return f.verifyTrailer(ctx, loc, b)
}

// verifyTrailer checks the crc32c that ends the chunk b stored at loc,
// once per shard generation: no view serves bytes that fail their checksum
// (v2 readers could not tell, as the view leaves the checksum out; not
// every v3 reader checks it).
func (f *Chunk) verifyTrailer(ctx context.Context, loc engine.Location, b []byte) error {
	if !f.arr.verify {
		return nil
	}
	key := f.fs.trailerKey(loc)
	if _, ok := f.fs.cache.Get(key); ok {
		return nil
	}
	if !codec.EndsWithCRC32C(b) {
		f.fs.logOnce(ctx, loc.Key, "inner chunk checksum mismatch: its files give EIO", "chunk", f.path)
		return fmt.Errorf("%w: %s: crc32c of inner chunk at offset %d does not match", ErrCorrupt, loc.Key, loc.Off)
	}
	f.fs.cache.Add(key, struct{}{}, int64(len(key)+16))
	return nil
}

// transcoded returns the chunk re-encoded with the view's codecs (cached),
// and has the chunks after it prepared when it is read in sequence.
func (f *Chunk) transcoded(ctx context.Context, loc engine.Location) ([]byte, error) {
	b, err := f.arr.transcoded(ctx, f.coords, loc)
	if err == nil && f.arr.eng.NoteRead(f.coords) {
		f.fs.readAhead.from(f.arr, f.coords)
	}
	return b, err
}

// Delivered lets a transcoded chunk of a fixed size leave the cache once
// delivered whole (its size needs no transcode): the cache's memory is
// better spent on what the kernel does not hold, and keeping both copies
// made every cold read of transcoded chunks fault in fresh memory for all
// of them. Read again after the kernel dropped it, the chunk is
// transcoded again.
func (f *Chunk) Delivered(ctx context.Context, off int64, n int) {
	if f.arr.target == nil || off != 0 {
		return
	}
	if size, fixed := f.arr.target.EncodedSize(); !fixed || n != size {
		return
	}
	if loc, ok, err := f.arr.locate(ctx, f.coords, false); err == nil && ok {
		f.fs.cache.Remove(f.arr.transcodedKey(f.coords, loc))
	}
}

// Xattr is an extended attribute.
type Xattr struct {
	Name  string
	Value string
}

// Xattrs say where a chunk file's bytes live: the shard's store key, the
// offset and size of the stored inner chunk, and the view's codecs.
func (f *Chunk) Xattrs(ctx context.Context) ([]Xattr, error) {
	loc, ok, err := f.arr.locate(ctx, f.coords, false)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	return []Xattr{
		{"user.zarr.shard", loc.Key},
		{"user.zarr.offset", strconv.FormatInt(loc.Off, 10)},
		{"user.zarr.nbytes", strconv.FormatInt(loc.N, 10)},
		{"user.zarr.codecs", f.arr.codecs},
	}, nil
}

// MaxSize bounds the content of a chunk file held in memory whole: the
// largest encoding of a chunk of the array, which its transcoded files
// stay within too. A larger size comes from a corrupt or hostile index
// entry (or one in a sparse shard) and must not become an allocation.
func (f *Chunk) MaxSize() int64 { return f.arr.source.MaxEncodedSize() }

// PushContent returns the chunk's content when it is Upcoming: read now,
// it is in the reader's cache by the time the reader asks (its READ is
// served without a round trip). Not when size is beyond any chunk's (a
// corrupt or hostile index entry must not become an allocation) or the
// chunk does not read whole: the reader's own read then says what is
// wrong.
func (f *Chunk) PushContent(ctx context.Context, size int64) ([]byte, bool) {
	if !f.Upcoming() || size <= 0 || size > f.MaxSize() {
		return nil, false
	}
	b := make([]byte, size)
	if got, err := f.ReadAt(ctx, b, 0); int64(got) != size || err != nil && err != io.EOF {
		return nil, false
	}
	return b, true
}

// OpenWrite opens the chunk for writing, bounded by MaxSize.
func (f *Chunk) OpenWrite(ctx context.Context, truncate bool) (*WriteHandle, error) {
	return openBuffered(ctx, f.fs, f, f.MaxSize(), truncate, f.commit)
}

// commit validates and stores new content of the chunk.
func (f *Chunk) commit(ctx context.Context, content []byte) error {
	return f.arr.commitChunk(ctx, f.path, f.coords, content)
}

func (f *Chunk) Truncate(ctx context.Context, size int64) error { return truncate(ctx, f, size) }

// Temp is a temporary file: a name in a view that is neither a chunk nor a
// document, such as the file zarr-python 2 writes before renaming it onto a
// chunk name. Its content lives in memory until it is renamed or removed.
type Temp struct {
	place
	data *tempData
}

func (f *Temp) Attr(context.Context) (Attr, error) { return f.attr(), nil }

func (f *Temp) attr() Attr {
	f.data.mu.Lock()
	defer f.data.mu.Unlock()
	return Attr{Ino: f.fs.inode(f.view, f.path), Size: int64(len(f.data.data)), Mtime: f.data.mtime}
}

func (f *Temp) Open(context.Context) (*Handle, error) {
	f.data.mu.Lock()
	b := slices.Clone(f.data.data)
	f.data.mu.Unlock()
	return &Handle{data: b, size: int64(len(b))}, nil
}

func (f *Temp) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	f.data.mu.Lock()
	defer f.data.mu.Unlock()
	if off >= int64(len(f.data.data)) {
		return 0, io.EOF
	}
	return copy(p, f.data.data[off:]), nil
}

func (f *Temp) ReadShared(ctx context.Context, p []byte, off int64) ([]byte, error) {
	return readCopy(ctx, f, p, off)
}

// OpenWrite opens the temporary file for writing in place.
func (f *Temp) OpenWrite(_ context.Context, truncate bool) (*WriteHandle, error) {
	if !f.fs.Writable() {
		return nil, ErrReadOnly
	}
	h := &WriteHandle{temp: f.data, fs: f.fs, limit: maxTempSize}
	if truncate {
		if err := h.Truncate(0); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (f *Temp) Truncate(ctx context.Context, size int64) error { return truncate(ctx, f, size) }
