package engine

import "fmt"

// The keys of the engine's in-memory cache (Engine.Cache, which its users
// share under keys of other tags), one function per kind of value. Each kind has its own tag, so keys of two kinds never
// meet; every key of stored bytes names the object's generation, so a
// rewritten shard's entries are never served again (they age out).
//
// The keys of the disk cache and of the cluster are in diskcache.go and
// cluster.go: they leave the process, and name the store too. Blocks of
// stored objects (package blocks) are kept here under those keys too.

// objectKey is the key of an objectState: what is known of a stored
// object (for a shard, its index), in Engine.objects.
func objectKey(key string) string { return "obj\x00" + key }

// chunkRangeKey is the key of one chunk's stored bytes, read by range.
func chunkRangeKey(loc Location) string {
	return fmt.Sprintf("raw\x00%s\x00%s\x00%d", loc.Key, loc.Gen, loc.Off)
}
