package keyspace

import (
	"fmt"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// The keys the views keep in the engine's in-memory cache
// (engine.Engine.Cache), beside the engine's own (tags "obj" and "raw"):
// each kind has its own tag, and every key of what stored bytes give
// names the object's generation.

// trailerKey marks the chunk at loc as having passed its crc32c check.
func trailerKey(loc engine.Location) string {
	return fmt.Sprintf("crc\x00%s\x00%s\x00%d", loc.Key, loc.Gen, loc.Off)
}

// transcodeKey is the key of a chunk of the view's grid re-encoded with
// the view's codecs, from the stored generation gen.
func (av *arrayView) transcodeKey(coords []int, gen store.Generation) string {
	return fmt.Sprintf("tc\x00%s\x00%s\x00%v\x00%s", av.view, av.path, coords, gen)
}
