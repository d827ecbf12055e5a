package keyspace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Transcoded chunks are values of the cluster the views' engine joined
// (engine.JoinCluster), of their own kind:
//
//	transcoded.VERSION \0 STORE \0 SETTING \0 CODECS \0 SOURCE \0 VIEW \0 ARRAY \0 COORDS \0 GENERATION
//	    a chunk of a view re-encoded from one generation of its shard:
//	    SETTING is --v2-transcode, CODECS the encoding it gives, SOURCE
//	    the chunk shape and codecs of the stored chunks.
//
// The version changes whenever what a key names does (its value's
// layout, what it depends on).
const transcodedKind = "transcoded.1"

// JoinCluster makes the views a node of the cache the mounts of other
// machines share: shard indexes, chunk bytes and transcoded chunks of the
// remote store are then loaded once for the whole cluster, by their
// owner. Call it before serving.
func (f *FS) JoinCluster(o cluster.Options) error {
	return f.engine.JoinCluster(o, engine.PeerKind{Kind: transcodedKind, Load: f.loadTranscoded})
}

// SetPeers replaces the peers of the cluster the views joined.
func (f *FS) SetPeers(peers ...string) { f.engine.SetPeers(peers...) }

// transcodedKey names a chunk of a view re-encoded from one generation
// of its shard, with the encoding the view's V2Transcode setting gives.
func (av *arrayView) transcodedKey(coords []int, gen store.Generation) string {
	c, _ := json.Marshal(coords)
	return strings.Join([]string{av.fs.engine.PeerKeyPrefix(transcodedKind) + av.fs.opts.V2Transcode, av.codecs, av.sourceCodecs(), av.view.String(), av.a.Path, string(c), string(gen)}, "\x00")
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
	case !ok || loc.Data != nil || loc.Gen != gen:
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
