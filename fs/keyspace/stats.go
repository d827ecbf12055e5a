package keyspace

import (
	"sync/atomic"

	"github.com/zarrfs/zarrfs/cache"
	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/cache/diskcache"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// Stats are the key spaces' counters since they were built: what the
// cache holds and did, what was read from the store, and what was served.
type Stats struct {
	Cache cache.Stats `json:"cache"`
	// IndexLoads counts shard indexes read from the store: first uses,
	// and reloads after a change or an eviction.
	IndexLoads uint64 `json:"index_loads"`
	// ShardOpens counts shard files opened to read chunks, the misses of
	// the cache of open shard files.
	ShardOpens uint64 `json:"shard_opens"`
	// RangeReads counts chunks read by range from a store that does not
	// open files (object stores), each one request.
	RangeReads uint64 `json:"range_reads"`
	// Coalesced counts chunks fetched along with another one, in the same
	// ranged read, ahead of their readers.
	Coalesced uint64 `json:"coalesced"`
	// FetchedBytes counts the stored chunk bytes read by range (from the
	// store or the cluster), to set against Served: a reader whose access
	// pattern the mount reads well is served about what was fetched.
	FetchedBytes uint64 `json:"fetched_bytes"`
	// Requests counts a remote store's requests by kind (ranged GET,
	// suffix GET, HEAD, LIST, PUT, DELETE) and what came of them (bytes
	// fetched, failed and retried, precondition failed, not modified).
	Requests map[string]uint64 `json:"requests,omitempty"`
	// Unpublished counts the written inner chunks not yet in their shards.
	Unpublished int `json:"unpublished"`
	// DiskCache counts the disk cache's use (Options.DiskCache).
	DiskCache *diskcache.Stats `json:"disk_cache,omitempty"`
	// Cluster counts the cluster cache's use (Options.Cluster).
	Cluster *cluster.Stats `json:"cluster,omitempty"`
	// Transcodes counts chunks re-encoded for a view, the misses of the
	// cache of transcoded chunks.
	Transcodes uint64 `json:"transcodes"`
	// ReadAhead counts the transcodes done ahead of a sequential reader
	// (see Options.ReadAhead).
	ReadAhead uint64 `json:"read_ahead"`
	Served    Served `json:"served"`
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
	indexLoads, transcodes, rangeReads, coalesced    atomic.Uint64
	fetchedBytes                                     atomic.Uint64
	passThroughBytes, transcodedBytes, metadataBytes atomic.Uint64
}

// Stats returns the current counters.
func (f *FS) Stats() Stats {
	var opens uint64
	if f.files != nil {
		opens = f.files.opens.Load()
	}
	return Stats{
		Cache:        f.cache.Stats(),
		IndexLoads:   f.counts.indexLoads.Load(),
		ShardOpens:   opens,
		RangeReads:   f.counts.rangeReads.Load(),
		Coalesced:    f.counts.coalesced.Load(),
		FetchedBytes: f.counts.fetchedBytes.Load(),
		Requests:     requestCounts(f.store),
		Unpublished:  unpublished(f.opts.Writer),
		DiskCache:    diskStats(f.opts.DiskCache),
		Cluster:      clusterStats(f.cluster),
		Transcodes:   f.counts.transcodes.Load(),
		ReadAhead:    f.readAhead.ahead.Load(),
		Served: Served{
			PassThroughBytes: f.counts.passThroughBytes.Load(),
			TranscodedBytes:  f.counts.transcodedBytes.Load(),
			MetadataBytes:    f.counts.metadataBytes.Load(),
		},
	}
}

// requestCounts are the request counts of a store that keeps them.
func requestCounts(s store.Store) map[string]uint64 {
	if c, ok := s.(interface{ Requests() map[string]uint64 }); ok {
		return c.Requests()
	}
	return nil
}

func unpublished(w *writeback.Writer) int {
	if w == nil {
		return 0
	}
	return w.Unpublished()
}

func diskStats(c *diskcache.Cache) *diskcache.Stats {
	if c == nil {
		return nil
	}
	st := c.Stats()
	return &st
}

func clusterStats(c *cluster.Cluster) *cluster.Stats {
	if c == nil {
		return nil
	}
	st := c.Stats()
	return &st
}
