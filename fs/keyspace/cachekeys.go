package keyspace

import (
	"fmt"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// The keys of the mount's in-memory cache (FS.cache), one function per
// kind of value. Each kind has its own tag, so keys of two kinds never
// meet; every key of stored bytes names the object's generation, so a
// rewritten shard's entries are never served again (they age out).
//
// The keys of the disk cache and of the cluster are in diskcache.go and
// cluster.go: they leave the process, and name the store too. Blocks of
// stored objects (package blocks) are kept here under those keys too.

// objectKey is the key of an objectState: what is known of a stored
// object (for a shard, its index).
func objectKey(key string) string { return "obj\x00" + key }

// chunkRangeKey is the key of one chunk's stored bytes, read by range.
func chunkRangeKey(loc location) string {
	return fmt.Sprintf("raw\x00%s\x00%s\x00%d", loc.key, loc.gen, loc.off)
}

// trailerKey marks the chunk at loc as having passed its crc32c check.
func trailerKey(loc location) string {
	return fmt.Sprintf("crc\x00%s\x00%s\x00%d", loc.key, loc.gen, loc.off)
}

// transcodeKey is the key of a chunk of the view's grid re-encoded with
// the view's codecs, from the stored generation gen.
func (av *arrayView) transcodeKey(coords []int, gen store.Generation) string {
	return fmt.Sprintf("tc\x00%s\x00%s\x00%v\x00%s", av.view, av.path, coords, gen)
}
