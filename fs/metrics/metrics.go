// Package metrics serves a mount's counters in the Prometheus text format
// (zarrfs mount --metrics-listen). It counts nothing twice: a collector
// reads the counters the stats file shows (package keyspace, the store's
// request counter, the writer) whenever it is scraped; only the latency
// of FUSE requests, which nothing else keeps, is counted here.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// Sources are the counters of one mount.
type Sources struct {
	Keyspace *keyspace.FS
	// Store counts its requests if it is a remote store.
	Store store.Store
	// Writer is nil on read-only mounts.
	Writer *writeback.Writer
}

// Metrics are a mount's metrics.
type Metrics struct {
	registry *prometheus.Registry
	fuse     *prometheus.HistogramVec
}

// New returns the metrics of a mount, the Go runtime's and the process's
// included, as every Go exporter has them.
func New(src Sources) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		fuse: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "zarrfs_fuse_request_duration_seconds",
			Help:    "FUSE requests by opcode and the time zarrfs took to answer them.",
			Buckets: []float64{.00001, .0001, .001, .01, .1, 1, 10, 60},
		}, []string{"op"}),
	}
	m.registry.MustRegister(m.fuse, &collector{src: src},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveFUSE counts one FUSE request (fs.Options.OnRequest).
func (m *Metrics) ObserveFUSE(op string, d time.Duration) {
	m.fuse.WithLabelValues(op).Observe(d.Seconds())
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Serve serves the metrics at http://ADDR/metrics until ctx is done. It
// returns once it listens, with the address it listens on (ADDR may ask
// for any free port, as 127.0.0.1:0 does).
func (m *Metrics) Serve(ctx context.Context, addr string, logger *slog.Logger) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("serving metrics failed", "addr", ln.Addr(), "error", err)
		}
	}()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return ln.Addr(), nil
}

// collector reads the mount's counters at every scrape.
type collector struct {
	src Sources
}

var (
	storeRequests = desc("store_requests_total", "Requests to the store by kind (ranged GET, suffix GET, HEAD, LIST, PUT, DELETE) and outcome (ok, not_found, not_modified, precondition_failed, rejected, failed).", "kind", "outcome")
	storeLatency  = desc("store_request_duration_seconds", "Requests to the store by kind and the time to their response's headers.", "kind")
	storeFetched  = desc("store_fetched_bytes_total", "Bytes of the store's GET responses.")

	cacheHits      = desc("cache_hits_total", "Lookups answered by the cache, by level (memory: the LRU of shard indexes and chunks; disk: --cache-dir; cluster: the peers' cache).", "level")
	cacheMisses    = desc("cache_misses_total", "Lookups the cache could not answer, by level.", "level")
	cacheEvictions = desc("cache_evictions_total", "Entries evicted to stay within the cache's bound, by level.", "level")
	cacheBytes     = desc("cache_bytes", "Bytes the cache holds, by level.", "level")
	cacheMaxBytes  = desc("cache_max_bytes", "The bound of the cache, by level.", "level")
	cacheEntries   = desc("cache_entries", "Entries the cache holds, by level.", "level")
	cacheErrors    = desc("cache_load_errors_total", "Loads into the cache that failed, by level.", "level")

	peerLoads      = desc("peer_loads_total", "Values got from the peer owning them.")
	peerErrors     = desc("peer_errors_total", "Requests to peers that failed (the value was then loaded locally).")
	peerRejections = desc("peer_rejections_total", "Requests of peers refused (bad token or key).")
	peerServed     = desc("peer_served_total", "Requests of peers answered.")
	originLoads    = desc("peer_origin_loads_total", "Values this node loaded from the store for the peers' cache.")

	indexLoads = desc("index_loads_total", "Shard indexes read from the store.")
	shardOpens = desc("shard_opens_total", "Shard files opened to read chunks.")
	rangeReads = desc("range_reads_total", "Chunks read by ranged requests from an object store.")
	coalesced  = desc("coalesced_chunks_total", "Chunks fetched along with another one in the same ranged read.")
	chunkBytes = desc("fetched_chunk_bytes_total", "Stored chunk bytes fetched by ranged reads (from the store or the cluster), to set against served_bytes_total.")
	transcodes = desc("transcodes_total", "Chunks re-encoded for a view.")
	readAhead  = desc("read_ahead_transcodes_total", "Transcodes done ahead of a sequential reader.")
	served     = desc("served_bytes_total", "Bytes read from the views' files, by source (pass_through: stored chunk bytes; transcoded; metadata).", "source")

	writesPending   = desc("writes_pending", "Inner chunk updates acknowledged and not yet published into their shards.")
	writesPendingB  = desc("writes_pending_bytes", "The data of the pending updates, held in memory.")
	writesPublished = desc("writes_published_total", "Inner chunk updates published into their shards.")
	journalBytes    = desc("journal_bytes", "The size of the write journal on disk.")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("zarrfs_"+name, help, labels, nil)
}

// Describe sends nothing: the metrics a mount has depend on its store and
// options, which makes the collector unchecked.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := c.src.Keyspace.Stats()

	if rc, ok := c.src.Store.(interface{ RequestCounter() *requests.Counter }); ok {
		kinds := rc.RequestCounter().Kinds()
		for _, kind := range slices.Sorted(maps.Keys(kinds)) {
			k := kinds[kind]
			var total uint64
			for outcome, n := range k.Outcomes {
				counter(storeRequests, float64(n), kind, strings.ReplaceAll(outcome, " ", "_"))
				total += n
			}
			buckets := make(map[float64]uint64, len(requests.LatencyBounds))
			var below uint64
			for i, bound := range requests.LatencyBounds {
				below += k.Latency[i]
				buckets[bound] = below
			}
			ch <- prometheus.MustNewConstHistogram(storeLatency, total, k.Seconds, buckets, kind)
		}
		counter(storeFetched, float64(rc.RequestCounter().BytesFetched()))
	}

	counter(cacheHits, float64(st.Cache.Hits), "memory")
	counter(cacheMisses, float64(st.Cache.Misses), "memory")
	counter(cacheEvictions, float64(st.Cache.Evictions), "memory")
	counter(cacheErrors, float64(st.Cache.LoadErrors), "memory")
	gauge(cacheBytes, float64(st.Cache.Bytes), "memory")
	gauge(cacheMaxBytes, float64(st.Cache.MaxBytes), "memory")
	gauge(cacheEntries, float64(st.Cache.Entries), "memory")
	if d := st.DiskCache; d != nil {
		counter(cacheHits, float64(d.Hits), "disk")
		counter(cacheMisses, float64(d.Misses), "disk")
		gauge(cacheBytes, float64(d.Bytes), "disk")
		gauge(cacheMaxBytes, float64(d.MaxBytes), "disk")
	}
	if p := st.Cluster; p != nil {
		counter(cacheHits, float64(p.CacheHits), "cluster")
		counter(cacheMisses, float64(p.Gets-p.CacheHits), "cluster")
		counter(peerLoads, float64(p.PeerLoads))
		counter(peerErrors, float64(p.PeerErrors))
		counter(peerRejections, float64(p.Refused))
		counter(peerServed, float64(p.ServedToPeers))
		counter(originLoads, float64(p.OriginLoads))
	}

	counter(indexLoads, float64(st.IndexLoads))
	counter(shardOpens, float64(st.ShardOpens))
	counter(rangeReads, float64(st.RangeReads))
	counter(coalesced, float64(st.Coalesced))
	counter(chunkBytes, float64(st.FetchedBytes))
	counter(transcodes, float64(st.Transcodes))
	counter(readAhead, float64(st.ReadAhead))
	counter(served, float64(st.Served.PassThroughBytes), "pass_through")
	counter(served, float64(st.Served.TranscodedBytes), "transcoded")
	counter(served, float64(st.Served.MetadataBytes), "metadata")

	if c.src.Writer != nil {
		w := c.src.Writer.Stats()
		gauge(writesPending, float64(w.Unpublished))
		gauge(writesPendingB, float64(w.PendingBytes))
		counter(writesPublished, float64(w.PublishedChunks))
		gauge(journalBytes, float64(w.JournalBytes))
	}
}
