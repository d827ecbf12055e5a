package keyspace

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// writeArrayDoc stores a rewritten array document: a .zarray (v2 view) or
// zarr.json (v3 view) that differs from the view's in its shape (a
// resize) and, in zarr.json, its attributes. Any other difference is
// refused with ErrPermission naming the field.
func (f *FS) writeArrayDoc(ctx context.Context, vn *vnode, v View, name string, content []byte) error {
	f.meta.RLock()
	n, current, oldAttrs := vn.node, docIn(vn.docs, name), vn.node.Attributes
	f.meta.RUnlock()
	key := joinPath(n.Path, name)
	shape, attrs, err := writtenShape(v, content, current)
	if err != nil {
		// Once per reason: each refused field gets its line.
		f.logOnce(ctx, key, "metadata edit refused: "+err.Error())
		return fmt.Errorf("%s: %w", key, err)
	}
	if !slices.Equal(shape, n.Array.Shape) {
		if err := f.resizeArray(ctx, vn, shape); err != nil {
			f.logOnce(ctx, key, "resize failed", "error", err)
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	if v == V3 && !jsonEqual(orEmpty(attrs), orEmpty(withoutV2Said(oldAttrs))) {
		f.meta.RLock()
		n = vn.node // the resized one
		f.meta.RUnlock()
		return f.setAttributes(ctx, n, attrs)
	}
	return nil
}

func docIn(docs []doc, name string) []byte {
	for _, d := range docs {
		if d.name == name {
			return d.data
		}
	}
	return nil
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// writtenShape compares a written array document with the view's current
// one and returns its shape (and attributes, for zarr.json), or an
// ErrPermission naming the first other field that differs. Documents are
// compared by what they mean (a member left out means its default, as
// zarr-python 2 leaves out dimension_separator "."); members zarrfs does
// not model are not compared.
func writtenShape(v View, written, current []byte) (shape []int, attrs json.RawMessage, err error) {
	var same, shown []byte
	if v == V2 {
		w, err := meta.ParseZarray(written)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		c, err := meta.ParseZarray(current)
		if err != nil {
			return nil, nil, err
		}
		shape = w.Shape
		if sameCodecs(w, c) {
			// Another spelling of the same codecs (a Blosc AUTOSHUFFLE
			// for the shuffle it means): what the array has.
			w = w.Clone()
			w.DataType, w.Endian, w.Order, w.Filters, w.Compressor = c.DataType, c.Endian, c.Order, c.Filters, c.Compressor
		}
		if same, err = canonicalV2(w, c.Shape).Marshal(); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if shown, err = canonicalV2(c, c.Shape).Marshal(); err != nil {
			return nil, nil, err
		}
	} else {
		doc, err := meta.ParseV3(written)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		w, ok := doc.(*meta.ArrayV3)
		if !ok {
			return nil, nil, fmt.Errorf("%w: node_type: an array cannot become a group", ErrPermission)
		}
		c, err := meta.ParseV3(current)
		if err != nil {
			return nil, nil, err
		}
		cur := c.(*meta.ArrayV3)
		shape, attrs = w.Shape, w.Attributes
		if same, err = canonicalV3(w, cur.Shape).Marshal(); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if shown, err = canonicalV3(cur, cur.Shape).Marshal(); err != nil {
			return nil, nil, err
		}
	}
	if field := differingField(same, shown); field != "" {
		return nil, nil, fmt.Errorf("%w: %s differs from the array's: only the shape (resize) and attributes are writable", ErrPermission, field)
	}
	return shape, attrs, nil
}

// sameCodecs reports whether two .zarray documents describe the same
// chunk encoding: the same data type and v3 codec chain.
func sameCodecs(a, b *meta.ArrayV2) bool {
	ta, ca, err := codec.FromV2(a.DataType, a.Endian, a.Order, a.Rank(), a.Filters, a.Compressor)
	if err != nil {
		return false
	}
	tb, cb, err := codec.FromV2(b.DataType, b.Endian, b.Order, b.Rank(), b.Filters, b.Compressor)
	return err == nil && ta == tb && jsonEqual(marshalled(ca), marshalled(cb))
}

// canonicalV2 is m with the given shape, rendering every modelled member.
func canonicalV2(m *meta.ArrayV2, shape []int) *meta.ArrayV2 {
	return &meta.ArrayV2{Shape: shape, Chunks: m.Chunks, DataType: m.DataType, Endian: m.Endian, Order: m.Order,
		Compressor: m.Compressor, Filters: m.Filters, FillValue: m.FillValue, DimensionSeparator: m.DimensionSeparator}
}

// canonicalV3 is m with the given shape and no attributes, rendering
// every modelled member.
func canonicalV3(m *meta.ArrayV3, shape []int) *meta.ArrayV3 {
	return &meta.ArrayV3{Shape: shape, DataType: m.DataType, ChunkShape: m.ChunkShape, KeyEncoding: m.KeyEncoding,
		FillValue: m.FillValue, Codecs: m.Codecs, DimensionNames: m.DimensionNames}
}

// differingField names the first top-level member (sorted) whose values
// differ between two JSON objects, "" if none does.
func differingField(a, b []byte) string {
	var x, y map[string]json.RawMessage
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return "the document"
	}
	keys := slices.Sorted(maps.Keys(x))
	for k := range y {
		if _, ok := x[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !jsonEqual(x[k], y[k]) {
			return k
		}
	}
	return ""
}

// resizeArray gives an array a new shape, as zarr-python 2 does: growing
// only changes the metadata; shrinking first deletes the inner chunks
// wholly outside the new shape (through the Writer, which deletes a shard
// left empty) and publishes that, then stores the metadata. A crash in
// between leaves the old shape with those chunks empty, and repeating the
// resize finishes it. Chunks partly outside keep their data, as in
// zarr-python.
func (f *FS) resizeArray(ctx context.Context, vn *vnode, shape []int) error {
	if store.ReadOnly(f.store) {
		return ErrReadOnly
	}
	f.structure.Lock()
	defer f.structure.Unlock()
	f.meta.RLock()
	n, av := vn.node, vn.arr
	f.meta.RUnlock()
	var gone [][]int
	for c, err := range av.stored(ctx, nil) {
		if err != nil {
			return err
		}
		if outside(c, av.chunk, shape) {
			gone = append(gone, c)
		}
	}
	for _, c := range gone {
		if err := f.opts.Writer.Delete(ctx, av.a, c); err != nil {
			return err
		}
		f.chunkChanged(av.a, c, false)
	}
	// Published before the shape changes: a journal replay skips the
	// updates of shards outside the shape, which would then stay.
	if len(gone) > 0 {
		if err := f.opts.Writer.Flush(ctx); err != nil {
			return err
		}
	}
	resized, err := zarr.Resize(ctx, n.Array, shape)
	if err != nil {
		return err
	}
	return f.replaceArray(n, resized)
}

// outside reports whether the chunk at coords lies wholly outside shape.
func outside(coords, chunk, shape []int) bool {
	for d, c := range coords {
		if c*chunk[d] >= shape[d] {
			return true
		}
	}
	return false
}

// replaceArray shows a reopened array (a new shape) in every view: new
// array views and documents, swapped in under FS.meta.
func (f *FS) replaceArray(n *zarr.Node, a *zarr.Array) error {
	node := *n
	node.Array = a
	views := map[View]*arrayView{}
	for _, v := range []View{V3, V2} {
		if f.vnodes[v][n.Path] == nil {
			continue
		}
		av, err := newArrayView(f, &node, v)
		if err != nil {
			return fmt.Errorf("the resized array cannot be shown: %w", err)
		}
		views[v] = av
	}
	f.replaced.Store(true)
	f.meta.Lock()
	for v, av := range views {
		vn := f.vnodes[v][n.Path]
		vn.node, vn.arr, vn.docs = &node, av, av.docs
	}
	f.arrays[n.Path] = views
	f.staleConsolidated()
	f.meta.Unlock()
	for _, name := range []string{zarr.ZArray, zarr.ZAttrs} {
		f.notify(Alias{View: V2, Dir: n.Path, Name: name})
	}
	f.notify(Alias{View: V3, Dir: n.Path, Name: zarr.ZarrJSON})
	f.notifyConsolidated(n.Path)
	return nil
}
