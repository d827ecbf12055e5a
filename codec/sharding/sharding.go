// Package sharding implements the sharding_indexed codec: a shard holds
// many inner chunks, each encoded with the inner codecs, plus an index of
// (offset, nbytes) pairs encoded with the index codecs, at the start or the
// end of the shard.
//
// Besides whole-shard Encode and Decode (which make nested sharding work),
// a shard is a small key-value store over any io.ReaderAt: ReadIndex reads
// only the index, ReadChunk one inner chunk's byte range, and EncodeShard
// assembles a shard from encoded inner chunks.
package sharding

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
)

// Name is the codec's v3 name.
const Name = "sharding_indexed"

func init() {
	codec.Register(Name, func(config json.RawMessage, spec codec.Spec) (any, error) {
		return New(config, spec)
	})
}

// Config is the codec's configuration.
type Config struct {
	ChunkShape    []int        `json:"chunk_shape"`
	Codecs        []meta.Codec `json:"codecs"`
	IndexCodecs   []meta.Codec `json:"index_codecs"`
	IndexLocation string       `json:"index_location,omitempty"`
}

// Codec is a sharding_indexed codec for shards of one spec.
type Codec struct {
	config    Config
	spec      codec.Spec // the shard
	grid      []int      // inner chunks per shard along each axis
	inner     *codec.Pipeline
	index     *codec.Pipeline
	indexSize int
	atStart   bool
}

var _ codec.ArrayToBytes = (*Codec)(nil)

// New builds the codec for shards of spec.
func New(raw json.RawMessage, spec codec.Spec) (*Codec, error) {
	var cfg Config
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: configuration is required", codec.ErrConfig)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%w: %v", codec.ErrConfig, err)
	}
	c := &Codec{config: cfg, spec: spec}
	switch cfg.IndexLocation {
	case "", "end":
	case "start":
		c.atStart = true
	default:
		return nil, fmt.Errorf("%w: index_location %q is neither \"start\" nor \"end\"", codec.ErrConfig, cfg.IndexLocation)
	}
	if len(cfg.ChunkShape) != len(spec.Shape) {
		return nil, fmt.Errorf("%w: chunk_shape %v has %d dimensions, the shard has %d", codec.ErrConfig, cfg.ChunkShape, len(cfg.ChunkShape), len(spec.Shape))
	}
	c.grid = make([]int, len(spec.Shape))
	for d, n := range cfg.ChunkShape {
		if n <= 0 || spec.Shape[d]%n != 0 {
			return nil, fmt.Errorf("%w: chunk_shape %v does not divide the shard shape %v", codec.ErrConfig, cfg.ChunkShape, spec.Shape)
		}
		c.grid[d] = spec.Shape[d] / n
	}
	if n, ok := nd.SizeFits(c.grid); !ok || n > codec.MaxDecodedSize/16 {
		return nil, fmt.Errorf("%w: %v inner chunks per shard: an index larger than the %d bytes read in memory", codec.ErrConfig, c.grid, codec.MaxDecodedSize)
	}
	if len(cfg.Codecs) == 0 {
		return nil, fmt.Errorf("%w: codecs is empty", codec.ErrConfig)
	}
	if len(cfg.IndexCodecs) == 0 {
		return nil, fmt.Errorf("%w: index_codecs is empty", codec.ErrConfig)
	}
	var err error
	innerSpec := codec.Spec{Shape: slices.Clone(cfg.ChunkShape), Type: spec.Type, Fill: spec.Fill}
	if c.inner, err = codec.NewPipeline(cfg.Codecs, innerSpec); err != nil {
		return nil, fmt.Errorf("inner codecs: %w", err)
	}
	indexSpec := codec.Spec{Shape: append(slices.Clone(c.grid), 2), Type: dtype.TypeUint64, Fill: emptyEntry[:]}
	if c.index, err = codec.NewPipeline(cfg.IndexCodecs, indexSpec); err != nil {
		return nil, fmt.Errorf("index_codecs: %w", err)
	}
	var fixed bool
	if c.indexSize, fixed = c.index.EncodedSize(); !fixed {
		return nil, fmt.Errorf("%w: index_codecs must have a fixed encoded size (no compression)", codec.ErrConfig)
	}
	return c, nil
}

var emptyEntry = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Config returns the configuration the codec was built from.
func (c *Codec) Config() Config { return c.config }

// Grid is the number of inner chunks along each axis of a shard.
func (c *Codec) Grid() []int { return c.grid }

// NumChunks is the number of inner chunks in a shard.
func (c *Codec) NumChunks() int { return nd.Size(c.grid) }

// ChunkShape is the shape of an inner chunk.
func (c *Codec) ChunkShape() []int { return c.config.ChunkShape }

// Inner is the inner chunks' pipeline.
func (c *Codec) Inner() *codec.Pipeline { return c.inner }

// IndexSize is the encoded size of the index in bytes.
func (c *Codec) IndexSize() int { return c.indexSize }

// IndexAtStart reports whether the index precedes the chunks.
func (c *Codec) IndexAtStart() bool { return c.atStart }

// EncodedSize reports that shards have no fixed size.
func (c *Codec) EncodedSize() (int, bool) { return 0, false }
