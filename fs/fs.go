// Package fs binds the key spaces of package keyspace to go-fuse: one small
// node type per kind of entry (directory, file), each implementing only the
// go-fuse interfaces it needs. Filesystem semantics live in keyspace; this
// package translates calls, attributes, errors and kernel cache hints.
package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zarrfs/zarrfs/fs/fuseuring"
	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// Options configure a mount.
type Options struct {
	// Views are the key spaces to show: both (as v3/ and v2/ at the root)
	// or one (at the root).
	Views []keyspace.View
	// ReadOnly mounts refuse writes and let the kernel keep file contents
	// across opens.
	ReadOnly bool
	// AllowOther lets other users in; the kernel then checks the modes
	// and owners below (default_permissions), as for a local disk.
	AllowOther bool
	// AllowRoot lets root in besides UID: the mount is open to every user
	// to the kernel, but its root directory is 0700 to them, and the
	// kernel checks modes (default_permissions), as libfuse's allow_root
	// does in the daemon.
	AllowRoot bool
	// DefaultPermissions has the kernel check the modes of UID, GID and
	// Umask for the mounting user too (always on with AllowOther and
	// AllowRoot).
	DefaultPermissions bool
	// UID and GID own every file and directory; Umask clears permission
	// bits of 0666 (files) and 0777 (directories). Read-only mounts also
	// clear the write bits.
	UID, GID uint32
	Umask    uint32
	// FsName is the source column of the mount table.
	FsName string
	Logger *slog.Logger
	// Debug logs every FUSE request.
	Debug bool
	// StatsInterval, if set, is how often the counters of the stats file
	// (MNT/.zarrfs/stats) are logged.
	StatsInterval time.Duration
	// Transport is how requests reach the file system: TransportDevFuse
	// (the default) or TransportIOURing.
	Transport string
	// OnRequest, if set, is told the opcode of every request (LOOKUP,
	// READ, ...) and how long the file system took to answer it.
	OnRequest func(op string, d time.Duration)
	// OnBuffersResident, if set, is told how much memory outside the Go
	// heap the transport's request buffers hold, now and whenever that
	// grows (up to TransportBufferBytes); over /dev/fuse, whose buffers
	// are in the heap, it is never called.
	OnBuffersResident func(bytes int64)
}

// The transports of FUSE requests.
const (
	// TransportDevFuse reads requests from /dev/fuse and writes replies to
	// it: two system calls and a wakeup of another thread per request.
	TransportDevFuse = "dev"
	// TransportIOURing serves them from one io_uring queue per CPU (see
	// package fuseuring); the kernel must offer it.
	TransportIOURing = "io_uring"
)

// maxWrite is the largest WRITE request the kernel sends, and the block
// size files report: tools size their buffers by st_blksize (cp uses
// max(128 KiB, st_blksize)), so a chunk file of up to 1 MiB is written in
// one request, one round trip, rather than one per 128 KiB.
const maxWrite = 1 << 20

// Server is a mounted file system.
type Server struct {
	*fuse.Server
	uring *fuseuring.Transport
}

// Wait returns when the mount is gone and every request it received has
// been answered.
func (s *Server) Wait() {
	s.Server.Wait()
	if s.uring != nil {
		s.uring.Wait()
	}
}

// Mount mounts the views of ks at dir. It returns once the kernel sees the
// mount; Unmount the server (or Wait for it) when done.
func Mount(dir string, ks *keyspace.FS, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// Read-only mounts let the kernel keep names, attributes and contents
	// (see fileNode.Open) for the revalidation interval; past it, the
	// kernel asks zarrfs, which checks the shard (see keyspace's object)
	// and, when it changed outside the mount, invalidates what the kernel
	// keeps of every file of the shard (see notify). Chunk files of local
	// stores are kept longer: zarrfs checks their shards itself every
	// interval (see keepFor). Writable mounts
	// invalidate files explicitly on writes, and cache no negative
	// entries: writes do not invalidate names (see notify), so a chunk a
	// write creates would stay missing in the other view for a while.
	entryTTL, negativeTTL := ks.Revalidate(), ks.Revalidate()
	if !opts.ReadOnly {
		entryTTL, negativeTTL = time.Minute, 0
	}
	if !ks.Writable() {
		opts.ReadOnly = true
	}
	// Resolved before mounting: resolving it after would ask the mount.
	mountDir, err := ResolveDir(dir)
	if err != nil {
		return nil, err
	}
	b := &binding{ks: ks, opts: opts, mountDir: mountDir}
	ks.SetNotifier(b.notify)
	mountOpts := fuse.MountOptions{
		FsName:               opts.FsName,
		Name:                 "zarrfs",
		AllowOther:           opts.AllowOther || opts.AllowRoot,
		DirectMount:          os.Geteuid() == 0,
		MaxWrite:             maxWrite,
		MaxReadAhead:         maxReadAhead,
		MaxBackground:        64,
		IgnoreSecurityLabels: true,
		Debug:                opts.Debug,
		// O_TRUNC arrives as a flag of OPEN; without this the kernel sends
		// a SETATTR without a file handle, which cannot tell which open
		// write buffer to empty. READDIRPLUS_AUTO: a plain listing reads
		// names only (no attributes to look up: docs/PERFORMANCE.md, "Design
		// choices measured"), and the kernel switches to listing with
		// attributes when the lister stats the entries (ls -l).
		ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_READDIRPLUS_AUTO,
	}
	if opts.ReadOnly {
		mountOpts.Options = append(mountOpts.Options, "ro")
	}
	if opts.AllowOther || opts.AllowRoot || opts.DefaultPermissions {
		// Without it the kernel lets every user do anything the mount
		// allows, whatever the modes say.
		mountOpts.Options = append(mountOpts.Options, "default_permissions")
	}
	root := b.root()
	// Set before mounting: requests (and the notifications writes send)
	// start as soon as the kernel has the mount, which can be well before
	// Mount returns here on a busy machine.
	b.rootInode = root.EmbeddedInode()
	nodeOpts := &gofs.Options{
		MountOptions:    mountOpts,
		EntryTimeout:    &entryTTL,
		AttrTimeout:     &entryTTL,
		NegativeTimeout: &negativeTTL,
		RootStableAttr:  &gofs.StableAttr{Ino: 1},
	}
	raw := gofs.NewNodeFS(root, nodeOpts)
	if opts.OnRequest != nil {
		raw = &timedFS{RawFileSystem: raw, observe: opts.OnRequest}
	}
	server := &Server{}
	switch opts.Transport {
	case "", TransportDevFuse:
		server.Server, err = mountDevFuse(dir, raw, &nodeOpts.MountOptions)
	case TransportIOURing:
		server.Server, server.uring, err = fuseuring.Mount(dir, raw, mountOpts)
		if err == nil && opts.OnBuffersResident != nil {
			server.uring.OnResident(opts.OnBuffersResident)
		}
		b.st.uring.Store(server.uring)
	default:
		err = fmt.Errorf("unknown FUSE transport %q", opts.Transport)
	}
	if err != nil {
		return nil, err
	}
	if opts.StatsInterval > 0 {
		done := make(chan struct{})
		go func() {
			server.Wait()
			close(done)
		}()
		go b.logStats(opts.StatsInterval, done)
	}
	return server, nil
}

// mountDevFuse mounts raw at dir over /dev/fuse, as gofs.Mount does, and
// returns once the kernel sees the mount.
func mountDevFuse(dir string, raw fuse.RawFileSystem, opts *fuse.MountOptions) (*fuse.Server, error) {
	server, err := fuse.NewServer(raw, dir, opts)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, err
	}
	return server, nil
}

// maxReadAhead is the most the kernel reads of a file ahead of a reader,
// in one request.
const maxReadAhead = 1 << 20

// TransportBufferBytes returns the most memory the request buffers of
// transport take outside the Go heap: the io_uring queues' entries.
func TransportBufferBytes(transport string) int64 {
	if transport == TransportIOURing {
		return fuseuring.BufferBytes(maxWrite)
	}
	return 0
}

// binding is what every node of a mount shares.
type binding struct {
	ks        *keyspace.FS
	opts      Options
	rootInode *gofs.Inode
	st        statsState
	mountDir  string // resolved
	readAhead sync.Once
}

// widenReadAhead widens the mount's read-ahead (see setReadAhead) at the
// first lookup in a view's directory: by then the kernel has taken the
// INIT reply, which would narrow it again, and no chunk file or metadata
// document has been opened yet (opening one takes that lookup), so every
// one is read ahead in requests of up to maxReadAhead.
func (b *binding) widenReadAhead() {
	b.readAhead.Do(func() {
		if err := setReadAhead(b.mountDir, maxReadAhead); err != nil {
			b.opts.Logger.Debug("read-ahead stays at the kernel's default of 128 KiB", "error", err)
		}
	})
}

// root returns the root node: one view's root, or a directory holding both.
func (b *binding) root() gofs.InodeEmbedder {
	if len(b.opts.Views) == 1 {
		return &dirNode{b: b, d: b.ks.Root(b.opts.Views[0])}
	}
	return &rootNode{b: b}
}

// errno maps key space and store errors to errno values, logging the
// unexpected ones (corruption is logged once by the key space) and
// counting the errors for the stats file.
func (b *binding) errno(ctx context.Context, op, path string, err error) syscall.Errno {
	errno := b.mapError(ctx, op, path, err)
	if errno != 0 && errno != syscall.ENOENT {
		b.st.errors.add(errno)
	}
	return errno
}

func (b *binding) mapError(ctx context.Context, op, path string, err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, keyspace.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return syscall.ENOENT
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, store.ErrInvalidKey):
		b.opts.Logger.WarnContext(ctx, op+" refused", "path", path, "error", err)
		return syscall.EINVAL
	case errors.Is(err, keyspace.ErrCorrupt):
		return syscall.EIO
	case errors.Is(err, keyspace.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, keyspace.ErrPermission):
		return syscall.EPERM
	case errors.Is(err, keyspace.ErrReadOnly), errors.Is(err, store.ErrReadOnly):
		return syscall.EROFS
	case errors.Is(err, keyspace.ErrExists):
		return syscall.EEXIST
	case errors.Is(err, keyspace.ErrCrossDevice):
		return syscall.EXDEV
	case errors.Is(err, store.ErrTooLarge) && setsSize(op):
		b.opts.Logger.WarnContext(ctx, op+" refused: file too large", "path", path, "error", err)
		return syscall.EFBIG
	case errors.Is(err, store.ErrTooLarge):
		// Something stored (a value, a chunk) is larger than zarrfs reads
		// into memory; err names its key.
		b.opts.Logger.ErrorContext(ctx, op+" failed: stored value too large", "path", path, "error", err)
		return syscall.EIO
	case errors.Is(err, keyspace.ErrNoSpace):
		b.opts.Logger.WarnContext(ctx, op+" refused", "path", path, "error", err)
		return syscall.ENOSPC
	case errors.Is(err, writeback.ErrJournalLost):
		return syscall.EIO // the writer said so once
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		// The journal could not take the write: nothing was acknowledged.
		b.opts.Logger.WarnContext(ctx, op+" failed: no space for the journal", "path", path, "error", err)
		return syscall.ENOSPC
	}
	b.opts.Logger.ErrorContext(ctx, op+" failed", "path", path, "error", err)
	return syscall.EIO
}

// The operations that set a file's content or size, whose ErrTooLarge is
// the caller's (EFBIG); in any other, it is something stored (EIO).
const (
	opWrite     = "write"
	opTruncate  = "truncate"
	opOpenWrite = "open for writing"
)

func setsSize(op string) bool { return op == opWrite || op == opTruncate || op == opOpenWrite }

// fill copies key space attributes into a FUSE attribute.
// keepFor is how long the kernel may keep a file's name and attributes
// when that is not the mount's default (0): on read-only mounts, chunk
// files whose shard zarrfs checks by itself (keyspace.Attr.KeepFor).
func (b *binding) keepFor(a keyspace.Attr) time.Duration {
	if !b.opts.ReadOnly {
		return 0
	}
	return a.KeepFor
}

func (b *binding) fill(a keyspace.Attr, out *fuse.Attr) {
	out.Ino = a.Ino
	out.Size = uint64(a.Size)
	out.Blocks = (out.Size + 511) / 512
	out.Blksize = maxWrite
	out.Nlink = 1
	out.SetTimes(nil, &a.Mtime, &a.Mtime)
	mask := b.opts.Umask
	if b.opts.ReadOnly {
		mask |= 0o222
	}
	if a.Dir {
		out.Mode = syscall.S_IFDIR | 0o777&^mask
		out.Nlink = 2
	} else {
		out.Mode = syscall.S_IFREG | 0o666&^mask
	}
	out.Uid, out.Gid = b.opts.UID, b.opts.GID
}

// fillRoot is fill of the mount's root directory, which only its owner
// (and root, whom modes do not stop) may enter with AllowRoot.
func (b *binding) fillRoot(a keyspace.Attr, out *fuse.Attr) {
	b.fill(a, out)
	if b.opts.AllowRoot {
		out.Mode &^= 0o077
	}
}

func mode(a keyspace.Attr) uint32 {
	if a.Dir {
		return syscall.S_IFDIR
	}
	return syscall.S_IFREG
}
