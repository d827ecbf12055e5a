package keyspace

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Bounds on buffered writes, so a runaway writer gets EFBIG (one file) or
// ENOSPC (all temporary files: a careless cp of a tree into the mount)
// rather than exhausting memory.
const (
	maxDocSize  = 16 << 20
	maxTempSize = 1 << 30
)

var maxTempTotal int64 = 2 << 30 // a variable for the tests

// tempData is the content of a temporary file (Temp), shared by its
// entries and open handles.
type tempData struct {
	mu    sync.Mutex
	data  []byte
	mtime time.Time
	// counted is len(data) as temps.size counts it, until the file is
	// gone (unlinked or replaced; it may still be open); guarded by temps.mu.
	counted int64
	gone    bool
}

// temps holds the temporary files of every view, by view and path.
type temps struct {
	mu    sync.Mutex
	files map[string]*tempData
	size  int64 // bytes of all of them
	// dirs are the pending directories (create.go), by view and path.
	dirs map[string]bool
}

// resize counts a temporary file's new size, refusing growth beyond
// maxTempTotal for all of them together.
func (t *temps) resize(f *tempData, size int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f.gone {
		return nil // freed with its last handle
	}
	if size > f.counted && t.size+size-f.counted > maxTempTotal {
		return fmt.Errorf("%w: temporary files hold %d bytes in memory; at most %d", ErrNoSpace, t.size, maxTempTotal)
	}
	t.size += size - f.counted
	f.counted = size
	return nil
}

// put files f at key k, replacing (and no longer counting) what was there.
func (t *temps) put(k string, f *tempData) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.files[k]; old != nil && old != f {
		t.forget(old)
	}
	t.files[k] = f
}

// move files what is at from at to instead, still counted.
func (t *temps) move(from, to string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.files[from]
	if old := t.files[to]; old != nil && old != f {
		t.forget(old)
	}
	delete(t.files, from)
	t.files[to] = f
}

// forget stops counting a file that is gone; t.mu is held.
func (t *temps) forget(f *tempData) {
	t.size -= f.counted
	f.counted, f.gone = 0, true
}

func tempKey(v View, p string) string { return v.String() + ":" + p }

func (t *temps) get(v View, p string) *tempData {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.files[tempKey(v, p)]
}

// in lists the temporary files directly in a directory, sorted.
func (t *temps) in(v View, dir string) []string {
	prefix := tempKey(v, joinPath(dir, ""))
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for k := range t.files {
		if rest, ok := strings.CutPrefix(k, prefix); ok && !strings.Contains(rest, "/") {
			names = append(names, rest)
		}
	}
	slices.Sort(names)
	return names
}

// WriteHandle is a file open for writing. Chunk and document writes are
// buffered and committed (validated, then stored) by Commit, which close
// and fsync call; temporary files are written in place.
type WriteHandle struct {
	mu sync.Mutex
	// commit validates and stores the content of a chunk or document;
	// nil for temporary files, which are written in place (temp), except
	// the metadata document that creates a new directory's node
	// (create.go).
	commit func(ctx context.Context, content []byte) error
	temp   *tempData
	buf    []byte
	limit  int64
	dirty  bool
	// refused is set when Commit rejected the content, until it changes.
	refused bool
	// kept: a commit stored buf, and the writer keeps it until the shard
	// is published, so the next change must go to a copy (own).
	kept bool
	fs   *FS
}

// openBuffered opens a chunk or document f of fs for writing into a buffer
// of at most limit bytes, committed by commit.
func openBuffered(ctx context.Context, fs *FS, f File, limit int64, truncate bool, commit func(context.Context, []byte) error) (*WriteHandle, error) {
	if !fs.Writable() {
		return nil, ErrReadOnly
	}
	h := &WriteHandle{commit: commit, fs: fs, dirty: truncate, limit: limit}
	if !truncate {
		r, err := f.Open(ctx)
		if err != nil {
			return nil, err
		}
		if r.Size() > limit {
			r.Close()
			return nil, fmt.Errorf("%w: %s holds %d bytes, more than the %d any such file can hold", store.ErrTooLarge, f.Path(), r.Size(), limit)
		}
		h.buf = make([]byte, r.Size())
		_, err = r.ReadAt(h.buf, 0)
		r.Close()
		if err != nil && err != io.EOF {
			return nil, err
		}
	}
	return h, nil
}

// truncate resizes f's content and commits it (File.Truncate).
func truncate(ctx context.Context, f File, size int64) error {
	h, err := f.OpenWrite(ctx, false)
	if err != nil {
		return err
	}
	if err := h.Truncate(size); err != nil {
		return err
	}
	return h.Commit(ctx)
}

// own makes buf the handle's own again after a commit kept it; h.mu is
// held.
func (h *WriteHandle) own() {
	if h.kept {
		h.buf, h.kept = slices.Clone(h.buf), false
	}
}

// WriteAt writes into the buffered content.
func (h *WriteHandle) WriteAt(p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.own()
	buf := &h.buf
	if h.temp != nil {
		h.temp.mu.Lock()
		defer h.temp.mu.Unlock()
		buf = &h.temp.data
		h.temp.mtime = time.Now()
	}
	end := off + int64(len(p))
	if off < 0 || end > h.limit {
		return 0, fmt.Errorf("%w: a write up to byte %d, more than the %d bytes this file can hold", store.ErrTooLarge, end, h.limit)
	}
	if h.temp != nil && end > int64(len(*buf)) {
		if err := h.fs.temps.resize(h.temp, end); err != nil {
			return 0, err
		}
	}
	switch {
	case off == int64(len(*buf)):
		// Appended: the new memory is not zeroed before p fills it (a
		// chunk file is one such write).
		*buf = append(*buf, p...)
	case end > int64(len(*buf)):
		n := len(*buf)
		*buf = slices.Grow(*buf, int(end)-n)[:end]
		if off > int64(n) {
			clear((*buf)[n:off]) // a hole reads as zeros, whatever a truncate left past the end
		}
		fallthrough
	default:
		copy((*buf)[off:], p)
	}
	h.dirty, h.refused = true, false
	return len(p), nil
}

// ReadAt reads the buffered content.
func (h *WriteHandle) ReadAt(p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	buf := h.buf
	if h.temp != nil {
		h.temp.mu.Lock()
		defer h.temp.mu.Unlock()
		buf = h.temp.data
	}
	if off >= int64(len(buf)) {
		return 0, io.EOF
	}
	return copy(p, buf[off:]), nil
}

// Truncate sets the content's size.
func (h *WriteHandle) Truncate(size int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if size < 0 || size > h.limit {
		return fmt.Errorf("%w: a size of %d bytes, more than the %d this file can hold", store.ErrTooLarge, size, h.limit)
	}
	h.own()
	buf := &h.buf
	if h.temp != nil {
		h.temp.mu.Lock()
		defer h.temp.mu.Unlock()
		if err := h.fs.temps.resize(h.temp, size); err != nil {
			return err
		}
		buf = &h.temp.data
	}
	switch {
	case size == 0:
		*buf = nil
	case size <= int64(len(*buf)):
		*buf = (*buf)[:size]
	default:
		*buf = append(*buf, make([]byte, size-int64(len(*buf)))...)
	}
	h.dirty, h.refused = true, false
	return nil
}

// Pending returns the size of the content written but not yet committed,
// which is what the file holds for now; ok is false when the file is what
// its last commit made it, or the content was refused (a failed close
// leaves its handle open until the kernel releases it, later).
func (h *WriteHandle) Pending() (size int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.temp != nil {
		h.temp.mu.Lock()
		defer h.temp.mu.Unlock()
		return int64(len(h.temp.data)), true
	}
	return int64(len(h.buf)), h.dirty && !h.refused
}

// Commit validates and stores what was written since the last commit.
// A rejected write changes nothing in the store and returns ErrInvalid or
// ErrPermission; the handle keeps its content.
func (h *WriteHandle) Commit(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty || h.commit == nil {
		return nil
	}
	content := h.buf
	if h.temp != nil {
		h.temp.mu.Lock()
		content = slices.Clone(h.temp.data)
		h.temp.mu.Unlock()
	}
	if err := h.commit(ctx, content); err != nil {
		h.refused = true
		return err
	}
	h.dirty, h.kept = false, true
	return nil
}

// Sync commits and makes every acknowledged write durable on disk.
func (h *WriteHandle) Sync(ctx context.Context) error {
	if err := h.Commit(ctx); err != nil {
		return err
	}
	return h.fs.opts.Writer.Sync()
}

// commitChunk validates bytes written to a chunk file of the view and
// stores them as the inner chunk.
func (av *arrayView) commitChunk(ctx context.Context, filePath string, coords []int, content []byte) error {
	stored, err := av.toStored(content)
	if err != nil {
		av.fs.logOnce(ctx, filePath, "write refused: the bytes are not one inner chunk of this array", "error", err)
		return fmt.Errorf("%w: %s: %v", ErrInvalid, filePath, err)
	}
	if err := av.fs.opts.Writer.Put(ctx, av.a, coords, stored); err != nil {
		return err
	}
	av.fs.chunkChanged(av.a, coords, false)
	return nil
}

// toStored turns bytes in the view's encoding into the stored encoding of
// the inner chunk, checking that they decode to exactly one inner chunk.
func (av *arrayView) toStored(b []byte) ([]byte, error) {
	if av.target != nil {
		chunk, err := av.target.Decode(b)
		if err != nil {
			return nil, err
		}
		chunk.Type = av.source.Spec().Type
		return av.source.Encode(chunk)
	}
	stored := b
	if av.drop == 4 { // the view leaves out a trailing crc32c: add it back
		stored = binary.LittleEndian.AppendUint32(slices.Clip(b), codec.CRC32C(b))
	}
	if err := av.source.Check(stored); err != nil {
		return nil, err
	}
	return stored, nil
}

// chunkChanged tells the notifier about the chunk's file in every view.
// Only the file: chunk key directories always exist, and a writable
// mount's listings are not cached.
func (f *FS) chunkChanged(a *zarr.Array, coords []int, outside bool) {
	f.meta.RLock()
	views := f.arrays[a.Path]
	f.meta.RUnlock()
	for v, av := range views {
		file := joinPath(a.Path, av.keys.Key(coords))
		f.notify(Alias{View: v, Dir: parentOf(file), Name: path.Base(file), Outside: outside})
	}
}

func parentOf(p string) string {
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}

// chunkAt returns the coordinates of the chunk file name would be in this
// directory, whether or not it is stored; ok is false for other names.
func (d *Dir) chunkAt(name string) (av *arrayView, coords []int, ok bool) {
	av = d.arr
	if d.node != nil {
		av = d.fs.arrayOf(d.node)
	}
	if av == nil {
		return nil, nil, false
	}
	nested, root := av.nested()
	switch {
	case d.node != nil && !nested:
		c, ok := av.keys.Parse(name, len(av.grid))
		return av, c, ok && nd.Inside(c, av.grid)
	case d.node != nil && root != "":
		return nil, nil, false // only the key directory is here
	}
	depth := max(d.depth, 0)
	if depth != len(av.grid)-1 {
		return nil, nil, false
	}
	c, err := parseCoordinate(name, av.grid[depth])
	if err != nil {
		return nil, nil, false
	}
	return av, append(slices.Clone(d.prefix), c), true
}

// misplacedChunk explains why name, which is not a chunk of the directory's
// array, still reads as a chunk key (decimal coordinates): it lies outside
// the grid or has the wrong number of dimensions. Such a file would be
// taken for a temporary file and vanish at unmount, so it is refused.
func (d *Dir) misplacedChunk(name string) error {
	av := d.arr
	if d.node != nil {
		av = d.fs.arrayOf(d.node)
	}
	if av == nil || len(av.grid) == 0 {
		return nil
	}
	var parts []string
	if nested, _ := av.nested(); nested {
		if d.node != nil {
			return nil // the key directory's name is here, not chunks
		}
		parts = []string{name}
		if d.depth != len(av.grid)-1 {
			return decimalKey(parts, fmt.Sprintf("a chunk file at depth %d of a %d-dimensional array's key directories", d.depth+1, len(av.grid)))
		}
	} else {
		key := name
		if av.keys.Name == meta.KeyEncodingDefault {
			var ok bool
			if key, ok = strings.CutPrefix(name, "c"+av.keys.Separator); !ok {
				return nil
			}
		}
		parts = strings.Split(key, av.keys.Separator)
		if len(parts) != len(av.grid) {
			return decimalKey(parts, fmt.Sprintf("%d coordinates for a %d-dimensional array", len(parts), len(av.grid)))
		}
	}
	return decimalKey(parts, fmt.Sprintf("outside the chunk grid %v", av.grid))
}

// decimalKey returns an ErrInvalid saying why, when every part is a
// decimal number (the name reads as a chunk key).
func decimalKey(parts []string, why string) error {
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 63); err != nil {
			return nil
		}
	}
	return fmt.Errorf("%w: not a chunk of this array: %s", ErrInvalid, why)
}

// Create creates a file for writing: a chunk (committed on close), or a
// temporary file for any name that is not a chunk or document.
func (d *Dir) Create(ctx context.Context, name string, exclusive bool) (Entry, *WriteHandle, error) {
	if !d.fs.Writable() {
		return Entry{}, nil, ErrReadOnly
	}
	d, err := d.current(ctx).recreating(ctx, name)
	if err != nil {
		return Entry{}, nil, err
	}
	p := joinPath(d.path, name)
	if av, coords, ok := d.chunkAt(name); ok {
		f := &Chunk{place: place{fs: d.fs, view: d.view, path: p}, arr: av, coords: coords}
		if _, found, _ := av.locate(ctx, coords, false); found && exclusive {
			return Entry{}, nil, ErrExists
		}
		h := &WriteHandle{commit: f.commit, fs: d.fs, dirty: true, limit: av.source.MaxEncodedSize()}
		return Entry{Name: name, File: f, Attr: Attr{Ino: d.fs.inode(d.view, p), Mtime: time.Now()}}, h, nil
	}
	if f := d.hiddenDocAt(name); f != nil {
		h, err := f.OpenWrite(ctx, true)
		return Entry{Name: name, File: f, Attr: f.attr()}, h, err
	}
	if e, err := d.Lookup(ctx, name); err == nil {
		if _, isTemp := e.File.(*Temp); exclusive || !isTemp {
			return Entry{}, nil, ErrExists
		}
	}
	if err := d.misplacedChunk(name); err != nil {
		d.fs.logOnce(ctx, p, "create refused: the name reads as a chunk key but names no chunk of the array", "error", err)
		return Entry{}, nil, fmt.Errorf("%s: %w", p, err)
	}
	t := &tempData{mtime: time.Now()}
	d.fs.temps.put(tempKey(d.view, p), t)
	f := &Temp{place: place{fs: d.fs, view: d.view, path: p}, data: t}
	return Entry{Name: name, File: f, Attr: f.attr()}, d.tempHandle(name, t), nil
}

// Unlink removes a temporary file, or empties a chunk (its inner chunk is
// deleted; a shard left without chunks is deleted).
func (d *Dir) Unlink(ctx context.Context, name string) error {
	if !d.fs.Writable() {
		return ErrReadOnly
	}
	d = d.current(ctx)
	p := joinPath(d.path, name)
	if d.fs.temps.remove(d.view, p) {
		return nil
	}
	if d.view == V2 && name == zarr.ZMetadata {
		// Derived from the hierarchy in every group: nothing is stored, so
		// nothing is removed (shutil.rmtree of a group unlinks it too).
		_, err := d.Lookup(ctx, name)
		return err
	}
	if d.node != nil {
		if ok, err := d.unlinkDoc(ctx, name); ok {
			return err
		}
	}
	av, coords, ok := d.chunkAt(name)
	if ok && d.fs.isDoomed(av.path) {
		return nil // rmdir of the array's directory deletes its shards
	}
	if !ok {
		if d.misplacedChunk(name) != nil {
			// A chunk key outside the grid: the kernel still holds the name
			// of a chunk a shrink deleted (zarr-python 2 stats each old
			// chunk, then removes it). It is gone, as asked.
			return nil
		}
		if _, err := d.Lookup(ctx, name); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s is not a chunk", ErrPermission, p)
	}
	if _, found, err := av.locate(ctx, coords, true); err != nil || !found {
		if err == nil {
			err = ErrNotFound
		}
		return err
	}
	if err := d.fs.opts.Writer.Delete(ctx, av.a, coords); err != nil {
		return err
	}
	d.fs.chunkChanged(av.a, coords, false)
	return nil
}

func (t *temps) remove(v View, p string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tempKey(v, p)
	f, ok := t.files[k]
	if ok {
		t.forget(f)
	}
	delete(t.files, k)
	return ok
}

// Rename moves a temporary file: onto a chunk name it commits the content
// as that chunk, onto a document name it writes the document, onto any
// other name it just moves. A group or array directory moves the node
// (move.go). Chunks and documents themselves cannot be renamed.
func (d *Dir) Rename(ctx context.Context, name string, to *Dir, newName string) error {
	if !d.fs.Writable() {
		return ErrReadOnly
	}
	if to.view != d.view {
		return fmt.Errorf("%w: rename across views", ErrPermission)
	}
	d, to = d.current(ctx), to.current(ctx)
	if d.gone || to.gone {
		return ErrNotFound // a directory deleted or moved away since
	}
	src := joinPath(d.path, name)
	t := d.fs.temps.get(d.view, src)
	if t == nil {
		e, err := d.Lookup(ctx, name)
		if err != nil {
			return err
		}
		if e.Dir != nil && e.Dir.node != nil {
			return d.fs.moveNode(ctx, e.Dir.node, to, newName) // move.go
		}
		return fmt.Errorf("%w: only temporary files, groups and arrays can be renamed, not %s", ErrPermission, src)
	}
	t.mu.Lock()
	content := slices.Clone(t.data)
	t.mu.Unlock()
	to, err := to.recreating(ctx, newName)
	if err != nil {
		return err
	}
	dst := joinPath(to.path, newName)
	if to.pending && createsNode(to.view, newName) {
		return d.fs.renameCreating(ctx, d.view, src, to.path, newName, content)
	}
	if av, coords, ok := to.chunkAt(newName); ok {
		if err := av.commitChunk(ctx, dst, coords, content); err != nil {
			return err
		}
		d.fs.temps.remove(d.view, src)
		return nil
	}
	if doc := to.hiddenDocAt(newName); doc != nil {
		if err := d.fs.writeDoc(ctx, doc.node, to.view, newName, content); err != nil {
			return err
		}
		d.fs.temps.remove(d.view, src)
		return nil
	}
	e, err := to.Lookup(ctx, newName)
	doc, isDoc := e.File.(*Document)
	switch {
	case err == nil && isDoc:
		if err := d.fs.writeDoc(ctx, doc.node, to.view, newName, content); err != nil {
			return err
		}
		d.fs.temps.remove(d.view, src)
	case err == nil && e.Dir != nil:
		return fmt.Errorf("%w: %s is a directory", ErrExists, dst)
	default:
		if err := to.misplacedChunk(newName); err != nil {
			d.fs.logOnce(ctx, dst, "rename refused: the name reads as a chunk key but names no chunk of the array", "error", err)
			return fmt.Errorf("%s: %w", dst, err)
		}
		d.fs.temps.move(tempKey(d.view, src), tempKey(to.view, dst))
	}
	return nil
}

// Mkdir makes a pending directory in a group (create.go); chunk key
// directories always exist.
func (d *Dir) Mkdir(ctx context.Context, name string) error {
	if !d.fs.Writable() {
		return ErrReadOnly
	}
	d = d.current(ctx)
	if _, err := d.Lookup(ctx, name); err == nil {
		return ErrExists
	}
	if d.holdsNewNodes() {
		return d.mkdirPending(ctx, name)
	}
	if d.makeChunkDir(ctx, name) {
		return nil
	}
	if err := d.refuseInV2(ctx, name); err != nil {
		return err
	}
	return d.refuseStructure(ctx, name)
}

// Rmdir removes the directory of a group or array whose metadata
// document was unlinked (delete.go), or a chunk key directory emptied.
func (d *Dir) Rmdir(ctx context.Context, name string) error {
	if !d.fs.Writable() {
		return ErrReadOnly
	}
	d = d.current(ctx)
	e, err := d.Lookup(ctx, name)
	switch {
	case err != nil:
		return err
	case e.Dir == nil:
		return fmt.Errorf("%w: %s is not a directory", ErrInvalid, joinPath(d.path, name))
	}
	if p := joinPath(d.path, name); d.fs.temps.isDir(d.view, p) {
		return d.fs.temps.rmdir(d.view, p)
	}
	switch {
	case e.Dir.node != nil:
		return d.removeNode(ctx, name, e.Dir.node)
	case e.Dir.arr != nil:
		return d.rmdirKeys(ctx, name, e.Dir)
	}
	return d.refuseStructure(ctx, name)
}

func (d *Dir) refuseStructure(ctx context.Context, name string) error {
	d.fs.logOnce(ctx, joinPath(d.path, name), "structural edit refused: the directories of a view follow the hierarchy")
	return fmt.Errorf("%w: directories of a view follow the hierarchy", ErrPermission)
}
