package zarr

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// CreateArrayV3 writes the zarr.json of a new v3 array at path and opens it.
// The document is validated (and its codec chain built) before anything is
// written.
func CreateArrayV3(ctx context.Context, s store.Store, path string, m *meta.ArrayV3) (*Array, error) {
	a, err := openArrayV3(s, path, m)
	if err != nil {
		return nil, err
	}
	doc, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	return a, store.Write(ctx, s, store.Join(path, ZarrJSON), doc)
}

// CreateArrayV2 writes the .zarray (and .zattrs when attrs is not nil) of a
// new v2 array at path and opens it.
func CreateArrayV2(ctx context.Context, s store.Store, path string, m *meta.ArrayV2, attrs json.RawMessage) (*Array, error) {
	a, err := openArrayV2(s, path, m)
	if err != nil {
		return nil, err
	}
	doc, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if err := store.Write(ctx, s, store.Join(path, ZArray), doc); err != nil {
		return nil, err
	}
	return a, putZattrs(ctx, s, path, attrs)
}

// CreateGroup writes the metadata of a group of the given format at path.
func CreateGroup(ctx context.Context, s store.Store, path string, format int, attrs json.RawMessage) error {
	switch format {
	case 3:
		g := &meta.GroupV3{}
		if err := g.SetAttributes(attrs); err != nil {
			return err
		}
		doc, err := g.Marshal()
		if err != nil {
			return err
		}
		return store.Write(ctx, s, store.Join(path, ZarrJSON), doc)
	case 2:
		doc, err := (&meta.GroupV2{}).Marshal()
		if err != nil {
			return err
		}
		if err := store.Write(ctx, s, store.Join(path, ZGroup), doc); err != nil {
			return err
		}
		return putZattrs(ctx, s, path, attrs)
	}
	return fmt.Errorf("zarr format %d: must be 2 or 3", format)
}

func putZattrs(ctx context.Context, s store.Store, path string, attrs json.RawMessage) error {
	if attrs == nil {
		return nil
	}
	doc, err := meta.MarshalZattrs(attrs)
	if err != nil {
		return err
	}
	return store.Write(ctx, s, store.Join(path, ZAttrs), doc)
}

// ShardedCodecs returns the codec chain of an array sharded into inner
// chunks of innerShape, each encoded with inner, and an index protected by
// crc32c at the end of each shard: the layout zarr-python 3 writes.
func ShardedCodecs(innerShape []int, inner []meta.Codec) []meta.Codec {
	cfg, _ := json.Marshal(map[string]any{
		"chunk_shape": slices.Clone(innerShape),
		"codecs":      inner,
		"index_codecs": []meta.Codec{
			{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)},
			{Name: "crc32c"},
		},
		"index_location": "end",
	})
	return []meta.Codec{{Name: "sharding_indexed", Configuration: cfg}}
}

// NewNode returns the node of the zarr.json doc of a group or array at
// path, not yet in the store: an array is opened (its codec chain built),
// so a document that could not be read back is refused before it is
// written.
func NewNode(s store.Store, path string, doc meta.NodeV3) (*Node, error) {
	n := &Node{Path: path, Format: 3}
	switch doc := doc.(type) {
	case *meta.GroupV3:
		n.GroupV3, n.Attributes = doc, doc.Attributes
	case *meta.ArrayV3:
		a, err := openArrayV3(s, path, doc)
		if err != nil {
			return nil, err
		}
		n.Kind, n.Array, n.Attributes = ArrayKind, a, doc.Attributes
	default:
		return nil, fmt.Errorf("%s: not a group or array", path)
	}
	return n, nil
}

// Insert adds a node just created in the store to the hierarchy, as a
// child of its parent, which must be a group of it.
func (h *Hierarchy) Insert(n *Node) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.nodes[n.Path]; ok || n.Path == "" {
		return fmt.Errorf("/%s: a node exists there", n.Path)
	}
	parentPath, name := "", n.Path
	if i := strings.LastIndexByte(n.Path, '/'); i >= 0 {
		parentPath, name = n.Path[:i], n.Path[i+1:]
	}
	parent, ok := h.nodes[parentPath]
	if !ok || parent.Kind != GroupKind {
		return fmt.Errorf("/%s: its parent is not a group", n.Path)
	}
	children := slices.Clone(parent.Children)
	i, _ := slices.BinarySearch(children, name)
	parent.Children = slices.Insert(children, i, name)
	h.nodes[n.Path] = n
	return nil
}

// Remove takes the node at path, and every node below it, out of the
// hierarchy (after a delete, or a move).
func (h *Hierarchy) Remove(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.remove(path)
}

func (h *Hierarchy) remove(path string) {
	if path == "" {
		return
	}
	for p := range h.nodes {
		if p == path || strings.HasPrefix(p, path+"/") {
			delete(h.nodes, p)
		}
	}
	parentPath, name := "", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		parentPath, name = path[:i], path[i+1:]
	}
	if parent, ok := h.nodes[parentPath]; ok {
		parent.Children = slices.DeleteFunc(slices.Clone(parent.Children), func(c string) bool { return c == name })
	}
}

// Move gives the node at from, and every node below it, the paths below
// to, after the store moved their keys there: to must be free and its
// parent a group.
func (h *Hierarchy) Move(from, to string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.nodes[from]; !ok || from == "" {
		return fmt.Errorf("/%s: no node to move", from)
	}
	if _, ok := h.nodes[to]; ok {
		return fmt.Errorf("/%s: a node exists there", to)
	}
	parentPath, name := "", to
	if i := strings.LastIndexByte(to, '/'); i >= 0 {
		parentPath, name = to[:i], to[i+1:]
	}
	parent, ok := h.nodes[parentPath]
	if !ok || parent.Kind != GroupKind || strings.HasPrefix(parentPath+"/", from+"/") {
		return fmt.Errorf("/%s: its parent is not a group", to)
	}
	moved := map[string]*Node{}
	for p, n := range h.nodes {
		if p != from && !strings.HasPrefix(p, from+"/") {
			continue
		}
		c := *n
		c.Path = to + p[len(from):]
		if n.Array != nil {
			c.Array = n.Array.At(c.Path)
		}
		moved[c.Path] = &c
	}
	h.remove(from)
	maps.Copy(h.nodes, moved)
	children := slices.Clone(parent.Children)
	i, _ := slices.BinarySearch(children, name)
	parent.Children = slices.Insert(children, i, name)
	return nil
}
