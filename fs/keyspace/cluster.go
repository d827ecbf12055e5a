package keyspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Keys of the cluster cache (Options.Cluster) name immutable values, so
// no node ever needs to invalidate one:
//
//	range \0 STORE \0 KEY \0 GENERATION \0 OFFSET \0 LENGTH
//	    bytes of one generation of a shard (a run of chunks, see run);
//	index \0 STORE \0 KEY \0 SPAN \0 EPOCH
//	    the index bytes of a shard (SPAN "-N": its last N bytes, "0+N" its
//	    first) as the store held it in one revalidation interval (EPOCH
//	    counts intervals), with the shard's generation and size.
//
// STORE is the store's URL: a node serves peers only keys of its store.

func rangeKey(s store.Store, key string, gen store.Generation, r storedRange) string {
	return fmt.Sprintf("range\x00%s\x00%s\x00%s\x00%d\x00%d", s, key, gen, r.off, r.n)
}

func indexKey(s store.Store, key string, span store.Span, epoch int64) string {
	spec := fmt.Sprintf("0+%d", span.Length)
	if span.Suffix > 0 {
		spec = fmt.Sprintf("-%d", span.Suffix)
	}
	return fmt.Sprintf("index\x00%s\x00%s\x00%s\x00%d", s, key, spec, epoch)
}

// clusterIndex is the value of an index key.
type clusterIndex struct {
	Exists bool
	Info   store.Info
	Bytes  []byte // nil when the shard is shorter than its index
}

// PeerKeys returns what a node of a cluster needs from the store s: which
// keys it answers for (those of s), and how it loads them from s.
func PeerKeys(s store.Store) (accept func(string) bool, load func(context.Context, string) ([]byte, error)) {
	prefix := func(kind string) string { return kind + "\x00" + s.String() + "\x00" }
	accept = func(k string) bool {
		return strings.HasPrefix(k, prefix("range")) || strings.HasPrefix(k, prefix("index"))
	}
	load = func(ctx context.Context, k string) ([]byte, error) {
		if rest, ok := strings.CutPrefix(k, prefix("range")); ok {
			return loadRange(ctx, s, rest)
		}
		if rest, ok := strings.CutPrefix(k, prefix("index")); ok {
			return loadIndex(ctx, s, rest)
		}
		return nil, fmt.Errorf("cluster key %q: not a key of %s", k, s)
	}
	return accept, load
}

// loadRange reads a range of one generation: a 412 is an error, never a
// value.
func loadRange(ctx context.Context, s store.Store, rest string) ([]byte, error) {
	f := strings.Split(rest, "\x00")
	if len(f) != 4 {
		return nil, fmt.Errorf("bad range key %q", rest)
	}
	off, err1 := strconv.ParseInt(f[2], 10, 64)
	n, err2 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || off < 0 || n < 0 || n > coalesceMax {
		return nil, fmt.Errorf("bad range key %q", rest)
	}
	buf := make([]byte, n)
	if err := s.ReadAt(ctx, f[0], store.Generation(f[1]), buf, off); err != nil {
		return nil, err
	}
	return buf, nil
}

// loadIndex reads the index bytes of a shard; a missing shard is a value.
func loadIndex(ctx context.Context, s store.Store, rest string) ([]byte, error) {
	f := strings.Split(rest, "\x00")
	if len(f) != 3 {
		return nil, fmt.Errorf("bad index key %q", rest)
	}
	var span store.Span
	if n, ok := strings.CutPrefix(f[1], "-"); ok {
		span.Suffix, _ = strconv.ParseInt(n, 10, 64)
	} else if n, ok := strings.CutPrefix(f[1], "0+"); ok {
		span.Length, _ = strconv.ParseInt(n, 10, 64)
	}
	if span.Suffix <= 0 && span.Length <= 0 || span.Suffix > 1<<30 || span.Length > 1<<30 {
		return nil, fmt.Errorf("bad index key %q", rest)
	}
	b, info, err := s.Get(ctx, f[0], span, store.Cond{})
	var v clusterIndex
	switch {
	case errors.Is(err, store.ErrNotFound):
	case errors.Is(err, io.ErrUnexpectedEOF):
		v = clusterIndex{Exists: true, Info: info}
	case err != nil:
		return nil, err
	default:
		v = clusterIndex{Exists: true, Info: info, Bytes: b}
	}
	return json.Marshal(v)
}

// indexFromCluster reads a shard's index through the cluster: one load
// per revalidation interval for every mount of the cluster.
func (av *arrayView) indexFromCluster(ctx context.Context, key string) (*clusterIndex, error) {
	n := int64(av.shard.IndexSize())
	span := store.Last(n)
	if av.shard.IndexAtStart() {
		span = store.Range(0, n)
	}
	epoch := time.Now().UnixNano() / int64(av.fs.opts.Revalidate)
	b, err := av.fs.opts.Cluster.Get(ctx, indexKey(av.fs.store, key, span, epoch))
	if err != nil {
		return nil, err
	}
	var v clusterIndex
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: index from the cluster: %w", key, err)
	}
	return &v, nil
}

// clusterShardIndex is zarr.Array.ReadShardIndex through the cluster.
func (av *arrayView) clusterShardIndex(ctx context.Context, key string) (*sharding.Index, store.Info, error) {
	v, err := av.indexFromCluster(ctx, key)
	switch {
	case err != nil:
		return nil, store.Info{}, err
	case !v.Exists:
		return nil, store.Info{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	case v.Bytes == nil:
		return nil, v.Info, fmt.Errorf("%w: shard of %d bytes is shorter than its %d-byte index", sharding.ErrInvalidIndex, v.Info.Size, av.shard.IndexSize())
	}
	ix, err := av.shard.DecodeIndex(v.Bytes, v.Info.Size)
	return ix, v.Info, err
}
