package fs

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/fs/fuseuring"
	"github.com/zarrfs/zarrfs/fs/keyspace"
)

// The counters are the file MNT/.zarrfs/stats. The directory is no part
// of any view and never listed, before or after a lookup: it answers
// lookups at the mount root (next to v3/ and v2/, or in the one view
// shown there), so that find, cp -r and readers walking the mount never
// meet it and every listing of the mount is the same.
const (
	statsDirName  = ".zarrfs"
	statsFileName = "stats"
	statsDirIno   = 2 // chunk inodes are hashes, practically never this small
	statsFileIno  = 3
)

// stats is what the stats file shows and --stats-interval logs.
type stats struct {
	keyspace.Stats
	// Errors counts the operations that failed, by errno; ENOENT, the
	// answer for every empty chunk, is no error.
	Errors map[string]uint64 `json:"errors"`
	// Pushed counts chunk files whose content was handed to the kernel's
	// page cache right after their lookup (see fileNode.preparePush).
	Pushed uint64 `json:"pushed"`
	// URingRequests counts the requests served over io_uring (see
	// TransportIOURing).
	URingRequests uint64 `json:"uring_requests,omitempty"`
	// URingPeakInFlight is the most requests one io_uring queue has
	// served at once.
	URingPeakInFlight int `json:"uring_peak_in_flight,omitempty"`
	// URingQueueFull counts the requests that took the last free entry
	// of their io_uring queue.
	URingQueueFull uint64 `json:"uring_queue_full,omitempty"`
}

// statsState is what a binding keeps for its statistics.
type statsState struct {
	errors  errorCounts
	pushed  atomic.Uint64
	uring   atomic.Pointer[fuseuring.Transport] // nil over /dev/fuse
	dirOnce sync.Once
	dir     *gofs.Inode // .zarrfs
}

// errorCounts counts the errors a binding returns, by errno.
type errorCounts struct {
	m sync.Map // syscall.Errno -> *atomic.Uint64
}

func (e *errorCounts) add(errno syscall.Errno) {
	c, _ := e.m.LoadOrStore(errno, new(atomic.Uint64))
	c.(*atomic.Uint64).Add(1)
}

func (e *errorCounts) snapshot() map[string]uint64 {
	out := map[string]uint64{}
	e.m.Range(func(k, v any) bool {
		out[unix.ErrnoName(k.(syscall.Errno))] = v.(*atomic.Uint64).Load()
		return true
	})
	return out
}

func (b *binding) stats() stats {
	s := stats{Stats: b.ks.Stats(), Errors: b.st.errors.snapshot(), Pushed: b.st.pushed.Load()}
	if t := b.st.uring.Load(); t != nil {
		s.URingRequests, s.URingPeakInFlight, s.URingQueueFull = t.Requests(), t.PeakInFlight(), t.QueueFull()
	}
	return s
}

func (b *binding) statsJSON() []byte {
	data, _ := json.MarshalIndent(b.stats(), "", "  ") // plain counters always marshal
	return append(data, '\n')
}

// logStats logs the counters every interval until done is closed, one line
// each with the same names as the stats file (cache.hits=...).
func (b *binding) logStats(interval time.Duration, done <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			var tree map[string]any
			if json.Unmarshal(b.statsJSON(), &tree) == nil {
				b.opts.Logger.Info("stats", flatten("", tree)...)
			}
		}
	}
}

// flatten turns nested JSON objects into log attributes with dotted keys,
// in key order.
func flatten(prefix string, tree map[string]any) []any {
	var attrs []any
	for _, k := range slices.Sorted(maps.Keys(tree)) {
		if sub, ok := tree[k].(map[string]any); ok {
			attrs = append(attrs, flatten(prefix+k+".", sub)...)
		} else {
			attrs = append(attrs, slog.Any(prefix+k, tree[k]))
		}
	}
	return attrs
}

// lookupStatsDir answers a lookup of .zarrfs in the mount root with its
// inode, made on first use.
func (b *binding) lookupStatsDir(ctx context.Context, root *gofs.Inode, out *fuse.EntryOut) *gofs.Inode {
	b.st.dirOnce.Do(func() {
		b.st.dir = root.NewPersistentInode(ctx, &statsDir{b: b}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: statsDirIno})
	})
	b.fill(statsDirAttr(), &out.Attr)
	return b.st.dir
}

// statsDir is MNT/.zarrfs.
type statsDir struct {
	gofs.Inode
	b *binding
}

var (
	_ = (gofs.NodeOnAdder)((*statsDir)(nil))
	_ = (gofs.NodeLookuper)((*statsDir)(nil))
	_ = (gofs.NodeGetattrer)((*statsDir)(nil))
)

func (d *statsDir) OnAdd(ctx context.Context) {
	d.AddChild(statsFileName, d.NewPersistentInode(ctx, &statsFile{b: d.b}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: statsFileIno}), false)
}

func statsDirAttr() keyspace.Attr {
	return keyspace.Attr{Ino: statsDirIno, Dir: true, Mtime: time.Now()}
}

func (d *statsDir) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.b.fill(statsDirAttr(), &out.Attr)
	return 0
}

func (d *statsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	child := d.GetChild(name)
	if child == nil {
		return nil, syscall.ENOENT
	}
	f := child.Operations().(*statsFile)
	f.fill(f.take(), &out.Attr)
	out.SetAttrTimeout(time.Nanosecond) // see statsFile
	return child, 0
}

// statsFile is MNT/.zarrfs/stats, the counters as JSON. The kernel may not
// open it (read-only mounts open without asking, see fileNode.Open), so
// its content is a snapshot taken whenever its attributes are asked for:
// they never stay valid, so the kernel asks again before every read and,
// seeing a new modification time, drops the pages it cached. Reads serve
// the latest snapshot, so that size and content agree.
type statsFile struct {
	gofs.Inode
	b        *binding
	mu       sync.Mutex
	snapshot []byte
}

var (
	_ = (gofs.NodeGetattrer)((*statsFile)(nil))
	_ = (gofs.NodeOpener)((*statsFile)(nil))
	_ = (gofs.NodeReader)((*statsFile)(nil))
)

func (f *statsFile) take() []byte {
	data := f.b.statsJSON()
	f.mu.Lock()
	f.snapshot = data
	f.mu.Unlock()
	return data
}

func (f *statsFile) fill(data []byte, out *fuse.Attr) {
	f.b.fill(keyspace.Attr{Ino: statsFileIno, Size: int64(len(data)), Mtime: time.Now()}, out)
}

func (f *statsFile) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fill(f.take(), &out.Attr)
	out.SetTimeout(time.Nanosecond)
	return 0
}

// Open takes a snapshot for the reads of this open, which go past the page
// cache.
func (f *statsFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EACCES
	}
	f.take()
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (f *statsFile) Read(ctx context.Context, _ gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.mu.Lock()
	data := f.snapshot
	f.mu.Unlock()
	if off >= int64(len(data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(data[off:min(int64(len(data)), off+int64(len(dest)))]), 0
}
