// Package writeback applies inner chunk updates to shards so that they are
// safe, cheap and lose nothing:
//
//   - an update is appended to this process's journal before it is
//     acknowledged, so it survives the process being killed (and, after
//     Sync, the machine crashing);
//   - until its shard is published, the update is held in memory, where
//     readers see it at once (Lookup);
//   - a shard is published when the updates of its array have gone quiet,
//     by one locked read-modify-write of the shard (store.Update): updates
//     to many inner chunks of a shard cost about one shard rewrite, every
//     shard in the
//     store is always a whole, valid shard, and writers in other processes
//     never lose each other's updates;
//   - journals of processes that died are replayed by the next writer.
package writeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Options tune when shards are published.
type Options struct {
	// IdleDelay: a shard is published once its array has had no update
	// for this long (default 300ms), so a writer going through a shard
	// chunk by chunk causes one rewrite, also when it goes through the
	// array's shards in turn and comes back (cp -r writes the chunk files
	// in the order it lists them, which may visit every shard in turn).
	IdleDelay time.Duration
	// MaxDelay bounds how long an update waits to be published, even if
	// the shard keeps changing (default 5s).
	MaxDelay time.Duration
	// MaxPendingBytes bounds the updates held in memory: past 3/4 of it
	// the shards holding the most are published in the background, and
	// beyond it Put publishes them before returning (default 256 MiB).
	MaxPendingBytes int64
	Logger          *slog.Logger
}

// Writer holds the pending updates of one store.
type Writer struct {
	store   store.Store
	journal *Journal
	opts    Options

	appendMu sync.Mutex // orders journal appends with pending map updates
	lostOnce sync.Once  // logs that the journal was removed
	mu       sync.Mutex // guards the fields below; updates write the journal without it
	shards   map[string]*pendingShard
	pending  int64 // bytes of pending chunk data
	seq      uint64
	// lastUpdate is the time of the newest update of each array with
	// pending updates.
	lastUpdate map[string]time.Time
	idle       *sync.Cond // signalled when a publish finishes

	published       atomic.Pointer[func(shardKey string)] // see OnPublished
	publishedChunks atomic.Uint64                         // see Stats
	log             publishLog

	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

type pendingShard struct {
	a          *zarr.Array
	key        string
	coords     []int
	chunks     map[int]*pendingChunk
	bytes      int64     // of pending chunk data
	first      time.Time // oldest unpublished update
	last       time.Time // newest update
	publishing bool
	retryAt    time.Time
}

// complete: every inner chunk of the shard has a pending update, so
// nothing is gained by waiting to publish it.
func (ps *pendingShard) complete() bool {
	return len(ps.chunks) == ps.a.Sharding().NumChunks()
}

type pendingChunk struct {
	Pending
	pos Pos
}

// Pending is an update of an inner chunk that is not yet in its shard.
type Pending struct {
	Data    []byte
	Deleted bool
	// Seq grows with every update of the writer, so it versions content.
	Seq  uint64
	Time time.Time
}

// ErrNotWritable: the store is read-only.
var ErrNotWritable = errors.New("store is not writable")

// New starts a writer whose journal lives in journalRoot.
func New(s store.Store, journalRoot *JournalRoot, opts Options) (*Writer, error) {
	if store.ReadOnly(s) {
		return nil, ErrNotWritable
	}
	if opts.IdleDelay <= 0 {
		opts.IdleDelay = 300 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 5 * time.Second
	}
	if opts.MaxPendingBytes <= 0 {
		opts.MaxPendingBytes = 256 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	j, err := OpenJournal(journalRoot)
	if err != nil {
		return nil, err
	}
	w := &Writer{store: s, journal: j, opts: opts, shards: map[string]*pendingShard{}, lastUpdate: map[string]time.Time{},
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	w.idle = sync.NewCond(&w.mu)
	w.wg.Go(w.publishLoop)
	return w, nil
}

// OnPublished sets the function called after a shard (or an unsharded
// chunk, which is written at once) was rewritten in the store and before
// its updates leave memory, so that caches of the shard
// can be dropped without a moment of stale reads (the views' caches).
func (w *Writer) OnPublished(fn func(shardKey string)) { w.published.Store(&fn) }

// rewritten tells the OnPublished function that the value at key changed.
func (w *Writer) rewritten(key string) {
	if fn := w.published.Load(); fn != nil {
		(*fn)(key)
	}
}

// Put stores data as the encoded inner chunk at inner grid coordinates of
// a. Unsharded chunks are written to the store at once; inner chunks are
// journaled and published with their shard later. The writer keeps data
// until then: the caller must not change it.
func (w *Writer) Put(ctx context.Context, a *zarr.Array, coords []int, data []byte) error {
	return w.update(ctx, a, coords, data, false)
}

// Delete empties the inner chunk at inner grid coordinates of a.
func (w *Writer) Delete(ctx context.Context, a *zarr.Array, coords []int) error {
	return w.update(ctx, a, coords, nil, true)
}

func (w *Writer) update(ctx context.Context, a *zarr.Array, coords []int, data []byte, del bool) error {
	shard, local := a.InnerChunk(coords)
	key := a.ChunkKey(shard)
	if a.Sharding() == nil {
		var err error
		if del {
			err = store.Delete(ctx, w.store, key, store.Cond{})
		} else {
			err = store.Write(ctx, w.store, key, data)
		}
		if err == nil {
			w.rewritten(key)
		}
		return err
	}
	// Updates enter the journal and the pending map in one order, so the
	// last journaled update of a chunk is the one readers see; readers take
	// only mu, which the journal write does not hold.
	w.appendMu.Lock()
	pos, err := w.journal.Append(Record{Array: a.Path, Shard: key, Chunk: local, Delete: del, Data: data})
	if err != nil {
		w.appendMu.Unlock()
		return w.journalFailed(err)
	}
	w.mu.Lock()
	now := time.Now()
	ps := w.shards[key]
	if ps == nil {
		ps = &pendingShard{a: a, key: key, coords: shard, chunks: map[int]*pendingChunk{}, first: now}
		w.shards[key] = ps
	}
	if old := ps.chunks[local]; old != nil {
		w.pending -= int64(len(old.Data))
		ps.bytes -= int64(len(old.Data))
		w.journal.Release(old.pos)
	}
	w.seq++
	ps.chunks[local] = &pendingChunk{Pending: Pending{Data: data, Deleted: del, Seq: w.seq, Time: now}, pos: pos}
	ps.last = now
	w.lastUpdate[a.Path] = now
	w.pending += int64(len(data))
	ps.bytes += int64(len(data))
	over := w.pending > w.opts.MaxPendingBytes
	crossed := w.pending > w.relief() && w.pending-int64(len(data)) <= w.relief()
	complete := ps.complete()
	w.mu.Unlock()
	w.appendMu.Unlock()
	// The publisher's ticker finds shards that went quiet; waking it for
	// every update would cost a thread wakeup per chunk written.
	if complete || crossed {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	if over {
		return w.relieve(ctx)
	}
	return nil
}

// relief is the pending bytes past which the publisher publishes the
// shards holding the most in the background, so that a writer keeps
// writing rather than wait for a publish (relieve) at the budget.
func (w *Writer) relief() int64 { return w.opts.MaxPendingBytes / 4 * 3 }

// relieve publishes the shards holding the most pending bytes until
// pending updates fit the budget.
func (w *Writer) relieve(ctx context.Context) error {
	for {
		w.mu.Lock()
		if w.pending <= w.opts.MaxPendingBytes {
			w.mu.Unlock()
			return nil
		}
		largest := w.largest(nil)
		if largest == nil { // everything is being published: wait for it
			w.idle.Wait()
			w.mu.Unlock()
			continue
		}
		w.mu.Unlock()
		if err := w.publish(ctx, largest.key); err != nil {
			return err
		}
	}
}

// largest returns the shard holding the most pending bytes that is
// neither being published nor in skip (nil if none); w.mu is held.
func (w *Writer) largest(skip map[string]bool) *pendingShard {
	var out *pendingShard
	for key, ps := range w.shards {
		if !ps.publishing && !skip[key] && (out == nil || ps.bytes > out.bytes) {
			out = ps
		}
	}
	return out
}

// Lookup returns the pending update of the inner chunk at inner grid
// coordinates of a; ok is false when it has none.
func (w *Writer) Lookup(a *zarr.Array, coords []int) (p Pending, ok bool) {
	shard, local := a.InnerChunk(coords)
	key := a.ChunkKey(shard)
	w.mu.Lock()
	defer w.mu.Unlock()
	if ps := w.shards[key]; ps != nil {
		if pc := ps.chunks[local]; pc != nil {
			return pc.Pending, true
		}
	}
	return Pending{}, false
}

// PendingShards returns, for every shard of a with pending updates, its
// grid coordinates and its pending inner chunks.
func (w *Writer) PendingShards(a *zarr.Array) map[string]PendingShard {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]PendingShard{}
	for key, ps := range w.shards {
		if ps.a != a {
			continue
		}
		updates := make(map[int]Update, len(ps.chunks))
		for local, pc := range ps.chunks {
			updates[local] = updateOf(pc.Deleted)
		}
		out[key] = PendingShard{Coords: ps.coords, Updates: updates}
	}
	return out
}

// PendingShard lists the pending inner chunks of one shard, by index in
// the shard.
type PendingShard struct {
	Coords  []int
	Updates map[int]Update
}

// Update is what a pending update does to an inner chunk.
type Update uint8

const (
	Written Update = iota + 1 // new bytes
	Deleted                   // emptied
)

func updateOf(deleted bool) Update {
	if deleted {
		return Deleted
	}
	return Written
}

// Unpublished counts the inner chunk updates not yet in their shards,
// those being published included.
func (w *Writer) Unpublished() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ps := range w.shards {
		n += len(ps.chunks)
	}
	return n
}

// Stats are what a writer holds and did, for the mount's metrics.
type Stats struct {
	Unpublished     int    // inner chunk updates not yet in their shards
	PendingBytes    int64  // their data, held in memory
	PublishedChunks uint64 // inner chunk updates written into their shards
	JournalBytes    int64  // the journal's size on disk
}

// Stats returns the writer's current counts.
func (w *Writer) Stats() Stats {
	st := Stats{Unpublished: w.Unpublished(), PublishedChunks: w.publishedChunks.Load(), JournalBytes: w.journal.Bytes()}
	w.mu.Lock()
	st.PendingBytes = w.pending
	w.mu.Unlock()
	return st
}

// Sync makes every acknowledged update durable on disk.
func (w *Writer) Sync() error { return w.journalFailed(w.journal.Sync()) }

// journalFailed passes on an error of the journal, saying once that the
// journal was removed: every write is refused from then on.
func (w *Writer) journalFailed(err error) error {
	if errors.Is(err, ErrJournalLost) {
		w.lostOnce.Do(func() {
			w.opts.Logger.Error("the journal was removed (was the store deleted?): writes fail with EIO from now on, and updates not yet published are lost if they cannot be published before the mount ends", "error", err, "unpublished", w.Unpublished())
		})
	}
	return err
}

// publishLoop publishes shards as they become due.
func (w *Writer) publishLoop() {
	tick := time.NewTicker(w.opts.IdleDelay / 2)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-tick.C:
		case <-w.kick:
		}
		for _, key := range w.due(time.Now()) {
			if err := w.publish(context.Background(), key); err != nil {
				msg := "publishing a shard failed; its updates stay journaled and are retried"
				if w.journal.Lost() {
					msg = "publishing a shard failed; it is retried, but its journal was removed: its updates are lost if the mount ends first"
				}
				w.opts.Logger.Error(msg, "key", key, "error", err)
			}
		}
		w.log.report(w.opts.Logger, w.Unpublished() == 0) // not under w.mu: publish takes log.mu under it
	}
}

// publishLogEvery is how often a writer that keeps publishing logs what
// it published; it also logs once it has nothing left to publish.
const publishLogEvery = 10 * time.Second

// publishLog sums up the publishes a writer logs in one line.
type publishLog struct {
	mu             sync.Mutex
	shards, chunks int
	bytes          int64
	busy           time.Duration // spent publishing them
	first, logged  time.Time
}

// add counts one shard published: chunks inner chunk updates of bytes
// bytes, which took took.
func (l *publishLog) add(chunks int, bytes int64, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shards == 0 {
		l.first = time.Now().Add(-took)
	}
	l.shards++
	l.chunks += chunks
	l.bytes += bytes
	l.busy += took
}

// report logs what was published since the last report, when there is
// something and the writer is quiet (or publishLogEvery passed).
func (l *publishLog) report(logger *slog.Logger, quiet bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shards == 0 || !quiet && time.Since(l.logged) < publishLogEvery {
		return
	}
	logger.Info("published into the store", "shards", l.shards, "chunk_updates", l.chunks, "bytes", l.bytes,
		"publishing", l.busy.Round(time.Millisecond), "over", time.Since(l.first).Round(time.Millisecond))
	l.shards, l.chunks, l.bytes, l.busy = 0, 0, 0, 0
	l.logged = time.Now()
}

// due lists the shards to publish now: those complete, those of arrays
// gone quiet, those waiting MaxDelay, and past the relief mark those
// holding the most until what remains is under it.
func (w *Writer) due(now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	due := map[string]bool{}
	held := map[string]bool{} // due, or waiting to retry
	writing := map[string]bool{}
	remaining := w.pending
	for key, ps := range w.shards {
		writing[ps.a.Path] = true
		if ps.publishing {
			remaining -= ps.bytes
			continue
		}
		if now.Before(ps.retryAt) {
			held[key] = true
			continue
		}
		if ps.complete() || now.Sub(w.lastUpdate[ps.a.Path]) >= w.opts.IdleDelay || now.Sub(ps.first) >= w.opts.MaxDelay {
			due[key], held[key] = true, true
			remaining -= ps.bytes
		}
	}
	for remaining > w.relief() {
		ps := w.largest(held)
		if ps == nil {
			break
		}
		due[ps.key], held[ps.key] = true, true
		remaining -= ps.bytes
	}
	for path := range w.lastUpdate {
		if !writing[path] {
			delete(w.lastUpdate, path)
		}
	}
	return slices.Sorted(maps.Keys(due))
}

// publish writes the pending updates of one shard into the store.
func (w *Writer) publish(ctx context.Context, key string) error {
	w.mu.Lock()
	ps := w.shards[key]
	for ps != nil && ps.publishing {
		w.idle.Wait()
		ps = w.shards[key]
	}
	if ps == nil {
		w.mu.Unlock()
		return nil
	}
	ps.publishing = true
	snapshot := make(map[int]*pendingChunk, len(ps.chunks))
	for local, pc := range ps.chunks {
		snapshot[local] = pc
	}
	w.mu.Unlock()

	updates := make(map[int]update, len(snapshot))
	for local, pc := range snapshot {
		updates[local] = update{data: pc.Data, deleted: pc.Deleted}
	}
	start := time.Now()
	err := applyShard(ctx, w.store, ps.a, key, updates)
	took := time.Since(start)
	if err == nil {
		w.rewritten(key)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.idle.Broadcast()
	ps.publishing = false
	if err != nil {
		ps.retryAt = time.Now().Add(time.Second)
		return fmt.Errorf("publish %s: %w", key, err)
	}
	var done []Pos
	var bytes int64
	for local, pc := range snapshot {
		bytes += int64(len(pc.Data))
		if ps.chunks[local] == pc { // not updated again meanwhile
			delete(ps.chunks, local)
			w.pending -= int64(len(pc.Data))
			ps.bytes -= int64(len(pc.Data))
			done = append(done, pc.pos)
		}
	}
	w.log.add(len(snapshot), bytes, took)
	w.publishedChunks.Add(uint64(len(done)))
	if len(done) > 0 {
		if err := w.journal.Published(done); err != nil && !errors.Is(err, ErrJournalLost) {
			// A replay would apply them again, over whatever other
			// writers put in their chunks meanwhile.
			w.opts.Logger.Error("marking journal records published failed", "key", key, "error", err)
		}
	}
	if len(ps.chunks) == 0 {
		delete(w.shards, key)
	} else {
		ps.first = time.Now()
	}
	return nil
}

// Flush publishes every pending update now.
func (w *Writer) Flush(ctx context.Context) error {
	var errs []error
	for {
		w.mu.Lock()
		keys := slices.Sorted(maps.Keys(w.shards))
		w.mu.Unlock()
		if len(keys) == 0 {
			w.log.report(w.opts.Logger, true)
			return nil
		}
		errs = errs[:0]
		for _, key := range keys {
			if err := w.publish(ctx, key); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
}

// Close publishes everything and closes the journal. Updates that cannot
// be published stay in the journal for the next writer to replay, and the
// error says so.
func (w *Writer) Close(ctx context.Context) error {
	close(w.done)
	w.wg.Wait()
	err := w.Flush(ctx)
	if serr := w.journal.Sync(); err == nil {
		err = serr
	}
	return errors.Join(err, w.journal.Close())
}

// update is the new content of one inner chunk.
type update struct {
	data    []byte
	deleted bool
}

// applyShard read-modify-writes a shard under its lock: updated inner
// chunks replace the stored ones; all others are copied verbatim. Fixed-size
// uncompressed chunks replacing stored ones of the same size are written in
// place; every other change rewrites the shard densely (reclaiming dead
// space) and atomically. A shard left without chunks is deleted.
func applyShard(ctx context.Context, s store.Store, a *zarr.Array, key string, updates map[int]update) error {
	sh := a.Sharding()
	return store.Update(ctx, s, key, func(cur store.Object) (store.Change, error) {
		var ix *sharding.Index
		if cur != nil {
			var err error
			if ix, err = sh.ReadIndex(cur, cur.Info().Size); err != nil {
				// Rewriting would drop whatever the index still locates.
				return store.Change{}, fmt.Errorf("refusing to rewrite a shard whose index is unreadable: %w", err)
			}
		}
		if patches, ok := inPlace(sh, ix, updates); ok {
			return store.Change{Patches: patches}, nil
		}
		return rebuild(sh, cur, ix, updates)
	})
}

// rebuild writes a shard densely from the stored inner chunks of cur (ix
// is its index, nil for none) with updates applied: the new value, or a
// deletion when no chunk is left.
func rebuild(sh *sharding.Codec, cur store.Object, ix *sharding.Index, updates map[int]update) (store.Change, error) {
	chunks := make([][]byte, sh.NumChunks())
	for i := range chunks {
		if up, ok := updates[i]; ok {
			if !up.deleted {
				chunks[i] = up.data
			}
			continue
		}
		if ix == nil {
			continue
		}
		b, _, err := sh.ReadChunk(cur, ix, i)
		if err != nil {
			return store.Change{}, err
		}
		chunks[i] = b
	}
	value, err := sh.ShardParts(chunks)
	switch {
	case err != nil:
		return store.Change{}, err
	case value == nil && cur == nil:
		return store.Change{}, nil
	case value == nil:
		return store.Change{Delete: true}, nil
	}
	return store.Change{Value: value}, nil
}

// inPlace returns the patches that apply updates without moving anything:
// possible when inner chunks have a fixed size, carry no checksum that a
// torn write would break, and every update replaces a stored chunk.
func inPlace(sh *sharding.Codec, ix *sharding.Index, updates map[int]update) ([]store.Patch, bool) {
	if ix == nil {
		return nil, false
	}
	size, fixed := sh.Inner().EncodedSize()
	if !fixed {
		return nil, false
	}
	for _, name := range sh.Inner().Names() {
		if name != "bytes" && name != "transpose" {
			return nil, false
		}
	}
	patches := make([]store.Patch, 0, len(updates))
	for i, up := range updates {
		off, n, ok := ix.Chunk(i)
		if up.deleted || !ok || n != int64(size) || len(up.data) != size {
			return nil, false
		}
		patches = append(patches, store.Patch{Offset: off, Data: up.data})
	}
	return patches, true
}
