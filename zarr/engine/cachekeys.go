package engine

import (
	"strconv"

	"github.com/zarrfs/zarrfs/cache"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// The keys of the engine's values, in memory (Engine.Cache, which its
// users share under keys of other kinds), on disk and in the cluster: all
// are cache.Keys, named by the store, the object, its generation and the
// rest that changes the value, and a value kept in several tiers has one
// key in all (the blocks of stored objects, package blocks). A rewritten
// shard's entries are never served again: they name its old generation,
// or are checked against it (they age out).
//
// A kind's version changes whenever what its keys name does (the value's
// layout, what it depends on), so that peers or cache directories of
// another version never share a value.
const (
	// objectKind: what is known of a stored object (for a shard, its
	// index), in memory.
	objectKind = "object.1"
	// chunkKind: one chunk's stored bytes, read by range, in memory.
	chunkKind = "chunk.1"
	// diskIndexKind: a shard's index on disk (diskIndex).
	diskIndexKind = "diskindex.2"
	// indexKind: the index bytes of a shard in the cluster (clusterIndex).
	indexKind = "index.2"
)

// Key returns the key of a value derived from the stored bytes at loc,
// of a kind of the engine's users, named by what else changes it.
func (e *Engine) Key(kind string, loc Location, names ...string) cache.Key {
	return cache.Key{Kind: kind, Store: e.id, Object: loc.Key, Gen: string(loc.Gen), Names: names}
}

// objectKey is the key of an objectState: what is known of the stored
// object at key, with the index decoded as the array reads it (where in
// the shard, with which codecs: a state kept by an array of other
// metadata is not this array's, even for a shard of the same generation).
func (a *Array) objectKey(key string) string { return a.e.objectKey(key, a.indexLayout) }

// objectKey is the key of the state of the object at key as read with an
// index layout (see indexLayout).
func (e *Engine) objectKey(key string, layout []string) string {
	return cache.Key{Kind: objectKind, Store: e.id, Object: key, Names: layout}.String()
}

// chunkRangeKey is the key of one chunk's stored bytes, read by range.
func (e *Engine) chunkRangeKey(loc Location) string {
	return e.Key(chunkKind, loc, strconv.FormatInt(loc.Off, 10)).String()
}

// diskIndexKey names the index of the shard at key as the array reads it.
func (a *Array) diskIndexKey(key string) string {
	return cache.Key{Kind: diskIndexKind, Store: a.e.id, Object: key, Names: a.indexLayout}.String()
}

// indexKey names the bytes of span of the shard at key as the store held
// them in one revalidation interval (epoch counts intervals): SPAN is
// "-N", its last N bytes, or "0+N", its first.
func (e *Engine) indexKey(key string, span store.Span, epoch int64) string {
	spec := "0+" + strconv.FormatInt(span.Length, 10)
	if span.Suffix > 0 {
		spec = "-" + strconv.FormatInt(span.Suffix, 10)
	}
	return cache.Key{Kind: indexKind, Store: e.id, Object: key, Names: []string{spec, strconv.FormatInt(epoch, 10)}}.String()
}

// indexLayout is how an array reads its shards' indexes, as their keys
// name it: where in the shard, with which codecs; nil if unsharded.
func indexLayout(a *Array) []string {
	if a.shard == nil {
		return nil
	}
	at := "end"
	if a.shard.IndexAtStart() {
		at = "start"
	}
	return []string{at, meta.ChainString(a.shard.Config().IndexCodecs)}
}
