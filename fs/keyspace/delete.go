package keyspace

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr"
)

// Deleting a group or array takes the steps rm -r and shutil.rmtree make:
// unlinking its metadata document (.zarray, .zgroup or zarr.json, listed
// first) dooms the node: an array's metadata leaves the store at once
// (behind a tombstone, zarr.DeleteArrayMetadata), so readers never see a
// half-deleted array; unlinking its chunk files then costs nothing, and
// rmdir of its directory deletes its shards (zarr.DeleteArrayChunks), or
// a group's metadata once its children are gone.

// unlinkDoc unlinks a metadata document; ok is false if name is none.
func (d *Dir) unlinkDoc(ctx context.Context, name string) (ok bool, err error) {
	f := d.fs
	if docIn(f.docs(d.node), name) == nil {
		return false, nil
	}
	f.meta.RLock()
	n, av := d.node.node, d.node.arr
	f.meta.RUnlock()
	switch {
	case n == nil || n.Path == "":
		return true, fmt.Errorf("%w: %s cannot be removed", ErrPermission, joinPath(d.path, name))
	case f.isDoomed(n.Path):
		return true, nil // gone with the node's metadata
	case name == zarr.ZAttrs:
		return true, f.setAttributes(ctx, n, json.RawMessage(`{}`)) // no .zattrs: no attributes
	}
	f.structure.Lock()
	defer f.structure.Unlock()
	if av != nil {
		if err := zarr.DeleteArrayMetadata(ctx, n.Array); err != nil {
			return true, err
		}
	}
	f.meta.Lock()
	f.doomed[n.Path] = true
	f.meta.Unlock()
	f.notifyDocs(n.Path)
	return true, nil
}

// recreating returns the directory a document named name written into d
// goes to. A metadata document creating a node, written into the
// directory of a node whose own document was unlinked (a writer replacing
// it: rm of the .zarray, then a new one), finishes the old node's delete
// as its rmdir would, and d becomes a pending directory in which the
// document creates the new node: written into the doomed node, it would
// be a temporary file, dropped at unmount.
func (d *Dir) recreating(ctx context.Context, name string) (*Dir, error) {
	if d.node == nil || d.node.node == nil || !createsNode(d.view, name) || !d.fs.isDoomed(d.path) {
		return d, nil
	}
	parent, ok := d.fs.dirAt(ctx, d.view, parentOf(d.path))
	if !ok {
		return nil, ErrNotFound
	}
	if err := parent.removeNode(ctx, pathBase(d.path), d.node); err != nil {
		return nil, err
	}
	if err := d.fs.temps.mkdir(d.view, d.path); err != nil {
		return nil, err
	}
	return &Dir{fs: d.fs, view: d.view, path: d.path, depth: -1, pending: true}, nil
}

// isDoomed reports whether the node at path lost its metadata document.
func (f *FS) isDoomed(path string) bool {
	f.meta.RLock()
	defer f.meta.RUnlock()
	return f.doomed[path]
}

// removeNode removes the directory of a doomed group or array: the
// array's shards (then its tombstone), or the metadata of a group whose
// children are gone. A node whose metadata document is still there, or a
// group with children, is not empty.
func (d *Dir) removeNode(ctx context.Context, name string, vn *vnode) error {
	f := d.fs
	f.structure.Lock()
	defer f.structure.Unlock()
	f.meta.RLock()
	n, children, doomed := vn.node, len(vn.names), f.doomed[vn.node.Path]
	f.meta.RUnlock()
	if !doomed || children > 0 {
		return fmt.Errorf("%w: %s is not empty", ErrExists, joinPath(d.path, name))
	}
	var err error
	if n.Array != nil {
		// Updates still pending would publish shards again.
		if err = f.opts.Writer.Flush(ctx); err == nil {
			var keys []string
			keys, err = zarr.DeleteArrayChunks(ctx, f.store, n.Path, n.Format)
			f.shardsGone(keys)
		}
	} else if n.Format != 0 {
		err = zarr.DeleteGroupMetadata(ctx, f.store, n.Path, n.Format)
	}
	if err != nil {
		f.logOnce(ctx, n.Path, "delete not finished: zarrfs check names what is left, zarrfs compact removes it", "error", err)
		return err
	}
	f.forget(n.Path)
	return nil
}

// shardsGone drops what the engine knows of deleted shards: a node
// created at the same path must not see them.
func (f *FS) shardsGone(keys []string) {
	for _, key := range keys {
		f.engine.Rewritten(key)
	}
}

// forget takes the node at path out of the hierarchy and every view.
func (f *FS) forget(path string) {
	parent, name := parentOf(path), pathBase(path)
	f.h.Remove(path)
	f.replaced.Store(true)
	// A node created at the path later starts afresh.
	f.created.Delete(path)
	f.madeDirs.Range(func(k, _ any) bool {
		if _, p, _ := strings.Cut(k.(string), ":"); strings.HasPrefix(p, path+"/") {
			f.madeDirs.Delete(k)
		}
		return true
	})
	f.meta.Lock()
	for _, v := range []View{V3, V2} {
		delete(f.vnodes[v], path)
		if p := f.vnodes[v][parent]; p != nil && p.children[name] != nil {
			delete(p.children, name)
			p.names = slices.DeleteFunc(slices.Clone(p.names), func(s string) bool { return s == name })
		}
	}
	delete(f.arrays, path)
	delete(f.doomed, path)
	f.staleConsolidated()
	f.meta.Unlock()
	for _, v := range []View{V3, V2} {
		f.notify(Alias{View: v, Dir: parent, Name: name})
	}
	f.notifyConsolidated(parent)
}

func pathBase(p string) string {
	if i := len(parentOf(p)); i > 0 {
		return p[i+1:]
	}
	return p
}

// notifyDocs tells the binding that the documents of the node at path
// changed.
func (f *FS) notifyDocs(path string) {
	for _, name := range []string{zarr.ZArray, zarr.ZGroup, zarr.ZAttrs} {
		f.notify(Alias{View: V2, Dir: path, Name: name})
	}
	f.notify(Alias{View: V3, Dir: path, Name: zarr.ZarrJSON})
	f.notifyConsolidated(path)
}

// rmdirKeys removes a chunk key directory: nothing to do (they always
// exist) once its array is doomed or it holds no chunk.
func (d *Dir) rmdirKeys(ctx context.Context, name string, keys *Dir) error {
	if d.fs.isDoomed(keys.arr.path) {
		return nil
	}
	for _, err := range keys.arr.stored(ctx, keys.prefix) {
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: %s is not empty", ErrExists, joinPath(d.path, name))
	}
	return nil
}
