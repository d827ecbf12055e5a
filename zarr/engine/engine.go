// Package engine reads the inner chunks of a Zarr store: it locates an
// inner chunk by array and coordinates in its shard's index (cached, and
// revalidated against the store), reads its stored bytes (by ranges
// coalesced and fetched ahead of readers, through the memory, disk and
// cluster caches, or from open shard files), and lists the stored chunks.
// Every answer names the store generation it was read at.
//
// A shard is a key-value store over the base store, as tensorstore's
// zarr3_sharding_indexed sees it: the engine is that store, read side, for
// every shard of a hierarchy. The views of package fs/keyspace present
// its chunks as files.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zarrfs/zarrfs/cache"
	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/cache/diskcache"
	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// ErrCorrupt: stored data cannot be served. Wrapped with the store key and
// the reason.
var ErrCorrupt = errors.New("corrupt data")

// ErrStale: a shard changed between reading its index and reading its
// bytes; locate the chunk again, fresh.
var ErrStale = errors.New("shard changed")

// Options configure an Engine.
type Options struct {
	// CacheBytes bounds the memory cache of chunk bytes (and of what its
	// users keep there, see Cache); shard indexes take up to an eighth
	// more (objectsShare).
	CacheBytes int64
	// Revalidate is how long a cached shard index is trusted before the
	// shard is checked for external changes again.
	Revalidate time.Duration
	// Logger receives one line per problem (corrupt shards).
	Logger *slog.Logger
	// DiskCache, for stores read by ranges, keeps shard indexes and chunk
	// bytes on local disk across mounts; nil keeps none.
	DiskCache *diskcache.Cache
	// ReadAhead fetches, from stores read by ranges, the chunks of shards
	// read densely and those after a sequential reader (ReadAheadFrom).
	ReadAhead bool
	// Pending are the updates not yet in their shards, which locating and
	// listing answer with; nil: none.
	Pending Pending
	// Changed is told about each inner chunk of a stored object that a
	// check found changed outside this process, once its new state is
	// cached; nil: nobody is told.
	Changed func(a *zarr.Array, coords []int)
}

// Pending are inner chunk updates that their shards do not hold yet (a
// writeback.Writer's, or a writeback.Overlay's).
type Pending interface {
	Lookup(a *zarr.Array, coords []int) (writeback.Pending, bool)
	PendingShards(a *zarr.Array) map[string]writeback.PendingShard
}

// Engine reads the inner chunks of one store.
type Engine struct {
	store  store.Store
	id     string // the store's identity, as the caches' keys name it
	opts   Options
	counts counters
	logged sync.Map // problem -> struct{}: log each problem once

	cache *cache.Cache // keys: cachekeys.go
	// objects keeps what is known of stored objects (shard indexes),
	// apart from cache: chunk bytes streaming through it must not evict
	// the index their readers go on locating chunks in (each eviction
	// costs a reader an index request more).
	objects *cache.Cache
	// files keeps shard files open on stores that open values (local
	// directories); on others chunks are read by range (nil).
	files *fileCache
	lists listings
	// fetching holds the chunks that a fetch under way will cache, by
	// chunkRangeKey: a *span.
	fetching sync.Map
	inflight *inflight // the bytes of those spans
	// cluster shares what is read from a remote store with the mounts of
	// other machines (JoinCluster); nil: none.
	cluster    *cluster.Cluster
	kinds      []PeerKind // of the cluster's values, besides the engine's
	peerVerify PeerVerify
	// blocks reads stored bytes through the block caches (stackBlocks),
	// ending at origin; nil: none share blocks, read ranges from origin.
	// Atomic: JoinCluster restacks them while peers may ask already.
	blocks atomic.Pointer[blocks.Memory]
	// unshared is blocks without the cluster, for the arrays whose
	// chunks peers do not serve (chunksFromPeers); nil without a disk
	// cache.
	unshared atomic.Pointer[blocks.Memory]
	origin   blocks.Origin
	// ahead fetches chunks ahead of readers (ahead.go).
	ahead         fetchAhead
	rewriteCounts sync.Map // store key of a rewritten object -> *atomic.Uint64, see rewrites
	layouts       sync.Map // the index layouts of the engine's arrays, joined -> []string (Rewritten)
	// bg is the context of work no request waits for (read-ahead, checks
	// of shards outlasting their readers' wait), cancelled by Close: work
	// waiting on a stalled store must not hold up an unmount.
	bg       context.Context
	stopBg   context.CancelFunc
	checks   sync.WaitGroup // checks under way in the background
	checking sync.Map       // store key -> *check under way
	watch    watching       // objects checked every Revalidate (watch.go)
}

// objectsShare: the states of stored objects take up to 1/objectsShare of
// Options.CacheBytes besides it (an index of a shard of 1024 inner chunks
// takes 34 KiB: 32 MiB keeps about 960 of them at the default size).
const objectsShare = 8

// New returns the engine reading s.
func New(s store.Store, opts Options) *Engine {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 256 << 20
	}
	if opts.Revalidate <= 0 {
		opts.Revalidate = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Changed == nil {
		opts.Changed = func(*zarr.Array, []int) {}
	}
	bg, stopBg := context.WithCancel(context.Background())
	e := &Engine{store: s, id: s.String(), opts: opts, cache: cache.New(opts.CacheBytes), objects: cache.New(opts.CacheBytes / objectsShare), bg: bg, stopBg: stopBg}
	e.ahead.fetches = make(chan struct{}, remoteFetchesAhead)
	e.inflight = newInflight(opts.CacheBytes)
	if o, ok := s.(store.Opener); ok && !s.Remote() {
		e.files = newFileCache(o, 128)
	}
	e.origin = blocks.Origin{Name: e.id, Store: countedReads{e}}
	e.stackBlocks()
	return e
}

// Close stops the work under way ahead of readers and releases open shard
// files.
func (e *Engine) Close() {
	e.stopBg()
	e.ahead.work.Wait()
	e.checks.Wait()
	if e.files != nil {
		e.files.close()
	}
	if e.cluster != nil {
		e.cluster.Close()
	}
}

// Cache is the memory cache the engine keeps stored bytes in, which its
// users share for what they derive from them, under keys of their own
// (see cachekeys.go for the engine's).
func (e *Engine) Cache() *cache.Cache { return e.cache }

// Cluster is the cluster the engine joined (JoinCluster); nil if none.
func (e *Engine) Cluster() *cluster.Cluster { return e.cluster }

// OpensFiles reports whether chunks are read from open shard files (a
// local store), rather than by ranges.
func (e *Engine) OpensFiles() bool { return e.files != nil }

// Revalidate is how long what is known of a stored object is trusted.
func (e *Engine) Revalidate() time.Duration { return e.opts.Revalidate }

// LogOnce logs a problem with a store key the first time it is seen.
func (e *Engine) LogOnce(ctx context.Context, key, msg string, args ...any) {
	if _, seen := e.logged.LoadOrStore(key+"\x00"+msg, struct{}{}); !seen {
		e.opts.Logger.WarnContext(ctx, msg, append([]any{"key", key}, args...)...)
	}
}

// LoadContext is the context a reader waits for a shared load with. A
// load from a local store (a file read, a transcode) is brief: the reader
// runs it in its own goroutine, without a handoff to another (see
// flight.Group.Do), and is not interrupted during it. One from a remote
// store can stall, and the reader must be able to leave it.
func (e *Engine) LoadContext(ctx context.Context) context.Context {
	if e.files != nil {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// Array reads the inner chunks of one array: the chunks of its grid, or
// of its shards' inner grid when it is sharded. Each Array keeps its own
// record of its readers (for coalescing and reading ahead): one per view.
type Array struct {
	e     *Engine
	z     *zarr.Array
	shard *sharding.Codec // nil for unsharded arrays
	grid  []int           // chunks along each axis
	// source decodes one stored chunk; chain are its codecs.
	source *codec.Pipeline
	chain  []meta.Codec
	// indexLayout is how the array reads its shards' indexes, as cache
	// keys name it (see indexLayout).
	indexLayout []string
	// recent are the shards of the last reads from a store read by ranges.
	recent recent
	// seq is where a reader reading the chunks in key order is (see
	// Upcoming).
	seq sequence
	// dense are the shards lately found read densely, and loaded those
	// whose indexes were lately loaded, by key-order position (see
	// fetchFollowing and loadFollowing).
	dense, loaded shardRing
	// indexesLoaded is set once the indexes of all the array's shards
	// were sent for (loadIndexes).
	indexesLoaded atomic.Bool
	// fetched is the key-order position of the first chunk that no walk
	// of walkAhead has found cached or fetching.
	mu      sync.Mutex
	fetched int
	// misses counts, by shard key, the reads waiting on its chunks'
	// fetches (see waiting).
	misses map[string]int
}

// Array returns a reader of the inner chunks of a.
func (e *Engine) Array(a *zarr.Array) *Array {
	x := &Array{e: e, z: a, shard: a.Sharding(), grid: a.Grid(), source: a.Pipeline(), chain: a.Codecs}
	if x.shard != nil {
		x.grid, x.source, x.chain = a.InnerGrid(), x.shard.Inner(), x.shard.Config().Codecs
	}
	x.indexLayout = indexLayout(x)
	e.layouts.Store(strings.Join(x.indexLayout, "\x00"), x.indexLayout)
	return x
}

// Zarr is the array read.
func (a *Array) Zarr() *zarr.Array { return a.z }

// Sharding is the array's sharding codec; nil when it is unsharded.
func (a *Array) Sharding() *sharding.Codec { return a.shard }

// Grid is the number of (inner) chunks along each axis.
func (a *Array) Grid() []int { return a.grid }

// Source decodes one stored (inner) chunk.
func (a *Array) Source() *codec.Pipeline { return a.source }
