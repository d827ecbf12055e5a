package keyspace

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/meta"
)

// The keys of what the views derive from stored bytes, in the engine's
// memory cache (engine.Engine.Cache) and, for transcoded chunks, in the
// cluster: engine.Engine.Key, with kinds of their own.
const (
	// trailerKind marks a stored chunk as having passed its crc32c check.
	trailerKind = "crc32c.1"
	// transcodedKind: a chunk of a view re-encoded from one generation of
	// its shard, in memory and in the cluster (transcodedKey).
	transcodedKind = "transcoded.2"
)

// trailerKey marks the chunk at loc as having passed its crc32c check.
func (f *FS) trailerKey(loc engine.Location) string {
	return f.engine.Key(trailerKind, loc, strconv.FormatInt(loc.Off, 10)).String()
}

// transcodedKey names the chunk at coords of the view, stored at loc,
// re-encoded with the encoding the view's V2Transcode setting gives:
//
//	transcoded.2 \0 STORE \0 SHARD \0 GENERATION \0 SETTING \0 CODECS \0 SOURCE \0 VIEW \0 ARRAY \0 COORDS
//
// SETTING is --v2-transcode, CODECS the encoding it gives, SOURCE the
// chunk shape and codecs of the stored chunks: a node of another setting,
// or a mount of other metadata, never takes it for its own.
func (av *arrayView) transcodedKey(coords []int, loc engine.Location) string {
	c, _ := json.Marshal(coords)
	return av.fs.engine.Key(transcodedKind, loc, av.fs.opts.V2Transcode, av.codecs, av.storedDesc, av.view.String(), av.a.Path, string(c)).String()
}

// storedCodecs describes how a view's stored chunks decode: their shape
// and codecs.
func storedCodecs(chunk []int, chain []meta.Codec) string {
	return fmt.Sprintf("%v %s", chunk, meta.ChainString(chain))
}
