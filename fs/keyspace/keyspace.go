// Package keyspace presents a Zarr hierarchy as trees of virtual files, one
// per key space ("view"): the v3 view shows every array without sharding,
// each stored inner chunk a file at its v3 key; the v2 view shows the same
// hierarchy as Zarr v2. It is plain Go with no FUSE dependency, so every
// behaviour of the mount can be tested without mounting; package fs binds
// it to go-fuse.
//
// Chunk files are resolved by parsing names to coordinates, which the read
// engine (package zarr/engine) locates in their shard's index; directory
// listings stream from the shard indexes. File content is the stored
// bytes of the inner chunk (served as a byte range of the shard), or,
// where the view's codecs differ from the stored ones, the chunk
// transcoded.
package keyspace

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zarrfs/zarrfs/cache"
	"github.com/zarrfs/zarrfs/cache/diskcache"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// View is one key space.
type View uint8

// The views.
const (
	V3 View = iota + 1
	V2
)

func (v View) String() string {
	if v == V2 {
		return "v2"
	}
	return "v3"
}

// Errors of the key spaces; package fs maps them to errno values.
var (
	// ErrNotFound: no such file or directory (ENOENT).
	ErrNotFound = errors.New("no such file or directory")
	// ErrCorrupt: stored data cannot be served (EIO). Wrapped with the
	// store key and the reason.
	ErrCorrupt = engine.ErrCorrupt
	// ErrNoSpace: temporary files hold all the memory they may (ENOSPC).
	ErrNoSpace = errors.New("no space for temporary files")
	// ErrInvalid: written bytes are not one valid chunk or document (EINVAL).
	ErrInvalid = errors.New("invalid content")
	// ErrPermission: the change is not allowed, such as structural
	// metadata edits or renaming chunks (EPERM).
	ErrPermission = errors.New("operation not permitted")
	// ErrReadOnly: the mount or store does not take writes (EROFS).
	ErrReadOnly = errors.New("read-only")
	// ErrExists: the name is taken (EEXIST).
	ErrExists = errors.New("file exists")
)

// Encodings of transcoded chunks in the v2 view, all little-endian C
// order.
const (
	// TranscodeRaw, the default, leaves chunks uncompressed (compressor
	// null): no encoding cost, nothing for the reader to decompress, and a
	// size known without a transcode. Reading a store never seen before
	// through the view, it is the faster encoding (docs/PERFORMANCE.md,
	// "Transcoded chunks: raw against blosc lz4"); a chunk the kernel has
	// read whole leaves the cache (Chunk.Delivered), so the cache holds no
	// more than it would compressed. Copies of the view are as large as
	// the array.
	TranscodeRaw = "raw"
	// TranscodeBloscLZ4 compresses with blosc lz4 and byte shuffle,
	// zarr-python 2's default compressor, which every v2 reader has:
	// copies of the view stay about as small as the store.
	TranscodeBloscLZ4 = "blosc-lz4"
	// TranscodeAuto encodes an array's chunks as they are stored:
	// TranscodeRaw if uncompressed, TranscodeBloscLZ4 if compressed, for
	// copies of the view about as small as the store.
	TranscodeAuto = "auto"
)

// Options configure an FS.
type Options struct {
	// V2Separator is the dimension separator of v2 chunk keys: "." (the
	// default) or "/".
	V2Separator string
	// V2Transcode is how the v2 view encodes the chunks it transcodes:
	// TranscodeRaw (the default), TranscodeBloscLZ4 or TranscodeAuto.
	V2Transcode string
	// CacheBytes bounds the cache of shard indexes and transcoded chunks.
	CacheBytes int64
	// Revalidate is how long a cached shard index is trusted before the
	// shard is checked for external changes again (opens always check).
	Revalidate time.Duration
	// Logger receives one line per problem (omitted arrays, corrupt shards).
	Logger *slog.Logger
	// Writer takes writes; nil makes the views read-only.
	Writer *writeback.Writer
	// Unpublished are updates in journals of writers that died, which
	// read-only views show (with a Writer, they were replayed already).
	Unpublished *writeback.Overlay
	// DiskCache, for stores read by ranges, keeps shard indexes and chunk
	// bytes on local disk across mounts; nil keeps none.
	DiskCache *diskcache.Cache
	// ReadAhead is how many transcoded chunks are prepared ahead of a
	// reader reading an array's chunks in key order; 0 prepares none.
	ReadAhead int
	// FetchAhead has chunks of stores read by ranges fetched before their
	// readers ask: those after a reader reading an array's chunks in key
	// order, and the rest of a shard read densely.
	FetchAhead bool
	// NewShardBytes is the uncompressed size a shard of an array created
	// through the views holds at most (whole inner chunks; at least one):
	// 0 means DefaultNewShardBytes, a negative value stores new arrays
	// unsharded, as written.
	NewShardBytes int64
	// NewStore: the store is empty, and the hierarchy's root group is not
	// in it yet; its zarr.json is written before the first node or
	// attribute (storeRoot).
	NewStore bool
}

// FS holds the views of one hierarchy and the caches they share.
type FS struct {
	h      *zarr.Hierarchy
	store  store.Store
	opts   Options
	counts counters

	// The views, built once from the hierarchy.
	roots map[View]*Dir
	// vnodes are the directories of group and array nodes by view and path.
	vnodes map[View]map[string]*vnode
	// arrays maps an array's path to how each view shows it, to find the
	// aliases of a written chunk.
	arrays map[string]map[View]*arrayView
	// omeLevels are the levels of OME-Zarr images (findOMELevels).
	omeLevels map[string][]string
	mtime     time.Time
	// meta guards metadata documents, which attribute writes replace,
	// and the array views and nodes of vnodes, which resizes replace.
	meta sync.RWMutex
	// structure serializes resizes and deletes.
	structure sync.Mutex
	// doomed are the paths of nodes whose metadata document was
	// unlinked, until rmdir removes them (delete.go); guarded by meta.
	doomed map[string]bool
	// metaGen counts the changes of the hierarchy's documents, to tell
	// whether a .zmetadata made before is current; guarded by meta.
	metaGen uint64

	// Reading: the engine locates and reads the stored chunks; cache is
	// its memory cache, which keeps what the views derive from them too
	// (keys: cachekeys.go).
	engine *engine.Engine
	cache  *cache.Cache
	// readAhead prepares transcoded chunks ahead of sequential readers.
	readAhead *readAhead
	// stopBg cancels the context of work no request waits for (read-ahead),
	// at Close: work waiting on a stalled store must not hold up an unmount.
	stopBg context.CancelFunc

	// Writing.
	temps temps
	// creating serializes the creation of nodes (create.go).
	creating sync.Mutex
	// created holds the paths of the nodes created by this mount, and
	// madeDirs the chunk key directories made in their arrays (tempKey).
	created  sync.Map
	madeDirs sync.Map
	// notify tells the binding which files a write changed (SetNotifier).
	notify func(Alias)
	// rootUnstored: the root group of a new store is not in the store yet
	// (Options.NewStore); rootMu serializes writing it.
	rootUnstored atomic.Bool
	rootMu       sync.Mutex
	// replaced: a node or array view was taken out of the views or
	// replaced (a delete, resize or move), so directories the kernel
	// holds may stand for ones no longer there (Dir.current).
	replaced atomic.Bool
	// movedAway counts, by path, the nodes moved away from it (move.go):
	// what is at the path since gets inode numbers of its own.
	movedAway atomic.Pointer[map[string]uint64]
}

// New builds the views of h.
func New(h *zarr.Hierarchy, opts Options) *FS {
	if opts.V2Separator == "" {
		opts.V2Separator = "."
	}
	if opts.V2Transcode == "" {
		opts.V2Transcode = TranscodeRaw
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	bg, stopBg := context.WithCancel(context.Background())
	f := &FS{
		h: h, store: h.Store, opts: opts,
		readAhead: newReadAhead(bg, opts.ReadAhead),
		stopBg:    stopBg,
		mtime:     time.Now(),
		arrays:    map[string]map[View]*arrayView{},
		vnodes:    map[View]map[string]*vnode{},
		temps:     temps{files: map[string]*tempData{}},
		doomed:    map[string]bool{},
		notify:    func(Alias) {},
	}
	eo := engine.Options{CacheBytes: opts.CacheBytes, Revalidate: opts.Revalidate, Logger: opts.Logger, DiskCache: opts.DiskCache, ReadAhead: opts.FetchAhead,
		Changed: func(a *zarr.Array, coords []int) { f.chunkChanged(a, coords, true) }}
	switch {
	case opts.Writer != nil:
		eo.Pending = opts.Writer
	case opts.Unpublished != nil:
		eo.Pending = opts.Unpublished
	}
	f.rootUnstored.Store(opts.NewStore)
	f.engine = engine.New(h.Store, eo)
	f.cache = f.engine.Cache()
	if opts.Writer != nil {
		opts.Writer.OnPublished(f.engine.Rewritten)
	}
	f.omeLevels = findOMELevels(h)
	f.roots = map[View]*Dir{V3: f.buildView(V3), V2: f.buildView(V2)}
	return f
}

// Root is the root directory of a view.
func (f *FS) Root(v View) *Dir { return f.roots[v] }

// Writable reports whether the views take writes.
func (f *FS) Writable() bool { return f.opts.Writer != nil }

// Revalidate is how long what is known of a stored object is trusted
// (Options.Revalidate).
func (f *FS) Revalidate() time.Duration { return f.engine.Revalidate() }

// Alias names an entry of a view whose content or existence changed.
type Alias struct {
	View View
	Dir  string // the directory's path in the view
	Name string
	// Outside: the change was made outside this mount and seen by a
	// check of its shard, which readers of the shard's files may be
	// waiting for: the notifier must not wait for them.
	Outside bool
	// Gone: the name no longer stands for what the kernel may hold under
	// it (a node moved away, or moved there): its entry is dropped, which
	// waits for the kernel's lock of the directory, so the caller holds no
	// lock a request may wait for.
	Gone bool
}

// SetNotifier registers the function told about every entry a write
// changed (in every view), so kernel caches can be invalidated. It must
// be set before the views are used.
func (f *FS) SetNotifier(fn func(Alias)) { f.notify = fn }

// Close stops the work under way ahead of readers and releases open shard
// files.
func (f *FS) Close() {
	f.logAbandoned()
	f.stopBg()
	f.readAhead.work.Wait()
	f.engine.Close()
}

// logOnce logs a problem the first time it is seen.
func (f *FS) logOnce(ctx context.Context, key, msg string, args ...any) {
	f.engine.LogOnce(ctx, key, msg, args...)
}

// Attr describes a file or directory.
type Attr struct {
	Ino   uint64
	Dir   bool
	Size  int64
	Mtime time.Time
	// KeepFor is how long the kernel may keep the name and attributes
	// (and so the pages) of a chunk file without asking: a change of its
	// shard is told (SetNotifier) as the engine's own checks find it
	// (engine.Array.Watch). 0: the mount's --revalidate.
	KeepFor time.Duration
}

// Entry is a name in a directory: exactly one of Dir and File is set.
type Entry struct {
	Name string
	Attr Attr
	Dir  *Dir
	File File
}

// inode returns a stable inode number for a path of a view: a hash, so
// that it needs no table and is the same in every mount. A path a node
// was moved away from (or a path below it) hashes with the number of such
// moves, so that what is there since is never taken for the node moved,
// whose inode the kernel may still hold.
func (f *FS) inode(v View, path string) uint64 {
	var moves uint64
	if away := f.movedAway.Load(); away != nil {
		for p, n := range *away {
			if path == p || strings.HasPrefix(path, p+"/") {
				moves += n
			}
		}
	}
	return inode(v, path, moves)
}

func inode(v View, path string, moves uint64) uint64 {
	h := fnv.New64a()
	h.Write([]byte{byte(v)})
	h.Write([]byte(path))
	if moves > 0 {
		h.Write(binary.LittleEndian.AppendUint64(nil, moves))
	}
	ino := h.Sum64()
	if ino <= 1 { // 1 is the mount root
		ino += 2
	}
	return ino
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
