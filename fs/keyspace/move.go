package keyspace

// Moving a group or array: mv of its directory within the mount renames
// the node in the store. A store that moves every key below a prefix at
// once (store.Renamer: a local directory, with one rename) does it, so
// readers see the node whole at one path or the other. Other stores
// (object stores) would copy and delete every key, holding a shard in
// memory at a time and showing a half-copied node: the rename fails with
// ErrCrossDevice instead, and mv copies the node through the mount (its
// copy is created as any other, chunk by chunk) and then deletes it (with
// the tombstone of a delete), so nothing is lost whenever it stops.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// ErrCrossDevice: the rename cannot be done in place (EXDEV); mv then
// copies and deletes.
var ErrCrossDevice = errors.New("cannot rename in this store")

// moveNode moves the group or array of the directory vn to newName in the
// group directory to, of the same view.
func (f *FS) moveNode(ctx context.Context, vn *vnode, to *Dir, newName string) error {
	f.meta.RLock()
	n := vn.node
	f.meta.RUnlock()
	from, dst := n.Path, joinPath(to.path, newName)
	if from == dst {
		return nil
	}
	if err := f.checkMove(ctx, n, to, newName); err != nil {
		f.logOnce(ctx, from, "move refused", "to", dst, "error", err)
		return err
	}
	renamer, ok := f.store.(store.Renamer)
	if !ok || f.holdsTemps(from) {
		f.logOnce(ctx, from, "moved by copying: the store cannot rename a node in place (or the node holds files waiting for their metadata)", "to", dst)
		return fmt.Errorf("%w: /%s", ErrCrossDevice, from)
	}
	if err := f.rename(ctx, renamer, to.view, from, dst); err != nil {
		return err
	}
	// The kernel keeps the names of the other view where they were: they
	// are dropped before the rename returns (no lock of this mount is
	// held). In the view renamed, the kernel holds the directories it
	// moves until the rename returns: the moved entry is dropped after.
	for _, v := range []View{V3, V2} {
		old := Alias{View: v, Dir: parentOf(from), Name: pathBase(from), Gone: true}
		moved := Alias{View: v, Dir: to.path, Name: newName, Gone: true}
		if v == to.view {
			go f.notify(moved)
			continue
		}
		f.notify(old)
		f.notify(moved)
	}
	return nil
}

// rename moves the node at from to dst in the store, the hierarchy and
// the views; v is the view the rename came through.
func (f *FS) rename(ctx context.Context, renamer store.Renamer, v View, from, dst string) error {
	f.structure.Lock()
	defer f.structure.Unlock()
	f.creating.Lock()
	defer f.creating.Unlock()
	if _, exists := f.h.Node(dst); exists {
		return fmt.Errorf("%w: /%s", ErrExists, dst)
	}
	// The node's updates go into its shards first: published later, they
	// would go to the keys it leaves.
	if err := f.opts.Writer.Flush(ctx); err != nil {
		return err
	}
	var keys []string
	for key, err := range store.List(ctx, f.store, from+"/") {
		if err != nil {
			return err
		}
		keys = append(keys, key)
	}
	gone, err := zarr.FinishDeletesAt(ctx, f.store, dst)
	f.shardsGone(gone)
	if err != nil {
		return fmt.Errorf("the delete of an earlier array at /%s did not finish, so nothing can move there: %w", dst, err)
	}
	if err := renamer.RenamePrefix(ctx, from, dst); err != nil {
		if errors.Is(err, store.ErrPrecondition) {
			err = fmt.Errorf("%w: the store holds %s already", ErrExists, dst)
		}
		f.logOnce(ctx, from, "move failed", "to", dst, "error", err)
		return err
	}
	if err := f.h.Move(from, dst); err != nil {
		return err // checked above: only a bug gets here
	}
	f.shardsGone(keys)
	f.moveViews(ctx, v, from, dst)
	f.opts.Logger.InfoContext(ctx, "moved", "from", from, "to", dst)
	return nil
}

// checkMove refuses a move the hierarchy cannot take: of the root, into
// something other than a group of the same format, into the node itself,
// onto a name taken or kept for the store's files, or of a node being
// deleted.
func (f *FS) checkMove(ctx context.Context, n *zarr.Node, to *Dir, newName string) error {
	from, dst := n.Path, joinPath(to.path, newName)
	f.meta.RLock()
	var err error
	switch {
	case from == "":
		err = fmt.Errorf("%w: the root cannot be moved", ErrPermission)
	case to.pending || to.node == nil || to.node.node == nil || to.node.arr != nil:
		err = fmt.Errorf("%w: /%s: a group or array moves only into a group", ErrPermission, to.path)
	case strings.HasPrefix(dst, from+"/"):
		err = fmt.Errorf("%w: /%s cannot move into itself", ErrInvalid, from)
	case store.Reserved(newName):
		err = fmt.Errorf("%w: %s: a name reserved for the store's own files", ErrPermission, dst)
	case to.node.node.Format != 0 && (to.node.node.Format == 2) != (n.Format == 2):
		err = fmt.Errorf("%w: /%s is a Zarr v%d node and /%s a group of the other format", ErrPermission, from, n.Format, to.path)
	}
	for p := range f.doomed {
		if err == nil && (p == from || strings.HasPrefix(p, from+"/")) {
			err = fmt.Errorf("%w: /%s is being deleted", ErrPermission, p)
		}
	}
	f.meta.RUnlock()
	if err != nil {
		return err
	}
	if _, err := to.Lookup(ctx, newName); err == nil {
		return fmt.Errorf("%w: /%s", ErrExists, dst)
	}
	return nil
}

// holdsTemps reports whether temporary files or pending directories lie
// below the node at p, in either view.
func (f *FS) holdsTemps(p string) bool {
	f.temps.mu.Lock()
	defer f.temps.mu.Unlock()
	for _, v := range []View{V3, V2} {
		prefix := tempKey(v, p+"/")
		for k := range f.temps.files {
			if strings.HasPrefix(k, prefix) {
				return true
			}
		}
		for k := range f.temps.dirs {
			if strings.HasPrefix(k, prefix) {
				return true
			}
		}
	}
	return false
}

// moveViews shows the nodes the hierarchy moved from below from to below
// to in both views. The directories of the old paths that the kernel
// moved with the rename, in view v, resolve to the new ones (Dir.current);
// in the other view, where the kernel holds them at the old names, they
// are gone. Names at the old paths get inode numbers of their own (inode).
func (f *FS) moveViews(ctx context.Context, v View, from, to string) {
	moved := func(p string) (string, bool) {
		if p == from || strings.HasPrefix(p, from+"/") {
			return to + p[len(from):], true
		}
		return "", false
	}
	oldParent, oldName := parentOf(from), pathBase(from)
	f.replaced.Store(true)
	f.meta.Lock()
	for _, view := range []View{V3, V2} {
		for p, vn := range f.vnodes[view] {
			np, ok := moved(p)
			if !ok {
				continue
			}
			if view == v {
				vn.movedTo = np
				if vn.arr != nil {
					vn.arr.movedTo = np
				}
			}
			delete(f.vnodes[view], p)
		}
		if parent := f.vnodes[view][oldParent]; parent != nil && parent.children[oldName] != nil {
			delete(parent.children, oldName)
			parent.names = slices.DeleteFunc(slices.Clone(parent.names), func(s string) bool { return s == oldName })
		}
	}
	for p := range f.arrays {
		if _, ok := moved(p); ok {
			delete(f.arrays, p)
		}
	}
	away := map[string]uint64{}
	if m := f.movedAway.Load(); m != nil {
		away = maps.Clone(*m)
	}
	away[from]++
	f.movedAway.Store(&away)
	f.meta.Unlock()
	f.created.Range(func(k, _ any) bool {
		if np, ok := moved(k.(string)); ok {
			f.created.Delete(k)
			f.created.Store(np, true)
		}
		return true
	})
	f.madeDirs.Range(func(k, _ any) bool {
		view, p, _ := strings.Cut(k.(string), ":")
		if np, ok := moved(p); ok {
			f.madeDirs.Delete(k)
			f.madeDirs.Store(tempKey(viewNamed(view), np), true)
		}
		return true
	})
	var nodes []*zarr.Node
	for _, n := range f.h.Nodes() { // parents first
		if n.Path == to || strings.HasPrefix(n.Path, to+"/") {
			nodes = append(nodes, n)
		}
	}
	for _, n := range nodes {
		f.addNode(ctx, &newNode{node: n})
	}
}
