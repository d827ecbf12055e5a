package keyspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/ome"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// writeDoc stores a written metadata document. Only attributes may change:
// a v2 .zattrs, or the attributes of a v3 zarr.json that is otherwise
// exactly the document the view shows.
func (f *FS) writeDoc(ctx context.Context, vn *vnode, v View, name string, content []byte) error {
	f.meta.RLock()
	n, isArray := vn.node, vn.arr != nil
	f.meta.RUnlock()
	var attrs json.RawMessage
	switch {
	case v == V2 && name == zarr.ZAttrs:
		parsed, err := meta.ParseZattrs(content)
		if err != nil {
			f.logOnce(ctx, joinPath(n.Path, name), "metadata edit refused: not a JSON object", "error", err)
			return fmt.Errorf("%w: %s: %v", ErrInvalid, joinPath(n.Path, name), err)
		}
		f.meta.RLock() // attribute edits change the node
		attrs, err = f.fromV2Form(vn, parsed)
		f.meta.RUnlock()
		if err != nil {
			f.logOnce(ctx, joinPath(n.Path, name), "metadata edit refused", "error", err)
			return fmt.Errorf("%w: %s: %v", ErrInvalid, joinPath(n.Path, name), err)
		}
		if names, rest, ok := f.createdDimensions(n, attrs); ok {
			return f.setDimensionNames(ctx, n, names, rest)
		}
	case isArray && (v == V2 && name == zarr.ZArray || v == V3 && name == zarr.ZarrJSON):
		return f.writeArrayDoc(ctx, vn, v, name, content)
	case v == V3 && name == zarr.ZarrJSON:
		var err error
		if attrs, err = f.v3Attributes(vn, content); err != nil {
			f.logOnce(ctx, joinPath(n.Path, name), "metadata edit refused", "error", err)
			return err
		}
	case v == V2 && name == zarr.ZMetadata:
		return f.acceptConsolidated(ctx, joinPath(n.Path, name), content)
	case v == V2 && name == zarr.ZGroup && !isArray:
		// The one .zgroup there is: written again (rsync, tar), it says
		// nothing new.
		if _, err := meta.ParseZgroup(content); err != nil {
			f.logOnce(ctx, joinPath(n.Path, name), "metadata edit refused: not a .zgroup", "error", err)
			return fmt.Errorf("%w: %s: %v", ErrInvalid, joinPath(n.Path, name), err)
		}
		return nil
	default:
		f.logOnce(ctx, joinPath(n.Path, name), "metadata edit refused: only attributes are writable")
		return fmt.Errorf("%w: %s is not writable", ErrPermission, joinPath(n.Path, name))
	}
	return f.setAttributes(ctx, n, attrs)
}

// v3Attributes checks that a written zarr.json differs from the view's
// document in its attributes only, and returns them.
func (f *FS) v3Attributes(vn *vnode, content []byte) (json.RawMessage, error) {
	doc, err := meta.ParseV3(content)
	if err != nil {
		return nil, fmt.Errorf("%w: zarr.json: %v", ErrInvalid, err)
	}
	var attrs json.RawMessage
	switch d := doc.(type) {
	case *meta.ArrayV3:
		attrs = d.Attributes
	case *meta.GroupV3:
		attrs = d.Attributes
	}
	// The written document with the view's attributes must be the view's.
	current := f.docOf(vn, zarr.ZarrJSON)
	var shown map[string]json.RawMessage
	if err := json.Unmarshal(current, &shown); err != nil {
		return nil, err
	}
	if err := doc.SetAttributes(shown["attributes"]); err != nil {
		return nil, err
	}
	same, err := doc.Marshal()
	if err != nil {
		return nil, fmt.Errorf("%w: zarr.json: %v", ErrInvalid, err)
	}
	if !jsonEqual(same, current) {
		return nil, fmt.Errorf("%w: zarr.json: only attributes are writable; other fields differ from the array's", ErrPermission)
	}
	return attrs, nil
}

func (f *FS) docOf(vn *vnode, name string) []byte {
	for _, d := range f.docs(vn) {
		if d.name == name {
			return d.data
		}
	}
	return nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// fromV2Form returns the attributes to store for a .zattrs written to the
// v2 view: without the _ARRAY_DIMENSIONS the view derives for a v3 array
// (so they are not copied into its attributes), and with OME-Zarr
// metadata the view shows in the 0.4 form mapped back to 0.5.
func (f *FS) fromV2Form(vn *vnode, attrs json.RawMessage) (json.RawMessage, error) {
	n := vn.node
	if _, translated := f.v2Form(n); translated {
		return ome.FromV04(withoutDerived(vn, attrs), n.Attributes)
	}
	return withoutDerived(vn, attrs), nil
}

// withoutDerived drops the _ARRAY_DIMENSIONS the v2 view adds to a v3
// array's attributes.
func withoutDerived(vn *vnode, attrs json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	if vn.arr == nil || json.Unmarshal(attrs, &fields) != nil {
		return attrs
	}
	derived, err := vn.arr.fs.v2Attributes(&zarr.Node{Array: vn.node.Array}, vn.arr.dims)
	var d map[string]json.RawMessage
	if err != nil || json.Unmarshal(derived, &d) != nil || d["_ARRAY_DIMENSIONS"] == nil {
		return attrs
	}
	if jsonEqual(fields["_ARRAY_DIMENSIONS"], d["_ARRAY_DIMENSIONS"]) {
		if _, own := jsonFields(vn.node.Attributes)["_ARRAY_DIMENSIONS"]; !own {
			delete(fields, "_ARRAY_DIMENSIONS")
		}
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return attrs
	}
	return out
}

func jsonFields(b json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	json.Unmarshal(b, &m)
	return m
}

// setAttributes stores a node's new attributes (with store.Update, so
// concurrent writers elsewhere lose nothing else of the document) and regenerates the views' documents.
func (f *FS) setAttributes(ctx context.Context, n *zarr.Node, attrs json.RawMessage) error {
	if store.ReadOnly(f.store) {
		return ErrReadOnly
	}
	if err := f.storeRoot(ctx); err != nil {
		return err
	}
	var err error
	switch n.Format {
	case 3:
		err = store.Update(ctx, f.store, store.Join(n.Path, zarr.ZarrJSON), func(cur store.Object) (store.Change, error) {
			b, err := zarr.ReadCurrentDocument(cur, store.Join(n.Path, zarr.ZarrJSON))
			if err != nil {
				return store.Change{}, err
			}
			doc, err := meta.ParseV3(b)
			if err != nil {
				return store.Change{}, err
			}
			if a, ok := doc.(*meta.ArrayV3); ok {
				attrs = keepV2Said(a.Attributes, attrs)
			}
			if err := doc.SetAttributes(attrs); err != nil {
				return store.Change{}, err
			}
			out, err := doc.Marshal()
			return store.Change{Value: [][]byte{out}}, err
		})
	case 2:
		var b []byte
		if b, err = meta.MarshalZattrs(attrs); err == nil {
			err = store.Write(ctx, f.store, store.Join(n.Path, zarr.ZAttrs), b)
		}
	default:
		err = fmt.Errorf("%w: /%s is an implicit group: it has no metadata document to hold attributes", ErrPermission, n.Path)
	}
	if err != nil {
		return err
	}
	if err := f.applyAttributes(n, attrs); err != nil {
		return err
	}
	f.notify(Alias{View: V3, Dir: n.Path, Name: zarr.ZarrJSON})
	f.notify(Alias{View: V2, Dir: n.Path, Name: zarr.ZAttrs})
	f.notifyConsolidated(n.Path)
	return nil
}

// applyAttributes updates the in-memory node and rebuilds the documents
// that show its attributes in both views.
func (f *FS) applyAttributes(n *zarr.Node, attrs json.RawMessage) error {
	f.meta.Lock()
	defer f.meta.Unlock()
	if bytes.Equal(attrs, []byte("{}")) && n.Attributes == nil {
		attrs = nil
	}
	n.Attributes = attrs
	if n.GroupV3 != nil {
		n.GroupV3.SetAttributes(attrs)
	}
	if n.Array != nil && n.Array.V3 != nil {
		n.Array.V3.SetAttributes(attrs)
	}
	var errs []error
	for _, v := range []View{V3, V2} {
		vn := f.vnodes[v][n.Path]
		if vn == nil {
			continue
		}
		docs, err := f.nodeDocs(n, v, vn.arr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		vn.docs = docs
	}
	f.staleConsolidated()
	return errors.Join(errs...)
}

// nodeDocs returns the metadata documents of a node's directory in a view.
func (f *FS) nodeDocs(n *zarr.Node, v View, av *arrayView) ([]doc, error) {
	switch {
	case av == nil:
		return f.groupDocs(n, v)
	case v == V3:
		return v3ArrayDocs(n, av.chunk, av.chain)
	}
	attrs, err := f.v2Attributes(n, av.dims)
	if err != nil {
		return nil, err
	}
	docs := []doc{}
	for _, d := range av.docs {
		if d.name != zarr.ZAttrs {
			docs = append(docs, d)
		}
	}
	return append(docs, doc{zarr.ZAttrs, attrs}), nil
}
