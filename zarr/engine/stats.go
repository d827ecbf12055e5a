package engine

import (
	"sync/atomic"

	"github.com/zarrfs/zarrfs/cache"
	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/cache/diskcache"
)

// Stats are the engine's counters since it was made: what its caches hold
// and did, and what was read from the store.
type Stats struct {
	// Cache counts the memory cache of chunk bytes, and the uses of the
	// one of shard indexes kept apart (hits, misses, evictions, errors).
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
	// store or the cluster), to set against what readers were served: a
	// reader whose access pattern the engine reads well is served about
	// what was fetched.
	FetchedBytes uint64 `json:"fetched_bytes"`
	// Requests counts a remote store's requests by kind (ranged GET,
	// suffix GET, HEAD, LIST, PUT, DELETE) and what came of them (bytes
	// fetched, failed and retried, precondition failed, not modified).
	Requests map[string]uint64 `json:"requests,omitempty"`
	// DiskCache counts the disk cache's use (Options.DiskCache).
	DiskCache *diskcache.Stats `json:"disk_cache,omitempty"`
	// Cluster counts the cluster cache's use (JoinCluster).
	Cluster *cluster.Stats `json:"cluster,omitempty"`
	// ReadAhead counts the chunks fetched ahead of readers (and, counted
	// by the views, transcoded ahead of them).
	ReadAhead uint64 `json:"read_ahead"`
}

// counters are the live counters behind Stats.
type counters struct {
	indexLoads, rangeReads, coalesced, fetchedBytes, ahead atomic.Uint64
}

// Stats returns the current counters.
func (e *Engine) Stats() Stats {
	st := Stats{
		Cache:        e.cache.Stats(),
		IndexLoads:   e.counts.indexLoads.Load(),
		RangeReads:   e.counts.rangeReads.Load(),
		Coalesced:    e.counts.coalesced.Load(),
		FetchedBytes: e.counts.fetchedBytes.Load(),
		ReadAhead:    e.counts.ahead.Load(),
	}
	o := e.objects.Stats()
	st.Cache.Hits += o.Hits
	st.Cache.Misses += o.Misses
	st.Cache.Evictions += o.Evictions
	st.Cache.LoadErrors += o.LoadErrors
	if e.files != nil {
		st.ShardOpens = e.files.opens.Load()
	}
	if c, ok := e.store.(interface{ Requests() map[string]uint64 }); ok {
		st.Requests = c.Requests()
	}
	if e.opts.DiskCache != nil {
		d := e.opts.DiskCache.Stats()
		st.DiskCache = &d
	}
	if e.cluster != nil {
		c := e.cluster.Stats()
		st.Cluster = &c
	}
	return st
}
