package keyspace

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/meta"
)

// doc is a metadata file of a directory.
type doc struct {
	name string
	data []byte
}

// arrayView is one array as a view shows it: its chunk grid (the inner
// chunks of a sharded array), key encoding, metadata documents, and how a
// stored chunk becomes a file.
type arrayView struct {
	fs   *FS
	view View
	path string // the array's path in the view and in the store
	a    *zarr.Array
	// eng locates and reads the stored chunks of the view's grid.
	eng   *engine.Array
	shard *sharding.Codec // nil for unsharded arrays
	grid  []int           // chunks of the view along each axis
	keys  meta.KeyEncoding
	// source decodes one stored chunk of the view's grid; target, when
	// set, encodes it for the view (transcoding); otherwise files are the
	// stored bytes minus drop trailing bytes (a checksum v2 cannot express).
	source *codec.Pipeline
	target *codec.Pipeline
	drop   int
	// verify is set when files are stored bytes that end with a crc32c,
	// which Open checks.
	verify bool
	// chunk and chain are the chunk shape and codecs of the view's grid;
	// storedDesc describes them, as transcoded chunks' keys name them.
	chunk      []int
	chain      []meta.Codec
	storedDesc string
	// codecs is the view's codec chain, for the user.zarr.codecs xattr.
	codecs string
	// dims, for levels of OME-Zarr images in the v2 view, are their
	// _ARRAY_DIMENSIONS (findOMELevels).
	dims []string
	// v2Fill is the fill_value the v2 view shows as the .zarray that
	// created the array said it (v2Said), nil to show the stored one.
	v2Fill json.RawMessage
	docs   []doc
	// transcoding is set while transcodeAhead works for this array.
	transcoding atomic.Bool
	// peerTargets are the encodings peers of other V2Transcode settings
	// asked for, by setting (peerTarget).
	peerTargets sync.Map
	// movedTo is the array's path once it was moved (guarded by FS.meta).
	movedTo string
}

// newArrayView translates an array for a view; an error says why the view
// cannot show it.
func newArrayView(f *FS, n *zarr.Node, v View) (*arrayView, error) {
	a := n.Array
	eng := f.engine.Array(a)
	av := &arrayView{fs: f, view: v, path: n.Path, a: a, eng: eng, shard: eng.Sharding(), source: eng.Source(), grid: eng.Grid(), keys: a.Keys}
	chunk, chain := a.ChunkShape, a.Codecs
	if av.shard != nil {
		chunk, chain = av.shard.ChunkShape(), av.shard.Config().Codecs
	}
	av.chunk, av.chain, av.storedDesc = chunk, chain, storedCodecs(chunk, chain)
	var err error
	if v == V3 {
		av.docs, err = v3ArrayDocs(n, chunk, chain)
		av.codecs = meta.ChainString(chain)
	} else {
		av.keys = meta.KeyEncoding{Name: meta.KeyEncodingV2, Separator: f.opts.V2Separator}
		if a.V3 != nil {
			var sep string
			if av.v2Fill, sep = v2Said(n.Attributes); sep != "" {
				av.keys.Separator = sep
			}
		}
		if dims, level := f.omeLevels[n.Path]; level {
			av.keys.Separator, av.dims = "/", dims
		}
		err = av.setV2(n, chunk, chain)
	}
	if err != nil {
		return nil, err
	}
	av.verify = av.target == nil && len(chain) > 0 && codec.IsTrailingCRC32C(chain[len(chain)-1])
	return av, nil
}

// v3ArrayDocs returns the zarr.json of an array in the v3 view: unsharded
// v3 arrays as they are, sharded ones with the inner chunk grid and codecs,
// v2 arrays translated.
func v3ArrayDocs(n *zarr.Node, chunk []int, chain []meta.Codec) ([]doc, error) {
	a := n.Array
	var m *meta.ArrayV3
	switch {
	case a.V3 != nil && a.Sharding() != nil:
		m = a.V3.WithChunking(chunk, chain)
		m.Attributes = withoutV2Said(m.Attributes)
	case a.V3 != nil:
		m = a.V3
		if shown := withoutV2Said(m.Attributes); len(shown) != len(m.Attributes) {
			m = m.Clone()
			m.Attributes = shown
		}
	default:
		fill := a.Fill()
		if fill == nil {
			fill = []byte{}
		}
		m = &meta.ArrayV3{Shape: a.Shape, DataType: a.Type, ChunkShape: a.ChunkShape, KeyEncoding: a.Keys,
			FillValue: fill, Codecs: a.Codecs, Attributes: n.Attributes}
	}
	b, err := m.Marshal()
	if err != nil {
		return nil, fmt.Errorf("no v3 form: %w", err)
	}
	return []doc{{zarr.ZarrJSON, b}}, nil
}

// setV2 sets up the array for the v2 view: pass-through when zarr-python 2
// can read the stored bytes (dropping a trailing crc32c), transcoding
// otherwise.
func (av *arrayView) setV2(n *zarr.Node, chunk []int, chain []meta.Codec) error {
	a := av.a
	var m *meta.ArrayV2
	if a.V2 != nil {
		m = a.V2.Clone()
		m.DimensionSeparator = av.keys.Separator
		m.Compressor = codec.V2Compatible(m.Compressor)
	} else {
		m = &meta.ArrayV2{Shape: a.Shape, Chunks: chunk, FillValue: a.Fill(), DimensionSeparator: av.keys.Separator}
		v2, ok := codec.ToV2(a.Type, chain, chunk)
		if !ok {
			var err error
			if v2, av.target, err = av.transcodeTarget(av.fs.opts.V2Transcode, chunk); err != nil {
				return err
			}
		}
		var err error
		if m.DataType, m.Endian, err = dtype.ParseV2(v2.DType); err != nil {
			return fmt.Errorf("no v2 data type: %w", err)
		}
		if m.DataType.Kind == dtype.Object {
			m.DataType = a.Type // the filters hold the object codec
		}
		m.Order, m.Filters, m.Compressor, av.drop = v2.Order, v2.Filters, v2.Compressor, v2.DropTrailing
		if av.v2Fill != nil {
			if fill, err := dtype.ParseFillV2(m.DataType, av.v2Fill); err == nil {
				m.FillValue, m.FillText = fill, av.v2Fill
			}
		}
		if ok {
			m.Filters, m.Compressor = v2SaidCodecs(n.Attributes, m, chain)
		}
		av.codecs = v2String(v2)
	}
	if av.codecs == "" {
		av.codecs = meta.ChainString(a.Codecs)
	}
	zarray, err := m.Marshal()
	if err != nil {
		return fmt.Errorf("no v2 form: %w", err)
	}
	av.docs = []doc{{zarr.ZArray, zarray}}
	attrs, err := av.fs.v2Attributes(n, av.dims)
	if err != nil {
		return err
	}
	av.docs = append(av.docs, doc{zarr.ZAttrs, attrs})
	return nil
}

// transcodeTarget picks the v2 encoding of chunks whose stored codecs have
// no v2 equivalent (Options.V2Transcode): little-endian C order,
// uncompressed or compressed with zarr-python 2's default compressor,
// blosc lz4 level 5 with byte shuffle, which every v2 reader has and which
// encodes several times faster than zstd level 1 (a transcode stands
// between a reader and its first byte). setting is the V2Transcode option:
// the view's, or a peer's (see loadTranscoded).
func (av *arrayView) transcodeTarget(setting string, chunk []int) (codec.V2Chain, *codec.Pipeline, error) {
	t := av.a.Type
	if t.Kind == dtype.Int || t.Kind == dtype.Uint {
		t.Bits = 0 // sub-byte integers are one byte each once decoded
	}
	typestr, err := dtype.FormatV2(t, dtype.Little)
	if err != nil {
		return codec.V2Chain{}, nil, fmt.Errorf("no v2 data type: %w", err)
	}
	v2 := codec.V2Chain{DType: typestr, Order: 'C'}
	raw := setting == TranscodeRaw
	if setting == TranscodeAuto {
		_, raw = av.source.EncodedSize() // a fixed size: not compressed
	}
	if !raw {
		v2.Compressor = json.RawMessage(`{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1,"blocksize":0}`)
	}
	switch t.Kind {
	case dtype.String:
		v2.Filters = []json.RawMessage{json.RawMessage(`{"id":"vlen-utf8"}`)}
	case dtype.Bytes:
		v2.Filters = []json.RawMessage{json.RawMessage(`{"id":"vlen-bytes"}`)}
	case dtype.Object:
		return v2, nil, fmt.Errorf("object arrays are not transcoded")
	}
	_, chain, err := codec.FromV2(t, dtype.Little, 'C', len(chunk), v2.Filters, v2.Compressor)
	if err != nil {
		return v2, nil, err
	}
	target, err := codec.NewPipeline(chain, codec.Spec{Shape: chunk, Type: t, Fill: av.source.Spec().Fill})
	return v2, target, err
}

// v2Attributes returns the .zattrs of a node: its attributes (OME-Zarr
// metadata in the 0.4 form), plus xarray's _ARRAY_DIMENSIONS for an array:
// dims if set, or else the v3 array's dimension names if it names them all.
func (f *FS) v2Attributes(n *zarr.Node, dims []string) ([]byte, error) {
	attrs := map[string]json.RawMessage{}
	if shown, _ := f.v2Form(n); len(shown) > 0 {
		if err := json.Unmarshal(shown, &attrs); err != nil {
			return nil, err
		}
	}
	delete(attrs, v2SaidKey)
	if a := n.Array; dims == nil && a != nil && a.V3 != nil && len(a.V3.DimensionNames) > 0 && !slices.Contains(a.V3.DimensionNames, nil) {
		dims = make([]string, len(a.V3.DimensionNames))
		for i, p := range a.V3.DimensionNames {
			dims[i] = *p
		}
	}
	if _, set := attrs["_ARRAY_DIMENSIONS"]; !set && n.Array != nil && dims != nil {
		attrs["_ARRAY_DIMENSIONS"], _ = json.Marshal(dims)
	}
	return json.MarshalIndent(attrs, "", "  ")
}

// v2String describes a v2 codec description.
func v2String(v codec.V2Chain) string {
	s := fmt.Sprintf("dtype=%s order=%c", v.DType, v.Order)
	for _, f := range v.Filters {
		s += " filter=" + string(f)
	}
	if len(v.Compressor) > 0 {
		s += " compressor=" + string(v.Compressor)
	}
	return s
}

// locate finds the stored bytes of the chunk at view coordinates; ok is
// false when the chunk is empty (an empty index entry or a missing shard).
func (av *arrayView) locate(ctx context.Context, coords []int, fresh bool) (engine.Location, bool, error) {
	loc, ok, err := av.eng.Locate(ctx, coords, fresh)
	if err == nil && ok {
		err = av.checkTrailer(ctx, loc)
	}
	return loc, ok, err
}

// locateUnchecked locates a chunk from its shard's cached index when its
// bytes are read straight from the store (engine.Array.LocateUnchecked);
// a transcoded chunk never is (its transcode is cached).
func (av *arrayView) locateUnchecked(ctx context.Context, coords []int) (engine.Location, bool, error) {
	if av.target != nil {
		return engine.Location{}, false, nil
	}
	loc, ok, err := av.eng.LocateUnchecked(ctx, coords)
	if err == nil && ok {
		err = av.checkTrailer(ctx, loc)
	}
	return loc, ok, err
}

// checkTrailer refuses chunks too short for the checksum the view drops.
func (av *arrayView) checkTrailer(ctx context.Context, loc engine.Location) error {
	if loc.N < int64(av.drop) {
		err := fmt.Errorf("%w: %s: a chunk of %d bytes cannot end with a %d-byte checksum", ErrCorrupt, loc.Key, loc.N, av.drop)
		av.fs.logOnce(ctx, loc.Key, "inner chunk shorter than its checksum: its files give EIO", "error", err)
		return err
	}
	return nil
}

// stored yields the view coordinates of every stored chunk whose leading
// coordinates equal prefix (engine.Array.Stored).
func (av *arrayView) stored(ctx context.Context, prefix []int) iter.Seq2[[]int, error] {
	return av.eng.Stored(ctx, prefix)
}
