package writeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Recover publishes the journals that writers which died left for the
// store of root, into the shards of h, and removes them. Journals of live
// writers, of other stores (logged when they are strays, see Journals),
// and what is not a journal zarrfs made, are left alone. It returns the
// number of records replayed.
func Recover(ctx context.Context, h *zarr.Hierarchy, root *JournalRoot, logger *slog.Logger) (int, error) {
	return RecoverReporting(ctx, h, root, logger, nil)
}

// RecoverReporting is Recover telling published, when set, of every shard
// it publishes: its key and the bytes of the chunks put into it.
func RecoverReporting(ctx context.Context, h *zarr.Hierarchy, root *JournalRoot, logger *slog.Logger, published func(shard string, bytes int64)) (int, error) {
	if store.ReadOnly(h.Store) {
		return 0, ErrNotWritable
	}
	found, err := orphans(root, skipLogger(logger), func(j journalDir) {
		logger.Warn("a journal of another store or endpoint: left alone, never replayed into this store", "journal", j.path(), "its store", j.store, "this store", root.store)
	})
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, j := range found {
		n, err := replay(ctx, h, j.dir, j.path(), logger, published)
		total += n
		if err == nil {
			err = removeJournal(j.parent, j.parentPath, j.name, j.dir)
		}
		j.close()
		if err != nil {
			errs = append(errs, fmt.Errorf("journal %s: %w", j.path(), err))
		}
	}
	return total, errors.Join(errs...)
}

// skipLogger logs the entries of a journal directory that are not
// journals.
func skipLogger(logger *slog.Logger) func(string, error) {
	return func(path string, err error) {
		logger.Warn("not a zarrfs journal: left alone", "path", path, "reason", err)
	}
}

// shardUpdates are the last updates of one shard found in a journal.
type shardUpdates struct {
	a       *zarr.Array
	updates map[int]update
}

// replay applies one journal into the shards.
func replay(ctx context.Context, h *zarr.Hierarchy, dir *os.Root, path string, logger *slog.Logger, published func(string, int64)) (int, error) {
	shards, n, err := collect(h, dir, path, logger)
	if err != nil {
		return 0, err
	}
	for _, key := range slices.Sorted(maps.Keys(shards)) {
		su := shards[key]
		if err := applyShard(ctx, h.Store, su.a, key, su.updates); err != nil {
			return n, fmt.Errorf("replay into %s: %w", key, err)
		}
		if published != nil {
			var bytes int64
			for _, u := range su.updates {
				bytes += int64(len(u.data))
			}
			published(key, bytes)
		}
	}
	if n > 0 {
		logger.Info("replayed a journal left by a writer that died", "journal", path, "records", n, "shards", len(shards))
	}
	return n, nil
}

// collect reads one journal: the last record of each inner chunk, unless a
// marker says it is published (its chunk may have changed since), by
// shard, and how many records that is. Records that no longer fit their
// array are logged and skipped.
func collect(h *zarr.Hierarchy, dir *os.Root, path string, logger *slog.Logger) (map[string]*shardUpdates, int, error) {
	last, err := unpublished(dir)
	if err != nil {
		return nil, 0, err
	}
	shards := map[string]*shardUpdates{}
	n := 0
	for _, e := range last {
		a, err := journaledArray(h, e.Record)
		if err != nil {
			logger.Warn("journal record skipped", "journal", path, "key", e.Shard, "error", err)
			continue
		}
		n++
		su := shards[e.Shard]
		if su == nil {
			su = &shardUpdates{a: a, updates: map[int]update{}}
			shards[e.Shard] = su
		}
		su.updates[e.Chunk] = update{data: e.Data, deleted: e.Delete}
	}
	return shards, n, nil
}

// unpublished reads one journal: the last record of each inner chunk, in
// journal order, unless a marker says it is published (its chunk may have
// changed since).
func unpublished(dir *os.Root) ([]entry, error) {
	type chunkKey struct {
		shard string
		chunk int
	}
	var last []entry // the last record of each inner chunk, in journal order
	index := map[chunkKey]int{}
	published := map[Pos]bool{}
	for e, err := range readEntries(dir) {
		if err != nil {
			return nil, err
		}
		if e.marker() {
			for _, p := range e.published {
				published[p] = true
			}
			continue
		}
		k := chunkKey{e.Shard, e.Chunk}
		if i, ok := index[k]; ok {
			last[i] = e
		} else {
			index[k] = len(last)
			last = append(last, e)
		}
	}
	return slices.DeleteFunc(last, func(e entry) bool { return published[e.pos] }), nil
}

// journaledArray finds the sharded array a record belongs to and checks the
// record still fits it (the array may have changed since).
func journaledArray(h *zarr.Hierarchy, r Record) (*zarr.Array, error) {
	n, ok := h.Node(r.Array)
	if !ok || n.Array == nil || n.Array.Sharding() == nil {
		return nil, fmt.Errorf("no sharded array at %q", r.Array)
	}
	a := n.Array
	prefix := ""
	if a.Path != "" {
		prefix = a.Path + "/"
	}
	rel, ok := strings.CutPrefix(r.Shard, prefix)
	if !ok {
		return nil, fmt.Errorf("shard key outside the array %q", r.Array)
	}
	if _, ok := a.ParseChunkKey(rel); !ok {
		return nil, fmt.Errorf("not a shard key of %q", r.Array)
	}
	if r.Chunk >= a.Sharding().NumChunks() {
		return nil, fmt.Errorf("inner chunk %d beyond the shard's %d", r.Chunk, a.Sharding().NumChunks())
	}
	if !r.Delete {
		if _, err := a.Sharding().Inner().Decode(r.Data); err != nil {
			return nil, fmt.Errorf("journaled chunk does not decode: %w", err)
		}
	}
	return a, nil
}
