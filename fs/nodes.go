package fs

import (
	"context"
	"io"
	"iter"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// rootNode holds both views as v3/ and v2/.
type rootNode struct {
	gofs.Inode
	b *binding
}

var (
	_ = (gofs.NodeOnAdder)((*rootNode)(nil))
	_ = (gofs.NodeLookuper)((*rootNode)(nil))
	_ = (gofs.NodeReaddirer)((*rootNode)(nil))
	_ = (gofs.NodeGetattrer)((*rootNode)(nil))
)

// Getattr: the root is a directory of the views' owner and modes, of
// their time.
func (r *rootNode) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	r.b.fillRoot(keyspace.Attr{Ino: r.StableAttr().Ino, Dir: true, Mtime: r.b.ks.Root(r.b.opts.Views[0]).Attr().Mtime}, &out.Attr)
	return 0
}

func (r *rootNode) OnAdd(ctx context.Context) {
	for _, v := range r.b.opts.Views {
		d := r.b.ks.Root(v)
		child := r.NewPersistentInode(ctx, &dirNode{b: r.b, d: d}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: d.Attr().Ino})
		r.AddChild(v.String(), child, false)
	}
}

func (r *rootNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if name == statsDirName {
		return r.b.lookupStatsDir(ctx, &r.Inode, out), 0
	}
	child := r.GetChild(name)
	if child == nil {
		return nil, syscall.ENOENT
	}
	r.b.fill(child.Operations().(*dirNode).d.Attr(), &out.Attr)
	return child, 0
}

// Readdir lists the views only: go-fuse would list every child inode,
// .zarrfs too once it was looked up (see statsDirName).
func (r *rootNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	var entries []fuse.DirEntry
	for _, v := range r.b.opts.Views {
		entries = append(entries, fuse.DirEntry{Name: v.String(), Mode: syscall.S_IFDIR, Ino: r.b.ks.Root(v).Attr().Ino})
	}
	return gofs.NewListDirStream(entries), 0
}

// dirNode is a directory of a view.
type dirNode struct {
	gofs.Inode
	b *binding
	d *keyspace.Dir
}

var (
	_ = (gofs.NodeLookuper)((*dirNode)(nil))
	_ = (gofs.NodeGetattrer)((*dirNode)(nil))
	_ = (gofs.NodeOpendirHandler)((*dirNode)(nil))
)

func (n *dirNode) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if n.d.Gone(ctx) {
		return syscall.ENOENT // deleted, or moved away, since the kernel looked it up
	}
	if n.IsRoot() {
		n.b.fillRoot(n.d.Attr(), &out.Attr)
		return 0
	}
	n.b.fill(n.d.Attr(), &out.Attr)
	return 0
}

func (n *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n.b.widenReadAhead()
	if name == statsDirName && n.IsRoot() { // a view at the mount root
		return n.b.lookupStatsDir(ctx, &n.Inode, out), 0
	}
	e, err := n.d.Lookup(ctx, name)
	if err != nil {
		return nil, n.b.errno(ctx, "lookup", n.d.Path()+"/"+name, err)
	}
	n.b.fill(e.Attr, &out.Attr)
	if keep := n.b.keepFor(e.Attr); keep > 0 {
		out.SetEntryTimeout(keep)
		out.SetAttrTimeout(keep)
	}
	var child gofs.InodeEmbedder
	var pushing *fileNode
	if e.Dir != nil {
		child = &dirNode{b: n.b, d: e.Dir}
	} else {
		if old := n.GetChild(name); old != nil {
			if fn, ok := old.Operations().(*fileNode); ok {
				// The name may stand for another file now (a temporary
				// file that became a document): the kernel's inode
				// serves it.
				fn.set(e.File)
			}
		}
		fn := newFileNode(n.b, e.File)
		if fn.preparePush(ctx, e.Attr.Size) {
			pushing = fn
		}
		child = fn
	}
	inode := n.NewInode(ctx, child, gofs.StableAttr{Mode: mode(e.Attr), Ino: e.Attr.Ino})
	if pushing != nil {
		go pushing.pushOnceKnown(&n.Inode, name)
	}
	return inode, 0
}

func (n *dirNode) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	var fuseFlags uint32
	if n.b.opts.ReadOnly {
		// The kernel may keep listings; both flags are needed.
		fuseFlags = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	return &dirStream{d: n.d, b: n.b}, fuseFlags, 0
}

// dirStream streams a listing to the kernel one entry at a time, so huge
// chunk directories never sit in memory. Offsets count entries from 1.
type dirStream struct {
	b    *binding
	d    *keyspace.Dir
	mu   sync.Mutex
	next func(context.Context) (keyspace.DirEntry, error, bool)
	stop func()
	off  uint64
}

var (
	_ = (gofs.FileReaddirenter)((*dirStream)(nil))
	_ = (gofs.FileSeekdirer)((*dirStream)(nil))
	_ = (gofs.FileReleasedirer)((*dirStream)(nil))
)

func (s *dirStream) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		s.next, s.stop = pullListing(s.d.List)
	}
	e, err, ok := s.next(ctx)
	if !ok {
		return nil, 0
	}
	if err != nil {
		return nil, s.b.errno(ctx, "readdir", s.d.Path(), err)
	}
	s.off++
	mode := uint32(syscall.S_IFREG)
	if e.Dir {
		mode = syscall.S_IFDIR
	}
	return &fuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: mode, Off: s.off}, 0
}

// Seekdir restarts the listing and skips to off; listings are
// deterministic, so the entries after off are the same.
func (s *dirStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	s.mu.Lock()
	s.reset()
	s.mu.Unlock()
	for s.off < off {
		e, errno := s.Readdirent(ctx)
		if errno != 0 || e == nil {
			return errno
		}
	}
	return 0
}

func (s *dirStream) reset() {
	if s.stop != nil {
		s.stop()
	}
	s.next, s.stop, s.off = nil, nil, 0
}

func (s *dirStream) Releasedir(ctx context.Context, _ uint32) {
	s.mu.Lock()
	s.reset()
	s.mu.Unlock()
}

// listingBatch is how many entries the listing goroutine hands over at once.
const listingBatch = 128

// pullListing runs a listing in a goroutine of its own and hands its entries
// over in batches. Not iter.Pull2: Go resumes a coroutine only on the locked
// OS thread that made it, and the READDIR requests of one listing may arrive
// on different locked threads (the queues of the io_uring transport). The
// listing outlives each READDIR request, so it runs until stop; a request
// waiting for it ends with its context (an interrupted ls), leaving the
// listing where it was.
func pullListing(list func(context.Context) iter.Seq2[keyspace.DirEntry, error]) (next func(context.Context) (keyspace.DirEntry, error, bool), stop func()) {
	type item struct {
		e   keyspace.DirEntry
		err error
	}
	batches := make(chan []item, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := ctx.Done()
	go func() {
		defer close(batches)
		var batch []item
		send := func() bool {
			select {
			case batches <- batch:
				batch = nil
				return true
			case <-done:
				return false
			}
		}
		for e, err := range list(ctx) {
			batch = append(batch, item{e, err})
			if len(batch) == listingBatch && !send() {
				return
			}
		}
		if len(batch) > 0 {
			send()
		}
	}()
	var current []item
	next = func(ctx context.Context) (keyspace.DirEntry, error, bool) {
		for len(current) == 0 {
			select {
			case batch, ok := <-batches:
				if !ok {
					return keyspace.DirEntry{}, nil, false
				}
				current = batch
			case <-ctx.Done():
				return keyspace.DirEntry{}, ctx.Err(), true
			}
		}
		it := current[0]
		current = current[1:]
		return it.e, it.err, true
	}
	return next, cancel
}

// fileNode is a metadata document, a chunk file or a temporary file.
type fileNode struct {
	gofs.Inode
	b *binding
	f atomic.Pointer[keyspace.File] // replaced when a temporary file is renamed
	// gen is the shard generation the kernel's cached pages came from;
	// writers are the handles open for writing the file.
	mu      sync.Mutex
	gen     store.Generation
	writers map[*writeHandle]bool
	// push is the content to hand to the kernel's page cache once it
	// knows the inode (see preparePush).
	push atomic.Pointer[[]byte]
}

func newFileNode(b *binding, f keyspace.File) *fileNode {
	n := &fileNode{b: b}
	n.set(f)
	return n
}

func (n *fileNode) file() keyspace.File { return *n.f.Load() }
func (n *fileNode) set(f keyspace.File) { n.f.Store(&f) }

var (
	_ = (gofs.NodeGetattrer)((*fileNode)(nil))
	_ = (gofs.NodeOpener)((*fileNode)(nil))
	_ = (gofs.NodeReader)((*fileNode)(nil))
	_ = (gofs.NodeFlusher)((*fileNode)(nil))
	_ = (gofs.NodeGetxattrer)((*fileNode)(nil))
	_ = (gofs.NodeListxattrer)((*fileNode)(nil))
	_ = (gofs.NodeIoctler)((*fileNode)(nil))
)

// preparePush takes the content the key space wants handed to the
// kernel's page cache (FUSE_NOTIFY_STORE) before the reader asks (see
// keyspace.File.PushContent), and reports whether there is some. Read-only
// mounts only: their kernel opens files without asking and keeps their
// pages (see Open). The kernel knows the inode only once it has read the
// LOOKUP reply, so the store happens after it: at the reader's first
// request on the file (Python's open() asks isatty, an IOCTL) or from
// pushOnceKnown, whichever comes first. Best effort: a READ that comes
// before it is served as always, with the same bytes.
func (n *fileNode) preparePush(ctx context.Context, size int64) bool {
	if !n.b.opts.ReadOnly {
		return false
	}
	buf, ok := n.file().PushContent(ctx, size)
	if ok {
		n.push.Store(&buf)
	}
	return ok
}

// pushOnceKnown stores the prepared content as soon as the kernel knows
// the inode: go-fuse links the node (GetChild) before it sends the reply,
// and the store fails with ENOENT until the kernel has read it.
func (n *fileNode) pushOnceKnown(parent *gofs.Inode, name string) {
	defer n.push.Store(nil) // stored, or given up: the buffer goes
	deadline := time.Now().Add(5 * time.Millisecond)
	for time.Now().Before(deadline) {
		if child := parent.GetChild(name); child != nil && child.Operations() == n {
			if n.pushNow() != syscall.ENOENT {
				return
			}
		} else if child != nil {
			return // another lookup's node won: nothing knows this one
		}
		runtime.Gosched()
	}
}

// pushNow stores the prepared content, unless it was stored already.
func (n *fileNode) pushNow() syscall.Errno {
	buf := n.push.Swap(nil)
	if buf == nil {
		return 0
	}
	errno := n.WriteCache(0, *buf)
	switch errno {
	case 0:
		n.b.st.pushed.Add(1)
		n.file().Delivered(context.Background(), 0, len(*buf))
	case syscall.ENOENT: // not yet known: try again later
		n.push.CompareAndSwap(nil, buf)
	}
	return errno
}

// Ioctl answers ENOTTY, as go-fuse does for nodes without ioctls; the
// kernel knows the inode by now, so prepared content is stored first.
func (n *fileNode) Ioctl(ctx context.Context, f gofs.FileHandle, cmd uint32, arg uint64, input []byte, output []byte) (int32, syscall.Errno) {
	n.pushNow()
	return 0, syscall.ENOTTY
}

func (n *fileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	// go-fuse hands in any open handle when the kernel names none (stat by
	// path): a handle with content not yet committed answers with its size.
	if wh, ok := fh.(*writeHandle); ok {
		if size, pending := wh.h.Pending(); pending {
			n.b.fill(keyspace.Attr{Ino: n.StableAttr().Ino, Size: size, Mtime: time.Now()}, &out.Attr)
			return 0
		}
	}
	f := n.file()
	a, err := f.Attr(ctx)
	if err != nil {
		return n.b.errno(ctx, "getattr", f.Path(), err)
	}
	n.b.fill(a, &out.Attr)
	if keep := n.b.keepFor(a); keep > 0 {
		out.SetTimeout(keep)
	}
	return 0
}

// Open answers ENOSYS on read-only mounts. The kernel then opens every
// file of the mount without asking zarrfs and keeps cached pages across
// opens: reading a cached chunk again costs no request at all, where an
// open, a flush and a release cost three round trips (4x the time for
// 64 KiB chunks). Reads come to Read without a handle, locating the chunk
// with its cached index; a shard rewritten outside the mount shows once
// the kernel's attributes expire (see Mount). Writable mounts open
// handles, which pin the shard version read at open.
func (n *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if n.b.opts.ReadOnly {
		return nil, 0, syscall.ENOSYS
	}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return n.openWrite(ctx, flags)
	}
	f := n.file()
	h, err := f.Open(ctx)
	if err != nil {
		return nil, 0, n.b.errno(ctx, "open", f.Path(), err)
	}
	// Keep the kernel's cached pages unless the shard was rewritten since
	// they were read (writes through the mount invalidate them). A read
	// handle has nothing to flush on close.
	n.mu.Lock()
	keep := n.gen == h.Generation
	n.gen = h.Generation
	n.mu.Unlock()
	fuseFlags := uint32(fuse.FOPEN_NOFLUSH)
	if keep {
		fuseFlags |= fuse.FOPEN_KEEP_CACHE
	}
	return &readHandle{b: n.b, h: h, path: f.Path()}, fuseFlags, 0
}

// Read serves the reads of files opened without a handle (see Open).
func (n *fileNode) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if r, ok := fh.(gofs.FileReader); ok {
		return r.Read(ctx, dest, off)
	}
	f := n.file()
	b, err := f.ReadShared(ctx, dest, off)
	if err != nil && err != io.EOF && len(b) == 0 {
		return nil, n.b.errno(ctx, "read", f.Path(), err)
	}
	f.Delivered(ctx, off, len(b)) // the kernel keeps what it reads (see Open)
	return fuse.ReadResultData(b), 0
}

// Flush answers ENOSYS on read-only mounts, so that the kernel stops
// sending flushes, which have nothing to do there; otherwise the handle
// flushes (write handles commit).
func (n *fileNode) Flush(ctx context.Context, fh gofs.FileHandle) syscall.Errno {
	if n.b.opts.ReadOnly {
		return syscall.ENOSYS
	}
	if fl, ok := fh.(gofs.FileFlusher); ok {
		return fl.Flush(ctx)
	}
	return 0
}

func (n *fileNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	xs, err := n.file().Xattrs(ctx)
	if err != nil {
		return 0, n.b.errno(ctx, "getxattr", n.file().Path(), err)
	}
	for _, x := range xs {
		if x.Name == attr {
			if len(dest) < len(x.Value) {
				return uint32(len(x.Value)), syscall.ERANGE
			}
			return uint32(copy(dest, x.Value)), 0
		}
	}
	return 0, syscall.ENODATA
}

func (n *fileNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	xs, err := n.file().Xattrs(ctx)
	if err != nil {
		return 0, n.b.errno(ctx, "listxattr", n.file().Path(), err)
	}
	var names []byte
	for _, x := range xs {
		names = append(append(names, x.Name...), 0)
	}
	if len(dest) < len(names) {
		return uint32(len(names)), syscall.ERANGE
	}
	return uint32(copy(dest, names)), 0
}

// readHandle reads a file opened for reading. Pass-through chunks are read
// from the shard into the request's buffer (ReadResultData): splicing the
// range (ReadResultFd) is no faster (docs/PERFORMANCE.md, "Design choices
// measured"), while it would need the shard
// file to stay open until go-fuse has sent the reply.
type readHandle struct {
	b    *binding
	h    *keyspace.Handle
	path string
}

var (
	_ = (gofs.FileReader)((*readHandle)(nil))
	_ = (gofs.FileReleaser)((*readHandle)(nil))
)

func (r *readHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	got, err := r.h.ReadAt(dest, off)
	if err != nil && err != io.EOF && got == 0 {
		return nil, r.b.errno(ctx, "read", r.path, err)
	}
	return fuse.ReadResultData(dest[:got]), 0
}

func (r *readHandle) Release(ctx context.Context) syscall.Errno {
	r.h.Close()
	return 0
}
