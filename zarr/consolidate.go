package zarr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Consolidated is what Consolidate wrote.
type Consolidated struct {
	// Key is the document written: the root zarr.json or .zmetadata.
	Key string
	// Nodes are the paths of the nodes it describes, sorted.
	Nodes []string
	// Skipped are nodes left out, by path, with the reason.
	Skipped map[string]error
}

// Consolidate writes the metadata of every node below the root into the
// root group, so that readers of a store that cannot list (a web server)
// find the whole hierarchy from one document: for a v3 root, inline in
// its zarr.json (consolidated_metadata, as zarr-python 3 writes it); for
// a v2 root, the .zmetadata zarr-python 2 writes. Only nodes of the root's
// format are described, as readers of that format look for them there;
// nodes that failed to open are left out (Skipped), so one broken node
// cannot make the document unreadable. The document is read, changed and
// written with store.Update, so concurrent attribute writes are not lost.
func Consolidate(ctx context.Context, h *Hierarchy) (*Consolidated, error) {
	root := h.Root()
	switch {
	case root.Err != nil:
		return nil, fmt.Errorf("the root: %w", root.Err)
	case root.Kind == ArrayKind:
		return nil, errors.New("the root is an array: readers open it by its URL, there is nothing to consolidate")
	case root.Format == 0:
		return nil, errors.New("the root is an implicit group: it has no metadata document to hold consolidated metadata")
	}
	out := &Consolidated{Skipped: map[string]error{}}
	var entries meta.Entries
	for _, n := range h.Nodes() {
		switch {
		case n.Path == "":
			continue
		case n.Format == 0:
			continue // implicit: no document
		case n.Err != nil:
			out.Skipped[n.Path] = n.Err
			continue
		case n.Format != root.Format:
			out.Skipped[n.Path] = fmt.Errorf("a v%d node under a v%d root", n.Format, root.Format)
			continue
		}
		es, err := h.nodeEntries(ctx, n)
		if err != nil {
			return nil, err
		}
		entries = append(entries, es...)
		out.Nodes = append(out.Nodes, n.Path)
	}
	if root.Format == 3 {
		out.Key = ZarrJSON
		return out, store.Update(ctx, h.Store, ZarrJSON, func(cur store.Object) (store.Change, error) {
			b, err := ReadCurrentDocument(cur, ZarrJSON)
			if err != nil {
				return store.Change{}, err
			}
			doc, err := meta.ParseV3(b)
			if err != nil {
				return store.Change{}, fmt.Errorf("%s: %w", ZarrJSON, err)
			}
			g, ok := doc.(*meta.GroupV3)
			if !ok {
				return store.Change{}, fmt.Errorf("%s: no longer a group", ZarrJSON)
			}
			g.Consolidated = slices.Clip(entries)
			if g.Consolidated == nil {
				g.Consolidated = meta.Entries{} // a group without children says so
			}
			b, err = g.Marshal()
			return store.Change{Value: [][]byte{b}}, err
		})
	}
	// .zmetadata holds the root's own documents too.
	own, err := h.nodeEntries(ctx, root)
	if err != nil {
		return nil, err
	}
	c := &meta.Consolidated{Entries: append(own, entries...)}
	slices.SortFunc(c.Entries, func(a, b meta.Entry) int { return strings.Compare(a.Key, b.Key) })
	b, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	out.Key = ZMetadata
	return out, store.Update(ctx, h.Store, ZMetadata, func(store.Object) (store.Change, error) {
		return store.Change{Value: [][]byte{b}}, nil
	})
}

// nodeEntries returns the consolidated metadata entries of a node: its
// zarr.json by path (v3), or its documents by key (v2).
func (h *Hierarchy) nodeEntries(ctx context.Context, n *Node) (meta.Entries, error) {
	if n.Format == 3 {
		key := store.Join(n.Path, ZarrJSON)
		b, err := ReadDocument(ctx, h.Store, key)
		if err != nil {
			return nil, err
		}
		if n.Kind == GroupKind {
			// As zarr-python 3 writes it: a child group's own consolidated
			// metadata is an empty one; its children are in the root's.
			doc, err := meta.ParseV3(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			g, ok := doc.(*meta.GroupV3)
			if !ok {
				return nil, fmt.Errorf("%s: no longer a group", key)
			}
			g.Consolidated = meta.Entries{}
			if b, err = g.Marshal(); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
		return meta.Entries{{Key: n.Path, Doc: b}}, nil
	}
	name := ZGroup
	if n.Kind == ArrayKind {
		name = ZArray
	}
	var es meta.Entries
	for _, name := range []string{name, ZAttrs} {
		key := store.Join(n.Path, name)
		b, err := ReadDocument(ctx, h.Store, key)
		if errors.Is(err, store.ErrNotFound) && name == ZAttrs {
			continue
		}
		if err != nil {
			return nil, err
		}
		es = append(es, meta.Entry{Key: key, Doc: b})
	}
	return es, nil
}
