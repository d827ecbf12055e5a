package zarr

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// A deleted array's metadata document is kept under its name plus
// TombstoneSuffix while its chunks are deleted: a delete cut short (a
// crash) leaves chunks only beside their tombstone, which proves which
// keys they are and lets `zarrfs compact` finish the delete.
const TombstoneSuffix = ".deleted"

// DeleteArrayMetadata is the first step of deleting an array: it stores
// the tombstone, then deletes the metadata documents, after which readers
// no longer see the array. DeleteArrayChunks finishes the delete.
func DeleteArrayMetadata(ctx context.Context, a *Array) error {
	docs := []string{ZarrJSON}
	if a.Format == 2 {
		docs = []string{ZArray, ZAttrs}
	}
	key := store.Join(a.Path, docs[0])
	b, err := ReadDocument(ctx, a.store, key)
	if err != nil {
		return err
	}
	if err := store.Write(ctx, a.store, key+TombstoneSuffix, b); err != nil {
		return err
	}
	for _, d := range docs {
		if err := store.Delete(ctx, a.store, store.Join(a.Path, d), store.Cond{}); err != nil {
			return err
		}
	}
	return nil
}

// DeleteGroupMetadata deletes a group's metadata documents.
func DeleteGroupMetadata(ctx context.Context, s store.Store, path string, format int) error {
	docs := []string{ZarrJSON}
	if format == 2 {
		docs = []string{ZGroup, ZAttrs}
	}
	keys := make([]string, len(docs))
	for i, d := range docs {
		keys[i] = store.Join(path, d)
		if err := store.Delete(ctx, s, keys[i], store.Cond{}); err != nil {
			return err
		}
	}
	if path == "" {
		return nil
	}
	return pruneAll(s, keys, parentPath(path))
}

// Deleted is an array whose metadata was deleted, found by its tombstone.
type Deleted struct {
	// Tombstone is the key of the tombstone.
	Tombstone string
	// Array is the deleted array as its tombstone describes it.
	Array *Array
	// Live: the array's metadata is back (an array was created at the
	// same path since), so its chunks are not the deleted array's and
	// nothing of it may be deleted but the tombstone.
	Live bool
}

// FindDeleted yields the deleted arrays whose tombstones are in the store
// below prefix.
func FindDeleted(ctx context.Context, s store.Store, prefix string) iter.Seq2[Deleted, error] {
	return func(yield func(Deleted, error) bool) {
		for key, err := range store.List(ctx, s, prefix) {
			if err != nil {
				yield(Deleted{}, err)
				return
			}
			d, ok, err := openTombstone(ctx, s, key)
			if (ok || err != nil) && !yield(d, err) {
				return
			}
		}
	}
}

// openTombstone opens the tombstone at key; ok is false if key is none.
func openTombstone(ctx context.Context, s store.Store, key string) (Deleted, bool, error) {
	doc, isTombstone := strings.CutSuffix(key, TombstoneSuffix)
	name := doc[strings.LastIndex(doc, "/")+1:]
	if !isTombstone || name != ZarrJSON && name != ZArray {
		return Deleted{}, false, nil
	}
	path := strings.TrimSuffix(strings.TrimSuffix(doc, name), "/")
	d := Deleted{Tombstone: key}
	b, err := ReadDocument(ctx, s, key)
	if err != nil {
		return d, true, err
	}
	if name == ZarrJSON {
		node, err := meta.ParseV3(b)
		m, isArray := node.(*meta.ArrayV3)
		if err != nil || !isArray {
			return d, true, fmt.Errorf("%s: not the metadata of an array: %v", key, err)
		}
		d.Array, err = openArrayV3(s, path, m)
		if err != nil {
			return d, true, fmt.Errorf("%s: %w", key, err)
		}
	} else {
		m, err := meta.ParseZarray(b)
		if err != nil {
			return d, true, fmt.Errorf("%s: %w", key, err)
		}
		if d.Array, err = openArrayV2(s, path, m); err != nil {
			return d, true, fmt.Errorf("%s: %w", key, err)
		}
	}
	_, err = s.Stat(ctx, doc)
	switch {
	case err == nil:
		d.Live = true
	case !errors.Is(err, store.ErrNotFound):
		return d, true, err
	}
	return d, true, nil
}

// Chunks yields the keys of the deleted array's chunks (shards) that are
// still stored: keys of its chunk grid whose content proves it (a shard
// index that decodes, checksum included, or a chunk that decodes) and
// that no symbolic link leads to from elsewhere in a local store. Other
// keys below the array are never its chunks.
func (d Deleted) Chunks(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for c, err := range d.proven(ctx) {
			if !yield(c.key, err) || err != nil {
				return
			}
		}
	}
}

// provenChunk is a key that holds a chunk of the deleted array, at the
// generation its content was proven at.
type provenChunk struct {
	key string
	gen store.Generation
}

// proven yields the chunks Chunks names, each with its generation.
func (d Deleted) proven(ctx context.Context) iter.Seq2[provenChunk, error] {
	return func(yield func(provenChunk, error) bool) {
		if d.Live {
			return
		}
		a := d.Array
		prefix := a.Path
		if prefix != "" {
			prefix += "/"
		}
		for key, err := range store.List(ctx, a.store, prefix) {
			if err != nil {
				yield(provenChunk{}, err)
				return
			}
			coords, ok := a.ParseChunkKey(strings.TrimPrefix(key, prefix))
			if !ok {
				continue
			}
			if linked, err := store.Linked(a.store, key); err != nil || linked {
				continue
			}
			gen, ok := a.provesChunk(ctx, key, coords)
			if !ok {
				continue
			}
			if !yield(provenChunk{key, gen}, nil) {
				return
			}
		}
	}
}

// provesChunk reports whether the value at key, of the chunk (shard) at
// grid coordinates, is the array's: a shard whose index decodes and whose
// stored inner chunks all lie in the array, or a chunk that decodes. gen
// is the generation of the value proven.
func (a *Array) provesChunk(ctx context.Context, key string, coords []int) (gen store.Generation, ok bool) {
	if a.shard == nil {
		b, info, err := a.store.Get(ctx, key, store.All, store.Cond{})
		if err != nil {
			return "", false
		}
		if _, err := a.pipeline.Decode(b); err != nil {
			return "", false
		}
		return info.Generation, true
	}
	ix, info, err := a.ReadShardIndex(ctx, key, store.Cond{})
	if err != nil {
		return "", false
	}
	grid := a.InnerGrid()
	for i := range ix.Len() {
		if _, _, ok := ix.Chunk(i); ok && !nd.Inside(a.InnerCoords(coords, i), grid) {
			return "", false
		}
	}
	return info.Generation, true
}

// Finish deletes the deleted array's chunks and then its tombstone (only
// the tombstone if the array is live again). It returns the keys deleted.
// Each chunk is deleted only at the generation it was proven at: a key
// written since (by an array created at the same path) is not the deleted
// array's, and stays.
func (d Deleted) Finish(ctx context.Context) ([]string, error) {
	var chunks []provenChunk
	for c, err := range d.proven(ctx) {
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, c)
	}
	s := d.Array.store
	var keys []string
	for _, c := range chunks {
		err := store.Delete(ctx, s, c.key, store.Cond{IfMatch: c.gen})
		if errors.Is(err, store.ErrPrecondition) {
			continue
		}
		if err != nil {
			return keys, err
		}
		keys = append(keys, c.key)
	}
	if err := store.Delete(ctx, s, d.Tombstone, store.Cond{}); err != nil {
		return keys, err
	}
	// The directories (of a local store) that held only these keys go too,
	// the array's own included.
	return keys, pruneAll(s, append(slices.Clone(keys), d.Tombstone), parentPath(d.Array.Path))
}

// FinishDeletesAt finishes the deletes cut short of arrays at path (their
// tombstones, of either format), so that a node created there shows none
// of their chunks. It returns the keys deleted.
func FinishDeletesAt(ctx context.Context, s store.Store, path string) ([]string, error) {
	var deleted []string
	for _, name := range []string{ZarrJSON, ZArray} {
		key := store.Join(path, name+TombstoneSuffix)
		if _, err := s.Stat(ctx, key); errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return deleted, err
		}
		d, _, err := openTombstone(ctx, s, key)
		if err != nil {
			return deleted, err
		}
		keys, err := d.Finish(ctx)
		deleted = append(deleted, keys...)
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// pruneAll removes the directories of a local store that deleting keys
// left empty, up to stop.
func pruneAll(s store.Store, keys []string, stop string) error {
	for _, key := range keys {
		if err := store.Prune(s, key, stop); err != nil {
			return err
		}
	}
	return nil
}

// parentPath is the path of the group holding the node at path.
func parentPath(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i]
	}
	return ""
}

// DeleteArrayChunks finishes the delete of the array at path after
// DeleteArrayMetadata: its chunks, then its tombstone. It returns the keys
// deleted.
func DeleteArrayChunks(ctx context.Context, s store.Store, path string, format int) ([]string, error) {
	key := store.Join(path, ZarrJSON+TombstoneSuffix)
	if format == 2 {
		key = store.Join(path, ZArray+TombstoneSuffix)
	}
	d, _, err := openTombstone(ctx, s, key)
	if err != nil {
		return nil, err
	}
	return d.Finish(ctx)
}
