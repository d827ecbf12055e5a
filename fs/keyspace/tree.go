package keyspace

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
)

// vnode is a group or array directory of a view.
type vnode struct {
	node     *zarr.Node
	children map[string]*vnode
	names    []string   // children, sorted
	docs     []doc      // guarded by FS.meta: attribute writes replace them
	arr      *arrayView // arrays only
	// zmeta is the group's .zmetadata in the v2 view (consolidatedDoc).
	zmeta atomic.Pointer[consolidatedCache]
	// movedTo is the node's path once it was moved (guarded by FS.meta).
	movedTo string
}

// buildView translates the hierarchy for a view. Nodes the view cannot
// show are left out, with one log line each.
func (f *FS) buildView(v View) *Dir {
	ctx := context.Background()
	nodes := map[string]*vnode{}
	for _, n := range f.h.Nodes() {
		if n.Err != nil {
			f.logOnce(ctx, n.Path, "node left out of both views", "error", n.Err)
			continue
		}
		vn, err := f.newVnode(n, v)
		if err != nil {
			f.logOnce(ctx, n.Path, "node left out of the "+v.String()+" view", "error", err)
			continue
		}
		f.addArrayView(vn)
		nodes[n.Path] = vn
	}
	for _, n := range f.h.Nodes() {
		vn, ok := nodes[n.Path]
		if !ok {
			continue
		}
		for _, c := range n.Children {
			if child, ok := nodes[joinPath(n.Path, c)]; ok {
				vn.children[c] = child
				vn.names = append(vn.names, c)
			}
		}
	}
	f.vnodes[v] = nodes
	root := nodes[""]
	if root == nil {
		root = &vnode{children: map[string]*vnode{}}
	}
	return &Dir{fs: f, view: v, node: root, depth: -1}
}

// newVnode translates a node for a view; an error says why the view
// cannot show it.
func (f *FS) newVnode(n *zarr.Node, v View) (*vnode, error) {
	vn := &vnode{node: n, children: map[string]*vnode{}}
	var err error
	if n.Array != nil {
		vn.arr, err = newArrayView(f, n, v)
		if err == nil {
			vn.docs = vn.arr.docs
		}
	} else {
		vn.docs, err = f.groupDocs(n, v)
	}
	return vn, err
}

// addArrayView records how a view shows an array node (FS.arrays);
// callers hold FS.meta or own the views.
func (f *FS) addArrayView(vn *vnode) {
	if vn.arr == nil {
		return
	}
	if f.arrays[vn.node.Path] == nil {
		f.arrays[vn.node.Path] = map[View]*arrayView{}
	}
	f.arrays[vn.node.Path][vn.arr.view] = vn.arr
}

// groupDocs returns the metadata files of a group directory.
func (f *FS) groupDocs(n *zarr.Node, v View) ([]doc, error) {
	if v == V3 {
		g := &meta.GroupV3{Attributes: n.Attributes}
		if n.GroupV3 != nil {
			// The inline consolidated metadata describes the stored (sharded)
			// arrays, not the view: readers that trust it would be misled.
			copied := *n.GroupV3
			copied.Consolidated = nil
			g = &copied
		}
		b, err := g.Marshal()
		return []doc{{zarr.ZarrJSON, b}}, err
	}
	zgroup, err := (&meta.GroupV2{}).Marshal()
	if err != nil {
		return nil, err
	}
	attrs, err := f.v2Attributes(n, nil)
	// The .zmetadata is made when read (consolidatedDoc).
	return []doc{{zarr.ZGroup, zgroup}, {zarr.ZAttrs, attrs}, {zarr.ZMetadata, nil}}, err
}

// consolidatedDoc returns the .zmetadata of a group of the v2 view: every
// group has one, consolidating the documents of the tree below it, as
// zarr.consolidate_metadata writes it there, so readers that require one
// (xarray's consolidated=True, zarr.open_consolidated) find it wherever a
// consolidating writer left one, also after a remount. It is made when
// read and kept until the hierarchy next changes (staleConsolidated):
// every change would otherwise rebuild the .zmetadata of each group above
// it, the whole hierarchy's for the root.
func (f *FS) consolidatedDoc(ctx context.Context, vn *vnode) ([]byte, error) {
	f.meta.RLock()
	defer f.meta.RUnlock()
	if c := vn.zmeta.Load(); c != nil && c.gen == f.metaGen {
		return c.data, c.err
	}
	data, err := consolidated(vn)
	if err != nil {
		f.logOnce(ctx, vn.node.Path, "no .zmetadata in the v2 view", "error", err)
	}
	vn.zmeta.Store(&consolidatedCache{gen: f.metaGen, data: data, err: err})
	return data, err
}

// consolidatedCache is a .zmetadata made at generation gen of the
// hierarchy.
type consolidatedCache struct {
	gen  uint64
	data []byte
	err  error
}

// staleConsolidated marks every .zmetadata out of date; FS.meta is held.
func (f *FS) staleConsolidated() { f.metaGen++ }

// notifyConsolidated tells the binding that the .zmetadata of the group
// at p and of every group above it changed.
func (f *FS) notifyConsolidated(p string) {
	for {
		f.notify(Alias{View: V2, Dir: p, Name: zarr.ZMetadata})
		if p == "" {
			return
		}
		p = parentOf(p)
	}
}

// consolidated builds the .zmetadata of the v2 view from the documents of
// the tree below root (callers hold FS.meta or own the tree).
func consolidated(root *vnode) ([]byte, error) {
	c := &meta.Consolidated{}
	var walk func(path string, vn *vnode)
	walk = func(path string, vn *vnode) {
		for _, d := range vn.docs {
			if d.name != zarr.ZMetadata {
				c.Entries = append(c.Entries, meta.Entry{Key: joinPath(path, d.name), Doc: json.RawMessage(d.data)})
			}
		}
		for _, name := range vn.names {
			walk(joinPath(path, name), vn.children[name])
		}
	}
	walk("", root)
	return c.Marshal()
}

// arrayOf returns how the view shows an array node now (a resize replaces
// it), nil for groups.
func (f *FS) arrayOf(vn *vnode) *arrayView {
	f.meta.RLock()
	defer f.meta.RUnlock()
	return vn.arr
}

// docs returns a directory's metadata documents.
func (f *FS) docs(vn *vnode) []doc {
	f.meta.RLock()
	defer f.meta.RUnlock()
	if vn.node != nil && f.doomed[vn.node.Path] {
		// Without the document that made it a node; the others stay for
		// rm -r to unlink.
		return slices.DeleteFunc(slices.Clone(vn.docs), func(d doc) bool {
			return d.name == zarr.ZArray || d.name == zarr.ZGroup || d.name == zarr.ZarrJSON
		})
	}
	return vn.docs
}

// Dir is a directory of a view: a group or array, or a directory of chunk
// keys (c/, c/1/ ... in the v3 view; 1/, 1/2/ with a "/" separator).
type Dir struct {
	fs   *FS
	view View
	path string
	node *vnode // group and array directories
	arr  *arrayView
	// depth is the number of chunk coordinates fixed by a chunk key
	// directory (prefix), -1 for group and array directories.
	depth  int
	prefix []int
	// pending: a directory made in the view that waits for its metadata
	// (create.go).
	pending bool
	// gone: the directory is no longer there (Dir.current).
	gone bool
}

// Path is the directory's path within its view ("" for the root).
func (d *Dir) Path() string { return d.path }

// Attr describes the directory.
func (d *Dir) Attr() Attr {
	ino := d.fs.inode(d.view, d.path)
	if d.path == "" {
		ino = d.fs.inode(d.view, "/")
	}
	return Attr{Ino: ino, Dir: true, Mtime: d.fs.mtime}
}

// DirEntry is a name in a listing.
type DirEntry struct {
	Name string
	Ino  uint64
	Dir  bool
}

// chunkRoot returns the chunk key layout of an array directory: whether
// keys are flat file names in it, and the name of the directory holding
// nested keys ("c" for the default encoding, "" when the array directory
// itself holds the first coordinate).
func (av *arrayView) nested() (nested bool, root string) {
	if av.keys.Separator != "/" || len(av.grid) == 0 {
		return false, ""
	}
	if av.keys.Name == meta.KeyEncodingDefault {
		return true, "c"
	}
	return true, ""
}

// Lookup resolves a name in the directory.
func (d *Dir) Lookup(ctx context.Context, name string) (Entry, error) {
	d = d.current(ctx)
	path := joinPath(d.path, name)
	if t := d.fs.temps.get(d.view, path); t != nil {
		f := &Temp{place: place{fs: d.fs, view: d.view, path: path}, data: t}
		return Entry{Name: name, File: f, Attr: f.attr()}, nil
	}
	if d.fs.temps.isDir(d.view, path) {
		return d.dirEntry(name, &Dir{fs: d.fs, view: d.view, path: path, depth: -1, pending: true}), nil
	}
	if d.pending {
		return Entry{}, ErrNotFound
	}
	if d.node != nil {
		for _, doc := range d.fs.docs(d.node) {
			if doc.name == name && !d.fs.hiddenDoc(d.view, d.node, doc) {
				f := &Document{place: place{fs: d.fs, view: d.view, path: path}, node: d.node, name: name}
				return Entry{Name: name, File: f, Attr: f.attr()}, nil
			}
		}
		d.fs.meta.RLock()
		c, ok := d.node.children[name]
		d.fs.meta.RUnlock()
		if ok {
			return d.dirEntry(name, &Dir{fs: d.fs, view: d.view, path: path, node: c, arr: d.fs.arrayOf(c), depth: -1}), nil
		}
		av := d.fs.arrayOf(d.node)
		if av == nil {
			return Entry{}, ErrNotFound
		}
		nested, root := av.nested()
		switch {
		case !nested:
			coords, ok := av.keys.Parse(name, len(av.grid))
			if !ok {
				return Entry{}, ErrNotFound
			}
			return d.chunkFile(ctx, name, path, av, coords)
		case root != "":
			if name != root || d.fs.unmade(ctx, av, path, nil) {
				return Entry{}, ErrNotFound
			}
			return d.dirEntry(name, &Dir{fs: d.fs, view: d.view, path: path, arr: av, depth: 0}), nil
		}
		// The array directory holds the first coordinate of "/" keys.
		return (&Dir{fs: d.fs, view: d.view, path: d.path, arr: av, depth: 0}).lookupCoordinate(ctx, name, path)
	}
	return d.lookupCoordinate(ctx, name, path)
}

// lookupCoordinate resolves a name in a chunk key directory: the next
// coordinate, a directory or (for the last axis) a chunk file.
func (d *Dir) lookupCoordinate(ctx context.Context, name, path string) (Entry, error) {
	av := d.arr
	c, err := parseCoordinate(name, av.grid[d.depth])
	if err != nil {
		return Entry{}, err
	}
	coords := append(slices.Clone(d.prefix), c)
	if len(coords) == len(av.grid) {
		return d.chunkFile(ctx, name, path, av, coords)
	}
	if d.fs.unmade(ctx, av, path, coords) {
		return Entry{}, ErrNotFound
	}
	return d.dirEntry(name, &Dir{fs: d.fs, view: d.view, path: path, arr: av, depth: d.depth + 1, prefix: coords}), nil
}

// parseCoordinate reads a chunk coordinate below limit, written exactly as
// keys write it (no sign, no leading zeros).
func parseCoordinate(name string, limit int) (int, error) {
	c, err := strconv.Atoi(name)
	if err != nil || c < 0 || c >= limit || strconv.Itoa(c) != name {
		return 0, ErrNotFound
	}
	return c, nil
}

func (d *Dir) dirEntry(name string, child *Dir) Entry {
	return Entry{Name: name, Dir: child, Attr: child.Attr()}
}

// chunkFile returns the entry of a chunk file, or ErrNotFound if the chunk
// is empty.
func (d *Dir) chunkFile(ctx context.Context, name, path string, av *arrayView, coords []int) (Entry, error) {
	f := &Chunk{place: place{fs: d.fs, view: d.view, path: path}, arr: av, coords: coords}
	attr, err := f.Attr(ctx)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Name: name, File: f, Attr: attr}, nil
}

// List streams the directory's entries: metadata files, child nodes, then
// chunks (or chunk key directories) as the shard indexes list them.
func (d *Dir) List(ctx context.Context) iter.Seq2[DirEntry, error] {
	return func(yield func(DirEntry, error) bool) {
		d := d.current(ctx)
		entry := func(name string, dir bool) DirEntry {
			return DirEntry{Name: name, Dir: dir, Ino: d.fs.inode(d.view, joinPath(d.path, name))}
		}
		for _, name := range d.fs.temps.in(d.view, d.path) {
			if !yield(entry(name, false), nil) {
				return
			}
		}
		for _, name := range d.fs.temps.dirsIn(d.view, d.path) {
			if !yield(entry(name, true), nil) {
				return
			}
		}
		if d.pending {
			return
		}
		if d.node != nil {
			for _, doc := range d.fs.docs(d.node) {
				if d.fs.hiddenDoc(d.view, d.node, doc) {
					continue
				}
				if !yield(entry(doc.name, false), nil) {
					return
				}
			}
			d.fs.meta.RLock()
			names := d.node.names // forget replaces it
			d.fs.meta.RUnlock()
			for _, name := range names {
				if !yield(entry(name, true), nil) {
					return
				}
			}
			av := d.fs.arrayOf(d.node)
			if av == nil {
				return
			}
			nested, root := av.nested()
			switch {
			case !nested:
				for c, err := range av.stored(ctx, nil) {
					if err != nil {
						yield(DirEntry{}, err)
						return
					}
					if !yield(entry(av.keys.Key(c), false), nil) {
						return
					}
				}
				return
			case root != "":
				for _, err := range av.stored(ctx, nil) {
					if err != nil {
						yield(DirEntry{}, err)
					} else {
						yield(entry(root, true), nil)
					}
					return // one stored chunk is enough to show the directory
				}
				return
			}
			d = &Dir{fs: d.fs, view: d.view, path: d.path, arr: av, depth: 0}
		}
		d.listCoordinates(ctx, entry, yield)
	}
}

// listCoordinates lists a chunk key directory: the distinct next
// coordinates of stored chunks below it.
func (d *Dir) listCoordinates(ctx context.Context, entry func(string, bool) DirEntry, yield func(DirEntry, error) bool) {
	av := d.arr
	last := d.depth == len(av.grid)-1
	var seen map[int]bool
	if !last {
		seen = map[int]bool{}
	}
	for c, err := range av.stored(ctx, d.prefix) {
		if err != nil {
			yield(DirEntry{}, err)
			return
		}
		v := c[d.depth]
		if last {
			if !yield(entry(strconv.Itoa(v), false), nil) {
				return
			}
		} else {
			seen[v] = true
		}
	}
	values := make([]int, 0, len(seen))
	for v := range seen {
		values = append(values, v)
	}
	slices.Sort(values)
	for _, v := range values {
		if !yield(entry(strconv.Itoa(v), true), nil) {
			return
		}
	}
}

// String names the directory for logs.
func (d *Dir) String() string { return fmt.Sprintf("%s:/%s", d.view, d.path) }
