package keyspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/codec"
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
//	transcoded \0 STORE \0 VIEW \0 ARRAY \0 COORDS \0 GENERATION
//	    a chunk of a view re-encoded from one generation of its shard.
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

// JoinCluster makes the views a node of the cache the mounts of other
// machines share (o's Accept and Load are the views'): shard indexes,
// chunk bytes and transcoded chunks of the remote store are then loaded
// once for the whole cluster, by their owner. Call it before serving.
func (f *FS) JoinCluster(o cluster.Options) error {
	if f.files != nil {
		return fmt.Errorf("a cluster shares the cache of remote stores (s3://, http(s)://); %s is local", f.store)
	}
	o.Accept, o.Load, o.Logger = f.acceptsPeerKey, f.loadPeerKey, f.opts.Logger
	c, err := cluster.Start(o)
	if err != nil {
		return err
	}
	f.cluster = c
	return nil
}

func (f *FS) peerKeyPrefix(kind string) string { return kind + "\x00" + f.store.String() + "\x00" }

// acceptsPeerKey reports whether a key is of this node's store.
func (f *FS) acceptsPeerKey(k string) bool {
	for _, kind := range []string{"range", "index", "transcoded"} {
		if strings.HasPrefix(k, f.peerKeyPrefix(kind)) {
			return true
		}
	}
	return false
}

// loadPeerKey loads a key this node owns, from the store.
func (f *FS) loadPeerKey(ctx context.Context, k string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(k, f.peerKeyPrefix("range")); ok {
		return loadRange(ctx, f.store, rest)
	}
	if rest, ok := strings.CutPrefix(k, f.peerKeyPrefix("index")); ok {
		return loadIndex(ctx, f.store, rest)
	}
	if rest, ok := strings.CutPrefix(k, f.peerKeyPrefix("transcoded")); ok {
		return f.loadTranscoded(ctx, rest)
	}
	return nil, fmt.Errorf("cluster key %q: not a key of %s", k, f.store)
}

// transcodedKey names a chunk of a view re-encoded from one generation
// of its shard.
func transcodedKey(s store.Store, av *arrayView, coords []int, gen store.Generation) string {
	c, _ := json.Marshal(coords)
	return fmt.Sprintf("transcoded\x00%s\x00%s\x00%s\x00%s\x00%s", s, av.view, av.a.Path, c, gen)
}

// loadTranscoded transcodes a chunk for a peer, if this node's index of
// its shard is at the generation the peer read (an error otherwise: the
// peer then transcodes it itself).
func (f *FS) loadTranscoded(ctx context.Context, rest string) ([]byte, error) {
	p := strings.Split(rest, "\x00")
	if len(p) != 4 {
		return nil, fmt.Errorf("bad transcoded key %q", rest)
	}
	var coords []int
	if err := json.Unmarshal([]byte(p[2]), &coords); err != nil {
		return nil, fmt.Errorf("bad transcoded key %q", rest)
	}
	view := V3
	if p[0] == V2.String() {
		view = V2
	}
	f.meta.RLock()
	av := f.arrays[p[1]][view]
	f.meta.RUnlock()
	if av == nil || av.target == nil || len(coords) != len(av.grid) {
		return nil, fmt.Errorf("transcoded key %q: no such transcoded view", rest)
	}
	loc, ok, err := av.locate(ctx, coords, false)
	switch {
	case err != nil:
		return nil, err
	case !ok || loc.data != nil || loc.gen != store.Generation(p[3]):
		return nil, fmt.Errorf("transcoded key %q: this node sees another generation", rest)
	}
	return av.transcode(ctx, coords, loc)
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
	b, err := av.fs.cluster.Get(ctx, indexKey(av.fs.store, key, span, epoch), av.indexCheck())
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

// What a peer sends is checked as far as the format allows before it is
// used or cached (in memory or on disk): a value that fails is loaded
// from the store instead (cluster.Check). A peer holding the token can
// still name a shard missing or at another generation: an index carries
// no proof of either.

// rangeCheck checks the bytes of span, the chunks of run: their length,
// and each chunk's crc32c when the array's chunks end with one.
func (av *arrayView) rangeCheck(span storedRange, run []storedRange) cluster.Check {
	crc := len(av.chain) > 0 && codec.IsTrailingCRC32C(av.chain[len(av.chain)-1])
	return cluster.Check{
		Size: func(n int64) error {
			if n != span.n {
				return fmt.Errorf("%d bytes for a range of %d", n, span.n)
			}
			return nil
		},
		Value: func(b []byte) error {
			for _, r := range run {
				if crc && !codec.EndsWithCRC32C(b[r.off-span.off:r.off-span.off+r.n]) {
					return fmt.Errorf("crc32c of the inner chunk at offset %d does not match", r.off)
				}
			}
			return nil
		},
	}
}

// indexCheck checks a shard's index: its size, and that it decodes
// (with its crc32c when the index codecs have one).
func (av *arrayView) indexCheck() cluster.Check {
	n := int64(av.shard.IndexSize())
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
			_, err := av.shard.DecodeIndex(v.Bytes, v.Info.Size)
			return err
		},
	}
}

// transcodedCheck checks a transcoded chunk: its size bounded by what
// the view's codecs encode a chunk to, and that it decodes to the chunk
// stored at loc (whose bytes are then read, checked, and decoded here:
// cheaper than an encode with most compressors).
func (av *arrayView) transcodedCheck(ctx context.Context, coords []int, loc location) cluster.Check {
	return cluster.Check{
		Size: av.target.CheckEncodedSize,
		Value: func(b []byte) error {
			got, err := av.target.Decode(b)
			if err != nil {
				return err
			}
			stored, done, err := av.readStoredScratch(ctx, loc)
			if err != nil {
				return err
			}
			defer done()
			want, err := av.source.Decode(stored)
			if err != nil {
				return err
			}
			if !bytes.Equal(got.Data, want.Data) || !slices.EqualFunc(got.Items, want.Items, bytes.Equal) {
				return fmt.Errorf("chunk %v decodes to other values than the stored chunk", coords)
			}
			return nil
		},
	}
}

// SetPeers replaces the peers of the cluster the views joined.
func (f *FS) SetPeers(peers ...string) {
	if f.cluster != nil {
		f.cluster.SetPeers(peers...)
	}
}
