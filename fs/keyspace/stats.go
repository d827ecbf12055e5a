package keyspace

import (
	"sync/atomic"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// Stats are the key spaces' counters since they were built: the read
// engine's (what the cache holds and did, what was read from the store),
// and what was transcoded and served.
type Stats struct {
	engine.Stats
	// Unpublished counts the written inner chunks not yet in their shards.
	Unpublished int `json:"unpublished"`
	// Transcodes counts chunks re-encoded for a view, the misses of the
	// cache of transcoded chunks.
	Transcodes uint64 `json:"transcodes"`
	Served     Served `json:"served"`
}

// Served counts the bytes read from files of the views, by where they
// came from.
type Served struct {
	// PassThroughBytes are chunks' stored bytes, read from their shards
	// (or from updates not yet written into them).
	PassThroughBytes uint64 `json:"pass_through_bytes"`
	// TranscodedBytes are chunks re-encoded for the view.
	TranscodedBytes uint64 `json:"transcoded_bytes"`
	// MetadataBytes are metadata documents.
	MetadataBytes uint64 `json:"metadata_bytes"`
}

// counters are the live counters behind Stats.
type counters struct {
	transcodes                                       atomic.Uint64
	passThroughBytes, transcodedBytes, metadataBytes atomic.Uint64
}

// Stats returns the current counters.
func (f *FS) Stats() Stats {
	st := Stats{
		Stats:       f.engine.Stats(),
		Unpublished: unpublished(f.opts.Writer),
		Transcodes:  f.counts.transcodes.Load(),
		Served: Served{
			PassThroughBytes: f.counts.passThroughBytes.Load(),
			TranscodedBytes:  f.counts.transcodedBytes.Load(),
			MetadataBytes:    f.counts.metadataBytes.Load(),
		},
	}
	st.ReadAhead += f.readAhead.ahead.Load() // the transcodes ahead
	return st
}

func unpublished(w *writeback.Writer) int {
	if w == nil {
		return 0
	}
	return w.Unpublished()
}
