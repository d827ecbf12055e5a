package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Metadata document names.
const (
	ZarrJSON  = "zarr.json"
	ZArray    = ".zarray"
	ZGroup    = ".zgroup"
	ZAttrs    = ".zattrs"
	ZMetadata = ".zmetadata"
)

// Kind tells groups from arrays.
type Kind uint8

// Node kinds.
const (
	GroupKind Kind = iota
	ArrayKind
)

// Node is a group or an array of a hierarchy.
type Node struct {
	// Path is the node's key prefix ("" for the root).
	Path string
	Kind Kind
	// Format is 2 or 3, or 0 for an implicit group: a directory without
	// metadata on the way to other nodes (tensorstore writes arrays
	// without parent groups).
	Format int
	// Array is set for arrays that opened.
	Array *Array
	// GroupV3 or GroupV2 is set for explicit groups.
	GroupV3 *meta.GroupV3
	GroupV2 *meta.GroupV2
	// Attributes are the node's user attributes (compact JSON object), nil
	// if it has none.
	Attributes json.RawMessage
	// Children are the names of child nodes, sorted.
	Children []string
	// Err is why the node cannot be used (invalid metadata, an unknown
	// codec or data type); such a node has no Array and no Children.
	Err error
}

// Name is the last element of the node's path.
func (n *Node) Name() string { return path.Base("/" + n.Path) }

// Hierarchy is the tree of nodes found in a store.
type Hierarchy struct {
	Store store.Store
	// mu guards nodes (and their Children), which Insert adds to.
	mu    sync.RWMutex
	nodes map[string]*Node
	// listDir lists the store, or the keys known from consolidated
	// metadata where the store cannot list.
	listDir func(ctx context.Context, prefix string) iter.Seq2[store.Entry, error]
	// hidden: the store cannot list and the root group has no
	// consolidated metadata (Undiscoverable).
	hidden bool
}

// Open walks the store and finds every group and array under the root.
// Nodes whose metadata is broken are kept with Err set, so one bad array
// does not hide the others. A store that cannot list is walked through
// its consolidated metadata, or else is the one node at its root.
func Open(ctx context.Context, s store.Store) (*Hierarchy, error) {
	listDir := func(ctx context.Context, prefix string) iter.Seq2[store.Entry, error] {
		return store.ListDir(ctx, s, prefix)
	}
	h := &Hierarchy{Store: s, nodes: map[string]*Node{}, listDir: listDir}
	root, err := h.visit(ctx, "")
	if errors.Is(err, store.ErrNoListing) {
		keys, consolidated, kerr := discoverKeys(ctx, s)
		if kerr != nil {
			return nil, kerr
		}
		h.nodes, h.listDir = map[string]*Node{}, keys.listDir
		root, err = h.visit(ctx, "")
		h.hidden = !consolidated && root != nil && root.Kind == GroupKind
	}
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, ErrNoNode
	}
	return h, nil
}

// ErrNoNode: the store holds no Zarr group or array.
var ErrNoNode = errors.New("no Zarr group or array found in the store")

// OpenEmpty returns the hierarchy of a store that holds nothing at all
// (an empty directory or bucket prefix): a Zarr v3 root group without
// attributes, which is not in the store (its zarr.json is the caller's to
// write). A store holding anything is refused with ErrNoNode and what it
// holds: it is not zarrfs's to make a Zarr hierarchy of.
func OpenEmpty(ctx context.Context, s store.Store) (*Hierarchy, error) {
	for e, err := range store.ListDir(ctx, s, "") {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: it is not empty (it holds %q), and zarrfs makes a new store only of an empty directory or prefix", ErrNoNode, e.Name)
	}
	root := &Node{Format: 3, GroupV3: &meta.GroupV3{}}
	return &Hierarchy{Store: s, nodes: map[string]*Node{"": root}, listDir: func(ctx context.Context, prefix string) iter.Seq2[store.Entry, error] {
		return store.ListDir(ctx, s, prefix)
	}}, nil
}

// visit returns the node at prefix, or nil when neither it nor anything
// below it is a node.
func (h *Hierarchy) visit(ctx context.Context, prefix string) (*Node, error) {
	var dirs []string
	has := map[string]bool{}
	for e, err := range h.listDir(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		if e.Dir {
			dirs = append(dirs, e.Name)
		} else {
			has[e.Name] = true
		}
	}
	n := &Node{Path: prefix}
	switch {
	case has[ZarrJSON]:
		n.Format = 3
		h.readV3(ctx, n)
	case has[ZArray]:
		n.Format, n.Kind = 2, ArrayKind
		h.readV2Array(ctx, n, has[ZAttrs])
	case has[ZGroup]:
		n.Format = 2
		h.readV2Group(ctx, n, has[ZAttrs])
	}
	if n.Kind == ArrayKind {
		h.nodes[prefix] = n
		return n, nil
	}
	if n.Err == nil {
		for _, d := range dirs {
			key := store.Join(prefix, d)
			child, err := h.visit(ctx, key)
			if errors.Is(err, store.ErrInvalidKey) {
				// A directory leading out of the store: one broken node.
				child, err = &Node{Path: key, Err: err}, nil
				h.nodes[key] = child
			}
			if err != nil {
				return nil, err
			}
			if child != nil {
				n.Children = append(n.Children, d)
			}
		}
	}
	if n.Format == 0 && len(n.Children) == 0 {
		return nil, nil
	}
	h.nodes[prefix] = n
	return n, nil
}

func (h *Hierarchy) readV3(ctx context.Context, n *Node) {
	key := store.Join(n.Path, ZarrJSON)
	b, err := ReadDocument(ctx, h.Store, key)
	if err != nil {
		n.Err = err
		return
	}
	// A broken array must stay an array (and not be walked as a group),
	// so the node type is read on its own first.
	var probe struct {
		NodeType string `json:"node_type"`
	}
	if json.Unmarshal(b, &probe) == nil && probe.NodeType == "array" {
		n.Kind = ArrayKind
	}
	doc, err := meta.ParseV3(b)
	if err != nil {
		n.Err = fmt.Errorf("%s: %w", key, err)
		return
	}
	switch doc := doc.(type) {
	case *meta.GroupV3:
		n.GroupV3, n.Attributes = doc, doc.Attributes
	case *meta.ArrayV3:
		n.Attributes = doc.Attributes
		if n.Array, err = openArrayV3(h.Store, n.Path, doc); err != nil {
			n.Array = nil
			n.Err = fmt.Errorf("%s: %w", key, err)
		}
	}
}

func (h *Hierarchy) readV2Array(ctx context.Context, n *Node, hasAttrs bool) {
	key := store.Join(n.Path, ZArray)
	fail := func(err error) { n.Err = fmt.Errorf("%s: %w", key, err) }
	b, err := ReadDocument(ctx, h.Store, key)
	if err != nil {
		fail(err)
		return
	}
	doc, err := meta.ParseZarray(b)
	if err != nil {
		fail(err)
		return
	}
	if n.Array, err = openArrayV2(h.Store, n.Path, doc); err != nil {
		n.Array = nil
		fail(err)
		return
	}
	n.Attributes, n.Err = h.readZattrs(ctx, n.Path, hasAttrs)
}

func (h *Hierarchy) readV2Group(ctx context.Context, n *Node, hasAttrs bool) {
	key := store.Join(n.Path, ZGroup)
	b, err := ReadDocument(ctx, h.Store, key)
	if err == nil {
		n.GroupV2, err = meta.ParseZgroup(b)
	}
	if err != nil {
		n.Err = fmt.Errorf("%s: %w", key, err)
		return
	}
	n.Attributes, n.Err = h.readZattrs(ctx, n.Path, hasAttrs)
}

func (h *Hierarchy) readZattrs(ctx context.Context, prefix string, exists bool) (json.RawMessage, error) {
	if !exists {
		return nil, nil
	}
	key := store.Join(prefix, ZAttrs)
	b, err := ReadDocument(ctx, h.Store, key)
	if err != nil {
		return nil, err
	}
	attrs, err := meta.ParseZattrs(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return attrs, nil
}

// Node returns the node at path ("" for the root).
func (h *Hierarchy) Node(path string) (*Node, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n, ok := h.nodes[strings.Trim(path, "/")]
	return n, ok
}

// Root is the root node.
func (h *Hierarchy) Root() *Node {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.nodes[""]
}

// Nodes returns every node, sorted by path (parents before children).
func (h *Hierarchy) Nodes() []*Node {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*Node, 0, len(h.nodes))
	for _, n := range h.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *Node) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Arrays returns every array node, sorted by path, including broken ones.
func (h *Hierarchy) Arrays() []*Node {
	var out []*Node
	for _, n := range h.Nodes() {
		if n.Kind == ArrayKind {
			out = append(out, n)
		}
	}
	return out
}
