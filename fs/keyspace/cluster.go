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

	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr/meta"
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
//	transcoded.VERSION \0 STORE \0 SETTING \0 CODECS \0 SOURCE \0 VIEW \0 ARRAY \0 COORDS \0 GENERATION
//	    a chunk of a view re-encoded from one generation of its shard:
//	    SETTING is --v2-transcode, CODECS the encoding it gives, SOURCE
//	    the chunk shape and codecs of the stored chunks.
//
// STORE is the store's URL: a node serves peers only keys of its store.

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

// JoinCluster makes the views a node of the cache the mounts of other
// machines share (o's Accept and Load are the views'): shard indexes,
// chunk bytes and transcoded chunks of the remote store are then loaded
// once for the whole cluster, by their owner. Call it before serving.
func (f *FS) JoinCluster(o cluster.Options) error {
	if f.files != nil {
		return fmt.Errorf("a cluster shares the cache of remote stores (s3://, gs://, http(s)://); %s is local", f.store)
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
	for _, p := range []string{blocks.Prefix(f.store.String()), f.peerKeyPrefix(indexKind), f.peerKeyPrefix(transcodedKind)} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// loadPeerKey loads a key this node owns, from the store.
func (f *FS) loadPeerKey(ctx context.Context, k string) ([]byte, error) {
	if strings.HasPrefix(k, blocks.Prefix(f.store.String())) {
		return blocks.Load(ctx, f.store, k)
	}
	if rest, ok := strings.CutPrefix(k, f.peerKeyPrefix(indexKind)); ok {
		return loadIndex(ctx, f.store, rest)
	}
	if rest, ok := strings.CutPrefix(k, f.peerKeyPrefix(transcodedKind)); ok {
		return f.loadTranscoded(ctx, rest)
	}
	return nil, fmt.Errorf("cluster key %q: not a key of %s", k, f.store)
}

// The kinds of keys lead them; their versions change whenever what a
// key names does (its value's layout, what it depends on).
const (
	indexKind      = "index.1"
	transcodedKind = "transcoded.1"
)

// transcodedKey names a chunk of a view re-encoded from one generation
// of its shard, with the encoding the view's V2Transcode setting gives.
func (av *arrayView) transcodedKey(coords []int, gen store.Generation) string {
	c, _ := json.Marshal(coords)
	return strings.Join([]string{av.fs.peerKeyPrefix(transcodedKind) + av.fs.opts.V2Transcode, av.codecs, av.sourceCodecs(), av.view.String(), av.a.Path, string(c), string(gen)}, "\x00")
}

// sourceCodecs describes how the view's stored chunks decode: their shape
// and codecs.
func (av *arrayView) sourceCodecs() string {
	return fmt.Sprintf("%v %s", av.chunk, meta.ChainString(av.chain))
}

// loadTranscoded transcodes a chunk for a peer, if this node's index of
// its shard is at the generation the peer read (an error otherwise: the
// peer then transcodes it itself), with the encoding the peer's setting
// gives, which may not be this node's.
func (f *FS) loadTranscoded(ctx context.Context, rest string) ([]byte, error) {
	p := strings.Split(rest, "\x00")
	if len(p) != 7 {
		return nil, fmt.Errorf("bad transcoded key %q", rest)
	}
	setting, codecs, source, viewName, path, gen := p[0], p[1], p[2], p[3], p[4], store.Generation(p[6])
	var coords []int
	if err := json.Unmarshal([]byte(p[5]), &coords); err != nil {
		return nil, fmt.Errorf("bad transcoded key %q", rest)
	}
	view := V3
	if viewName == V2.String() {
		view = V2
	}
	f.meta.RLock()
	av := f.arrays[path][view]
	f.meta.RUnlock()
	if av == nil || av.target == nil || len(coords) != len(av.grid) || source != av.sourceCodecs() {
		return nil, fmt.Errorf("transcoded key %q: no such transcoded view", rest)
	}
	target, err := av.peerTarget(setting, codecs)
	if err != nil {
		return nil, fmt.Errorf("transcoded key %q: %w", rest, err)
	}
	loc, ok, err := av.locate(ctx, coords, false)
	switch {
	case err != nil:
		return nil, err
	case !ok || loc.data != nil || loc.gen != gen:
		return nil, fmt.Errorf("transcoded key %q: this node sees another generation", rest)
	}
	return av.transcode(ctx, coords, loc, target)
}

// peerTarget returns the codecs a peer's V2Transcode setting encodes the
// view's chunks with, which must give the peer's codecs description.
func (av *arrayView) peerTarget(setting, codecs string) (*codec.Pipeline, error) {
	if setting == av.fs.opts.V2Transcode && codecs == av.codecs {
		return av.target, nil
	}
	if setting != TranscodeRaw && setting != TranscodeBloscLZ4 && setting != TranscodeAuto {
		return nil, fmt.Errorf("no --v2-transcode setting %q", setting)
	}
	t, ok := av.peerTargets.Load(setting)
	if !ok {
		v2, target, err := av.transcodeTarget(setting, av.chunk)
		if err != nil {
			return nil, err
		}
		t, _ = av.peerTargets.LoadOrStore(setting, peerTarget{target, v2String(v2)})
	}
	if pt := t.(peerTarget); pt.codecs == codecs {
		return pt.target, nil
	}
	return nil, fmt.Errorf("the setting %q encodes other codecs here than %s", setting, codecs)
}

// peerTarget is how a peer's V2Transcode setting encodes a view's chunks.
type peerTarget struct {
	target *codec.Pipeline
	codecs string // as in arrayView.codecs
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
