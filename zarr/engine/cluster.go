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

	"github.com/zarrfs/zarrfs/cache"
	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Keys of the cluster cache (Options.Cluster) name immutable values, so
// no node ever needs to invalidate one (cachekeys.go): the aligned blocks
// of one generation of a shard (package blocks), the index bytes of a
// shard in one revalidation interval (indexKey), with the shard's
// generation and size, and the kinds of values the engine's users add
// (PeerKind), keyed by Engine.Key. A node serves peers only keys of its
// store.

// clusterIndex is the value of an index key.
type clusterIndex struct {
	Exists bool
	Info   store.Info
	Bytes  []byte // nil when the shard is shorter than its index
}

// PeerKind is a kind of cluster value the engine's users derive from
// stored bytes, named by keys of Kind (Engine.Key): Load loads the value
// such a key names, for a peer.
type PeerKind struct {
	Kind string
	Load func(ctx context.Context, k cache.Key) ([]byte, error)
}

// PeerVerify says which values a node asks its peers for.
type PeerVerify int

const (
	// PeersForAll asks peers for every value, each checked as far as its
	// format allows: the chunk bytes of an array whose chunks carry no
	// crc32c are taken as a peer sends them.
	PeersForAll PeerVerify = iota
	// PeersForCRC32C asks peers only for values whose bytes a crc32c
	// protects: the chunk bytes of arrays whose (inner) chunks end with
	// one, the indexes of shards whose index codecs end with one. The
	// others are read from the store, and so is a shard a peer says is
	// missing (an index answer proves nothing of that).
	PeersForCRC32C
)

// ChunksVerifiable reports whether the stored (inner) chunks of a end
// with a crc32c, against which bytes from a peer are checked.
func ChunksVerifiable(a *zarr.Array) bool {
	if sh := a.Sharding(); sh != nil {
		return endsWithCRC32C(sh.Config().Codecs)
	}
	return endsWithCRC32C(a.Codecs)
}

func endsWithCRC32C(chain []meta.Codec) bool {
	return len(chain) > 0 && codec.IsTrailingCRC32C(chain[len(chain)-1])
}

// chunksFromPeers reports whether the array's chunk bytes are read
// through the cluster.
func (a *Array) chunksFromPeers() bool {
	return a.e.cluster != nil && (a.e.peerVerify == PeersForAll || endsWithCRC32C(a.chain))
}

// indexFromPeers reports whether the array's shard indexes are read
// through the cluster.
func (a *Array) indexFromPeers() bool {
	return a.e.cluster != nil && a.shard != nil && (a.e.peerVerify == PeersForAll || endsWithCRC32C(a.shard.Config().IndexCodecs))
}

// JoinCluster makes the engine a node of the cache the mounts of other
// machines share (o's Accept and Load are the engine's): shard indexes,
// chunk bytes and the values of kinds are then loaded once for the whole
// cluster, by their owner, as far as verify lets peers serve them. Call
// it before reading.
func (e *Engine) JoinCluster(o cluster.Options, verify PeerVerify, kinds ...PeerKind) error {
	if e.files != nil {
		return fmt.Errorf("a cluster shares the cache of remote stores (s3://, gs://, http(s)://); %s is local", e.store)
	}
	e.kinds, e.peerVerify = kinds, verify
	o.Accept, o.Load, o.Logger = e.acceptsPeerKey, e.loadPeerKey, e.opts.Logger
	c, err := cluster.Start(o)
	if err != nil {
		return err
	}
	e.cluster = c
	e.stackBlocks()
	return nil
}

// acceptsPeerKey reports whether a key is of this node's store, and of a
// kind it loads.
func (e *Engine) acceptsPeerKey(k string) bool {
	c, err := cache.ParseKey(k)
	if err != nil || c.Store != e.id {
		return false
	}
	return c.Kind == blocks.Kind || c.Kind == indexKind || slices.ContainsFunc(e.kinds, func(kind PeerKind) bool { return c.Kind == kind.Kind })
}

// loadPeerKey loads a key this node owns, from the store.
func (e *Engine) loadPeerKey(ctx context.Context, k string) ([]byte, error) {
	c, err := cache.ParseKey(k)
	if err != nil || c.Store != e.id {
		return nil, fmt.Errorf("cluster key %q: not a key of %s", k, e.store)
	}
	switch c.Kind {
	case blocks.Kind:
		return blocks.Load(ctx, e.origin, k)
	case indexKind:
		return loadIndex(ctx, e.store, c)
	}
	for _, kind := range e.kinds {
		if c.Kind == kind.Kind {
			return kind.Load(ctx, c)
		}
	}
	return nil, fmt.Errorf("cluster key %q: not a kind of value of %s", k, e.store)
}

// loadIndex reads the index bytes of a shard (indexKey); a missing shard
// is a value.
func loadIndex(ctx context.Context, s store.Store, k cache.Key) ([]byte, error) {
	if len(k.Names) != 2 || k.Gen != "" {
		return nil, fmt.Errorf("bad index key %q", k)
	}
	var span store.Span
	if n, ok := strings.CutPrefix(k.Names[0], "-"); ok {
		span.Suffix, _ = strconv.ParseInt(n, 10, 64)
	} else if n, ok := strings.CutPrefix(k.Names[0], "0+"); ok {
		span.Length, _ = strconv.ParseInt(n, 10, 64)
	}
	if span.Suffix <= 0 && span.Length <= 0 || span.Suffix > 1<<30 || span.Length > 1<<30 {
		return nil, fmt.Errorf("bad index key %q", k)
	}
	b, info, err := s.Get(ctx, k.Object, span, store.Cond{})
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
	b, err := a.e.cluster.Get(ctx, a.e.indexKey(key, span, epoch), a.indexCheck())
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
