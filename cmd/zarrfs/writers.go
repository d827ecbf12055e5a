package main

import (
	"log/slog"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// warnOtherWriters warns when another read-write mount of the store runs
// (it holds a journal of the store's, on this machine or, for a local
// store, wherever the store's directory is mounted): each publishes
// shards conditionally, so no update is lost, but neither sees the
// other's writes before it reads the shard again, and two writes of one
// chunk race.
func warnOtherWriters(h *zarr.Hierarchy, journals *writeback.JournalRoot, logger *slog.Logger) {
	infos, err := writeback.Journals(h, journals, logger)
	if err != nil {
		return
	}
	for _, j := range infos {
		if j.Alive {
			logger.Warn("another read-write mount of this store is running: both publish into the store without losing updates, but each sees the other's writes only after --revalidate, and writes of one chunk race (mount one of them --ro)", "journal", j.Dir)
		}
	}
}
