package writeback

import (
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// JournalInfo describes one journal a journal root sees.
type JournalInfo struct {
	Dir string
	// Alive: its writer still runs (it holds the owner lock).
	Alive bool
	// Records are the updates it holds that are not yet in their shards,
	// of Shards (store keys, sorted). Only journals of dead writers are
	// read.
	Records int
	Shards  []string
	// Store is the store the journal names ("" for a journal made before
	// journals named their store).
	Store string
	// Stray: the journal is not this store's, but the user must hear of
	// it: another store's, in this store's journal directory, or the same
	// bucket and prefix's through another endpoint (which may be this
	// server under another name). Its records are counted without being
	// checked against this store's arrays, and never replayed here.
	Stray bool
	// OtherEndpoint: a stray of the same bucket and prefix through
	// another endpoint.
	OtherEndpoint bool
}

// Journals lists the journals of root's store, and the strays, without
// locking or changing them: a read-only process can call it while writers
// run.
func Journals(h *zarr.Hierarchy, root *JournalRoot, logger *slog.Logger) ([]JournalInfo, error) {
	var out []JournalInfo
	err := journalDirs(root, false, skipLogger(logger), func(j journalDir) error {
		defer j.close()
		info := JournalInfo{Dir: j.path(), Store: j.store, Stray: j.stray(root), OtherEndpoint: sameLocation(j.store, root.store)}
		if !info.Stray && !j.ours(root) {
			return nil
		}
		alive, err := store.Locked(j.owner)
		if err != nil {
			return err
		}
		info.Alive = alive
		switch {
		case alive:
		case info.Stray:
			last, err := unpublished(j.dir)
			if err != nil {
				return err
			}
			shards := map[string]bool{}
			for _, e := range last {
				shards[e.Shard] = true
			}
			info.Records, info.Shards = len(last), slices.Sorted(maps.Keys(shards))
		default:
			shards, n, err := collect(h, j.dir, j.path(), logger)
			if err != nil {
				return err
			}
			info.Records, info.Shards = n, slices.Sorted(maps.Keys(shards))
		}
		out = append(out, info)
		return nil
	})
	return out, err
}

// forJournals calls fn for every journal of root's store, telling
// whether its writer is alive.
func forJournals(root *JournalRoot, logger *slog.Logger, fn func(dir *os.Root, path string, alive bool) error) error {
	return journalDirs(root, false, skipLogger(logger), func(j journalDir) error {
		defer j.close()
		if !j.ours(root) {
			return nil
		}
		alive, err := store.Locked(j.owner)
		if err != nil {
			return err
		}
		return fn(j.dir, j.path(), alive)
	})
}

// Overlay holds the unpublished updates of journals whose writers died,
// for read-only views: readers see every acknowledged write although the
// shards do not hold it yet.
type Overlay struct {
	mu     sync.Mutex
	shards map[string]*shardUpdates
	seq    map[string]map[int]uint64 // versions of the updates, for caches
	time   time.Time
}

// LoadOverlay reads the journals of dead writers under root. It returns
// nil when they hold no unpublished update.
func LoadOverlay(h *zarr.Hierarchy, root *JournalRoot, logger *slog.Logger) (*Overlay, []JournalInfo, error) {
	o := &Overlay{shards: map[string]*shardUpdates{}, seq: map[string]map[int]uint64{}, time: time.Now()}
	var infos []JournalInfo
	var seq uint64
	err := forJournals(root, logger, func(dir *os.Root, path string, alive bool) error {
		info := JournalInfo{Dir: path, Alive: alive}
		defer func() { infos = append(infos, info) }()
		if alive {
			return nil
		}
		shards, n, err := collect(h, dir, path, logger)
		if err != nil {
			return err
		}
		info.Records, info.Shards = n, slices.Sorted(maps.Keys(shards))
		// Journals are read in name order; a later journal's update of
		// the same chunk wins, as a replay in that order would publish it.
		for key, su := range shards {
			dst := o.shards[key]
			if dst == nil {
				dst = &shardUpdates{a: su.a, updates: map[int]update{}}
				o.shards[key], o.seq[key] = dst, map[int]uint64{}
			}
			for i, up := range su.updates {
				seq++
				dst.updates[i], o.seq[key][i] = up, seq
			}
		}
		return nil
	})
	if err != nil || len(o.shards) == 0 {
		return nil, infos, err
	}
	return o, infos, nil
}

// Lookup returns the unpublished update of the inner chunk at inner grid
// coordinates of a, if there is one.
func (o *Overlay) Lookup(a *zarr.Array, coords []int) (Pending, bool) {
	shard, local := a.InnerChunk(coords)
	key := a.ChunkKey(shard)
	o.mu.Lock()
	defer o.mu.Unlock()
	su := o.shards[key]
	if su == nil || su.a.Path != a.Path {
		return Pending{}, false
	}
	up, ok := su.updates[local]
	if !ok {
		return Pending{}, false
	}
	return Pending{Data: up.data, Deleted: up.deleted, Seq: o.seq[key][local], Time: o.time}, true
}

// PendingShards is Writer.PendingShards for the overlay.
func (o *Overlay) PendingShards(a *zarr.Array) map[string]PendingShard {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]PendingShard{}
	for key, su := range o.shards {
		if su.a.Path != a.Path {
			continue
		}
		updates := make(map[int]Update, len(su.updates))
		for i, up := range su.updates {
			updates[i] = updateOf(up.deleted)
		}
		prefix := a.Path
		if prefix != "" {
			prefix += "/"
		}
		coords, _ := a.ParseChunkKey(key[len(prefix):])
		out[key] = PendingShard{Coords: coords, Updates: updates}
	}
	return out
}
