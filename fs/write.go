package fs

import (
	"context"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/fs/keyspace"
)

var (
	_ = (gofs.NodeCreater)((*dirNode)(nil))
	_ = (gofs.NodeUnlinker)((*dirNode)(nil))
	_ = (gofs.NodeRenamer)((*dirNode)(nil))
	_ = (gofs.NodeMkdirer)((*dirNode)(nil))
	_ = (gofs.NodeRmdirer)((*dirNode)(nil))
	_ = (gofs.NodeSetxattrer)((*dirNode)(nil))
	_ = (gofs.NodeRemovexattrer)((*dirNode)(nil))
	_ = (gofs.NodeSetxattrer)((*fileNode)(nil))
	_ = (gofs.NodeRemovexattrer)((*fileNode)(nil))
	_ = (gofs.NodeSetattrer)((*fileNode)(nil))
	_ = (gofs.NodeSetattrer)((*dirNode)(nil))
)

func (n *dirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if n.d.Gone(ctx) {
		return nil, nil, 0, syscall.ENOENT
	}
	e, h, err := n.d.Create(ctx, name, flags&syscall.O_EXCL != 0)
	if err != nil {
		return nil, nil, 0, n.b.errno(ctx, "create", n.d.Path()+"/"+name, err)
	}
	n.b.fill(e.Attr, &out.Attr)
	fn := newFileNode(n.b, e.File)
	child := n.NewInode(ctx, fn, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: e.Attr.Ino})
	if old, ok := child.Operations().(*fileNode); ok && old != fn {
		// The kernel still knows a file of this name (one replaced or
		// removed since): its node stands for the new file.
		old.set(e.File)
		fn = old
	}
	return child, fn.writing(&writeHandle{b: n.b, h: h, path: e.File.Path()}), fuse.FOPEN_DIRECT_IO, 0
}

func (n *dirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.b.errno(ctx, "unlink", n.d.Path()+"/"+name, n.d.Unlink(ctx, name))
}

func (n *dirNode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to, ok := newParent.(*dirNode)
	if !ok || flags&^unix.RENAME_NOREPLACE != 0 {
		return syscall.EXDEV
	}
	if flags&unix.RENAME_NOREPLACE != 0 {
		// mv asks for it: a rename that replaces nothing.
		if _, err := to.d.Lookup(ctx, newName); err == nil {
			return syscall.EEXIST
		}
	}
	if err := n.d.Rename(ctx, name, to.d, newName); err != nil {
		return n.b.errno(ctx, "rename", n.d.Path()+"/"+name, err)
	}
	// The renamed node now stands for what it became (a chunk or a
	// document); later lookups of the name find that directly.
	if child := n.GetChild(name); child != nil {
		if fn, ok := child.Operations().(*fileNode); ok {
			if e, err := to.d.Lookup(ctx, newName); err == nil && e.File != nil {
				fn.set(e.File)
			}
		}
	}
	return 0
}

// Mkdir makes a directory that waits for its metadata (keyspace.Dir.Mkdir).
func (n *dirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if n.d.Gone(ctx) {
		return nil, syscall.ENOENT
	}
	if errno := n.b.errno(ctx, "mkdir", n.d.Path()+"/"+name, n.d.Mkdir(ctx, name)); errno != 0 {
		return nil, errno
	}
	return n.Lookup(ctx, name, out)
}

// Setattr accepts what cp and rsync set on the directories they make
// (modes, times), which are not stored, and reports the directory as it is.
func (n *dirNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return n.Getattr(ctx, fh, out)
}

// Rmdir is implemented because go-fuse answers 0 for a node without it.
func (n *dirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.b.errno(ctx, "rmdir", n.d.Path()+"/"+name, n.d.Rmdir(ctx, name))
}

// Extended attributes are zarrfs's own, read-only: go-fuse would answer
// ENODATA to a set, where cp --preserve=xattr and rsync -X expect ENOTSUP
// from a file system that keeps none.
func (n *dirNode) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.ENOTSUP
}

func (n *dirNode) Removexattr(context.Context, string) syscall.Errno { return syscall.ENOTSUP }

func (n *fileNode) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.ENOTSUP
}

func (n *fileNode) Removexattr(context.Context, string) syscall.Errno { return syscall.ENOTSUP }

// openWrite opens a file for writing (called by fileNode.Open).
func (n *fileNode) openWrite(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	f := n.file()
	h, err := f.OpenWrite(ctx, flags&syscall.O_TRUNC != 0)
	if err != nil {
		return nil, 0, n.b.errno(ctx, opOpenWrite, f.Path(), err)
	}
	// Writes bypass the page cache: what a file holds is decided at commit.
	return n.writing(&writeHandle{b: n.b, h: h, path: f.Path()}), fuse.FOPEN_DIRECT_IO, 0
}

// writing records a handle open for writing the file until it is
// released, and returns it.
func (n *fileNode) writing(w *writeHandle) *writeHandle {
	w.node = n
	n.mu.Lock()
	if n.writers == nil {
		n.writers = map[*writeHandle]bool{}
	}
	n.writers[w] = true
	n.mu.Unlock()
	return w
}

// aWriter returns a handle open for writing the file, nil if none is.
func (n *fileNode) aWriter() gofs.FileHandle {
	n.mu.Lock()
	defer n.mu.Unlock()
	for w := range n.writers {
		return w
	}
	return nil
}

func (n *fileNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		if errno := n.truncate(ctx, fh, int64(size)); errno != 0 {
			return errno
		}
	}
	if fh == nil {
		// futimens, fchmod and fchown on a descriptor name no handle: a
		// file created and not yet closed (tar sets them before close)
		// is what its open handle holds.
		fh = n.aWriter()
	}
	// Modes, owners and times are not stored; accept them so cp -p and
	// tar work, and report the file as it is.
	return n.Getattr(ctx, fh, out)
}

// truncate resizes the content of an open write handle (ftruncate), or
// else the file itself (truncate by path).
func (n *fileNode) truncate(ctx context.Context, fh gofs.FileHandle, size int64) syscall.Errno {
	f := n.file()
	if wh, ok := fh.(*writeHandle); ok {
		return n.b.errno(ctx, opTruncate, f.Path(), wh.h.Truncate(size))
	}
	return n.b.errno(ctx, opTruncate, f.Path(), f.Truncate(ctx, size))
}

// writeHandle is a file open for writing.
type writeHandle struct {
	b    *binding
	h    *keyspace.WriteHandle
	path string
	node *fileNode // the file's node, which knows its open writers
}

var (
	_ = (gofs.FileWriter)((*writeHandle)(nil))
	_ = (gofs.FileReader)((*writeHandle)(nil))
	_ = (gofs.FileFlusher)((*writeHandle)(nil))
	_ = (gofs.FileFsyncer)((*writeHandle)(nil))
	_ = (gofs.FileReleaser)((*writeHandle)(nil))
)

// Release forgets the handle: its last descriptor was closed.
func (w *writeHandle) Release(context.Context) syscall.Errno {
	w.node.mu.Lock()
	delete(w.node.writers, w)
	w.node.mu.Unlock()
	return 0
}

func (w *writeHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, err := w.h.WriteAt(data, off)
	if err != nil {
		return 0, w.b.errno(ctx, opWrite, w.path, err)
	}
	return uint32(n), 0
}

func (w *writeHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, _ := w.h.ReadAt(dest, off)
	return fuse.ReadResultData(dest[:n]), 0
}

// Flush commits on close(2); its error is close's, so a rejected chunk
// fails the close and changes nothing.
func (w *writeHandle) Flush(ctx context.Context) syscall.Errno {
	return w.b.errno(ctx, "commit", w.path, w.h.Commit(ctx))
}

func (w *writeHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return w.b.errno(ctx, "fsync", w.path, w.h.Sync(ctx))
}

// notify invalidates what the kernel caches about a file a write changed:
// its attributes and pages, before the write returns, so the other view
// shows the new bytes (or, for an unlinked chunk, ENOENT) at once. Names
// are left alone: the kernel keeps no negative entries on a writable mount,
// and invalidating an entry waits for the kernel's directory lock, which
// another process's rename or unlink may hold while it waits for zarrfs -
// should zarrfs be killed then, both would hang until the mount is
// aborted.
//
// A file changed outside the mount has its attributes invalidated at
// once, and its pages in the background: invalidating pages waits for
// the reads under way on them, which may be waiting for the very check
// that found the change. Stale attributes are enough for the kernel to
// ask before serving the file again, and to drop its pages when the
// answer's size or modification time differs.
func (b *binding) notify(a keyspace.Alias) {
	dir := b.viewRoot(a.View)
	for part := range strings.SplitSeq(a.Dir, "/") {
		if dir == nil || part == "" {
			continue
		}
		dir = dir.GetChild(part)
	}
	if dir == nil {
		return // the kernel has not seen the directory: nothing is cached
	}
	if a.Gone {
		// Waits for the kernel's lock of the directory.
		dir.NotifyEntry(a.Name)
		return
	}
	child := dir.GetChild(a.Name)
	switch {
	case child == nil:
	case a.Outside:
		child.NotifyContent(-1, 0)
		go child.NotifyContent(0, 0)
	default:
		child.NotifyContent(0, 0)
	}
}

// viewRoot is the inode of a view's root directory; nil for a view the
// mount does not show.
func (b *binding) viewRoot(v keyspace.View) *gofs.Inode {
	if len(b.opts.Views) == 1 {
		if b.opts.Views[0] != v {
			return nil
		}
		return b.rootInode
	}
	return b.rootInode.GetChild(v.String())
}
