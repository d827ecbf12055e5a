package keyspace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/zarrfs/zarrfs/cache"
	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/engine"
)

// Transcoded chunks are values of the cluster the views' engine joined
// (engine.JoinCluster), of their own kind (transcodedKey).

// JoinCluster makes the views a node of the cache the mounts of other
// machines share: shard indexes, chunk bytes and transcoded chunks of the
// remote store are then loaded once for the whole cluster, by their
// owner, as far as verify lets peers serve them. It logs the arrays whose
// chunks a peer could serve wrong (no crc32c to check them against), or,
// with engine.PeersForCRC32C, that they are read from the store. Call it
// before serving.
func (f *FS) JoinCluster(o cluster.Options, verify engine.PeerVerify) error {
	if err := f.engine.JoinCluster(o, verify, engine.PeerKind{Kind: transcodedKind, Load: f.loadTranscoded}); err != nil {
		return err
	}
	var unverifiable []string
	for _, n := range f.h.Arrays() {
		if n.Array != nil && !engine.ChunksVerifiable(n.Array) {
			unverifiable = append(unverifiable, "/"+n.Path)
		}
	}
	const listed = 20
	more := len(unverifiable) - listed
	unverifiable = unverifiable[:min(len(unverifiable), listed)]
	switch {
	case len(unverifiable) == 0:
	case verify == engine.PeersForAll:
		f.opts.Logger.Warn("peers can serve wrong bytes for the chunks of these arrays: they carry no crc32c to check them against (--peer-verify=crc32c-only reads them from the store)",
			"arrays", unverifiable, "more", max(more, 0))
	default:
		f.opts.Logger.Info("the chunks of these arrays carry no crc32c: read from the store, not from peers",
			"arrays", unverifiable, "more", max(more, 0))
	}
	return nil
}

// SetPeers replaces the peers of the cluster the views joined.
func (f *FS) SetPeers(peers ...string) { f.engine.SetPeers(peers...) }

// loadTranscoded transcodes a chunk for a peer, if this node's index of
// its shard is at the generation the peer read (an error otherwise: the
// peer then transcodes it itself), with the encoding the peer's setting
// gives, which may not be this node's.
func (f *FS) loadTranscoded(ctx context.Context, k cache.Key) ([]byte, error) {
	p := k.Names
	if len(p) != 6 {
		return nil, fmt.Errorf("bad transcoded key %q", k)
	}
	setting, codecs, source, viewName, path := p[0], p[1], p[2], p[3], p[4]
	var coords []int
	if err := json.Unmarshal([]byte(p[5]), &coords); err != nil {
		return nil, fmt.Errorf("bad transcoded key %q", k)
	}
	view := V3
	if viewName == V2.String() {
		view = V2
	}
	f.meta.RLock()
	av := f.arrays[path][view]
	f.meta.RUnlock()
	if av == nil || av.target == nil || len(coords) != len(av.grid) || source != av.storedDesc {
		return nil, fmt.Errorf("transcoded key %q: no such transcoded view", k)
	}
	target, err := av.peerTarget(setting, codecs)
	if err != nil {
		return nil, fmt.Errorf("transcoded key %q: %w", k, err)
	}
	loc, ok, err := av.locate(ctx, coords, false)
	switch {
	case err != nil:
		return nil, err
	case !ok || loc.Data != nil || loc.Key != k.Object || string(loc.Gen) != k.Gen:
		return nil, fmt.Errorf("transcoded key %q: this node sees another generation", k)
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

// transcodedCheck checks a transcoded chunk: its size bounded by what
// the view's codecs encode a chunk to, and that it decodes to the chunk
// stored at loc (whose bytes are then read, checked, and decoded here:
// cheaper than an encode with most compressors).
func (av *arrayView) transcodedCheck(ctx context.Context, coords []int, loc engine.Location) cluster.Check {
	return cluster.Check{
		Size: av.target.CheckEncodedSize,
		Value: func(b []byte) error {
			got, err := av.target.Decode(b)
			if err != nil {
				return err
			}
			stored, done, err := av.eng.ReadScratch(ctx, loc)
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
