package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Keys of the cluster cache (Options.Cluster) name immutable values, so
// no node ever needs to invalidate one:
//
//	block.VERSION \0 STORE \0 KEY \0 GENERATION \0 SIZE \0 BLOCK
//	    an aligned block of one generation of a shard (package blocks);
//	index.VERSION \0 STORE \0 KEY \0 SPAN \0 EPOCH
//	    the index bytes of a shard (SPAN "-N": its last N bytes, "0+N" its
//	    first) as the store held it in one revalidation interval (EPOCH
//	    counts intervals), with the shard's generation and size.
//
// and the kinds of values the engine's users add (PeerKind), whose keys
// begin with PeerKeyPrefix(KIND). STORE is the store's URL: a node serves
// peers only keys of its store.

func indexKey(s store.Store, key string, span store.Span, epoch int64) string {
	spec := fmt.Sprintf("0+%d", span.Length)
	if span.Suffix > 0 {
		spec = fmt.Sprintf("-%d", span.Suffix)
	}
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%d", indexKind, s, key, spec, epoch)
}

// clusterIndex is the value of an index key.
type clusterIndex struct {
	Exists bool
	Info   store.Info
	Bytes  []byte // nil when the shard is shorter than its index
}

// PeerKind is a kind of cluster value the engine's users derive from
// stored bytes, named by keys that begin with PeerKeyPrefix(Kind): Load
// loads the value of the rest of such a key, for a peer.
type PeerKind struct {
	Kind string
	Load func(ctx context.Context, rest string) ([]byte, error)
}

// JoinCluster makes the engine a node of the cache the mounts of other
// machines share (o's Accept and Load are the engine's): shard indexes,
// chunk bytes and the values of kinds are then loaded once for the whole
// cluster, by their owner. Call it before reading.
func (e *Engine) JoinCluster(o cluster.Options, kinds ...PeerKind) error {
	if e.files != nil {
		return fmt.Errorf("a cluster shares the cache of remote stores (s3://, gs://, http(s)://); %s is local", e.store)
	}
	e.kinds = kinds
	o.Accept, o.Load, o.Logger = e.acceptsPeerKey, e.loadPeerKey, e.opts.Logger
	c, err := cluster.Start(o)
	if err != nil {
		return err
	}
	e.cluster = c
	e.stackBlocks()
	return nil
}

// PeerKeyPrefix is how the cluster keys of a kind of value begin.
func (e *Engine) PeerKeyPrefix(kind string) string { return kind + "\x00" + e.store.String() + "\x00" }

// acceptsPeerKey reports whether a key is of this node's store.
func (e *Engine) acceptsPeerKey(k string) bool {
	if strings.HasPrefix(k, blocks.Prefix(e.store.String())) || strings.HasPrefix(k, e.PeerKeyPrefix(indexKind)) {
		return true
	}
	return slices.ContainsFunc(e.kinds, func(kind PeerKind) bool { return strings.HasPrefix(k, e.PeerKeyPrefix(kind.Kind)) })
}

// loadPeerKey loads a key this node owns, from the store.
func (e *Engine) loadPeerKey(ctx context.Context, k string) ([]byte, error) {
	if strings.HasPrefix(k, blocks.Prefix(e.store.String())) {
		return blocks.Load(ctx, e.origin, k)
	}
	if rest, ok := strings.CutPrefix(k, e.PeerKeyPrefix(indexKind)); ok {
		return loadIndex(ctx, e.store, rest)
	}
	for _, kind := range e.kinds {
		if rest, ok := strings.CutPrefix(k, e.PeerKeyPrefix(kind.Kind)); ok {
			return kind.Load(ctx, rest)
		}
	}
	return nil, fmt.Errorf("cluster key %q: not a key of %s", k, e.store)
}

// The kind of a key leads it; its version changes whenever what a key
// names does (its value's layout, what it depends on).
const indexKind = "index.1"

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
func (a *Array) indexFromCluster(ctx context.Context, key string) (*clusterIndex, error) {
	n := int64(a.shard.IndexSize())
	span := store.Last(n)
	if a.shard.IndexAtStart() {
		span = store.Range(0, n)
	}
	epoch := time.Now().UnixNano() / int64(a.e.opts.Revalidate)
	b, err := a.e.cluster.Get(ctx, indexKey(a.e.store, key, span, epoch), a.indexCheck())
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
func (a *Array) clusterShardIndex(ctx context.Context, key string) (*sharding.Index, store.Info, error) {
	v, err := a.indexFromCluster(ctx, key)
	switch {
	case err != nil:
		return nil, store.Info{}, err
	case !v.Exists:
		return nil, store.Info{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	case v.Bytes == nil:
		return nil, v.Info, fmt.Errorf("%w: shard of %d bytes is shorter than its %d-byte index", sharding.ErrInvalidIndex, v.Info.Size, a.shard.IndexSize())
	}
	ix, err := a.shard.DecodeIndex(v.Bytes, v.Info.Size)
	return ix, v.Info, err
}

// What a peer sends is checked as far as the format allows before it is
// used or cached (in memory or on disk): a value that fails is loaded
// from the store instead (cluster.Check). A peer holding the token can
// still name a shard missing or at another generation: an index carries
// no proof of either.

// indexCheck checks a shard's index: its size, and that it decodes
// (with its crc32c when the index codecs have one).
func (a *Array) indexCheck() cluster.Check {
	n := int64(a.shard.IndexSize())
	return cluster.Check{
		Size: func(m int64) error {
			if limit := 4*(n+2)/3 + 4096; m > limit { // JSON: the index in base64, and the shard's Info
				return fmt.Errorf("%d bytes for a %d-byte index", m, n)
			}
			return nil
		},
		Value: func(b []byte) error {
			var v clusterIndex
			if err := json.Unmarshal(b, &v); err != nil {
				return err
			}
			switch {
			case !v.Exists:
				return nil
			case v.Bytes == nil && v.Info.Size >= n:
				return fmt.Errorf("no index for a shard of %d bytes", v.Info.Size)
			case v.Bytes == nil:
				return nil
			case int64(len(v.Bytes)) != n:
				return fmt.Errorf("an index of %d bytes, want %d", len(v.Bytes), n)
			}
			_, err := a.shard.DecodeIndex(v.Bytes, v.Info.Size)
			return err
		},
	}
}

// SetPeers replaces the peers of the cluster the engine joined.
func (e *Engine) SetPeers(peers ...string) {
	if e.cluster != nil {
		e.cluster.SetPeers(peers...)
	}
}
