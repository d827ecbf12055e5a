package writeback

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Record is one inner chunk update in the journal.
type Record struct {
	Array  string // the array's path in the store
	Shard  string // the shard's store key
	Chunk  int    // the inner chunk's index in the shard
	Delete bool
	Data   []byte // the stored (encoded) inner chunk
}

// Journal is this process's write-ahead log of inner chunk updates, a
// directory of segment files. Append returns once the record is in the
// operating system (it survives the process being killed); Sync makes
// every appended record durable on disk. Once records are in their shards,
// Published appends a marker naming them: a replay must skip them, as
// other writers may have changed their chunks since. While the process
// lives it holds an OFD lock on the directory's owner file, so other
// processes can tell a live journal from one whose writer died.
type Journal struct {
	parent *JournalRoot
	name   string   // of the directory in parent
	dir    *os.Root // the journal's directory
	owner  *os.File

	mu      sync.Mutex
	current *segment
	segs    map[int]*segment
	closed  bool
	lost    bool // its files were removed: nothing appended survives
}

// ErrJournalLost: the journal's files were removed under it (its store
// deleted, say), so it can no longer keep a write; writes are refused.
var ErrJournalLost = errors.New("the journal was removed, so writes can no longer be kept")

// segment is one journal file.
type segment struct {
	id   int
	f    *os.File
	size int64
	live int // records not yet published
}

// Pos identifies an appended record: its segment and offset.
type Pos struct {
	seg int
	off int64
}

const (
	recordMagic    = 0x5a4a5231 // "ZJR1"
	recordHeader   = 12         // magic, body length, crc32c of the body
	flagDelete     = 1
	flagPublished  = 2 // a marker naming published records, not a record
	segmentMaxSize = 64 << 20
	ownerFile      = "owner"
	ownerTemp      = "owner.new" // the owner file until it is locked and marked
	segmentSuffix  = ".wal"
)

// OpenJournal creates a new journal directory under root: 0700, its files
// 0600, and an owner file that marks it as a journal zarrfs made and
// names root's store.
func OpenJournal(root *JournalRoot) (*Journal, error) {
	if root == nil || root.root == nil {
		return nil, errors.New("journal: no journal directory")
	}
	host, _ := os.Hostname()
	var r [4]byte
	rand.Read(r[:])
	name := fmt.Sprintf("%s-%d-%x", host, os.Getpid(), r)
	j := &Journal{parent: root, name: name, segs: map[int]*segment{}}
	if err := root.root.Mkdir(name, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	dir, err := root.root.OpenRoot(name)
	if err != nil {
		root.root.Remove(name)
		return nil, fmt.Errorf("journal: %w", err)
	}
	j.dir = dir
	// The owner file appears under its name locked and marked: one that
	// is not locked is a journal whose writer died.
	owner, err := dir.OpenFile(ownerTemp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		j.owner = owner
		if ok, lerr := store.TryLock(owner); !ok || lerr != nil {
			err = fmt.Errorf("cannot lock the owner file: %v", lerr)
		} else if _, err = owner.WriteString(ownerContent(root.store)); err == nil {
			err = dir.Rename(ownerTemp, ownerFile)
		}
	}
	if err == nil {
		err = j.rotate()
	}
	if err == nil {
		err = syncRoot(root.root)
	}
	if err != nil {
		j.remove()
		return nil, fmt.Errorf("journal %s: %w", j.path(), err)
	}
	return j, nil
}

// path names the journal's directory, for messages.
func (j *Journal) path() string { return filepath.Join(j.parent.path, j.name) }

// rotate starts a new segment; j.mu must be held (or j not yet shared).
func (j *Journal) rotate() error {
	id := 1
	if j.current != nil {
		id = j.current.id + 1
	}
	f, err := j.dir.OpenFile(segmentName(id), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.current = &segment{id: id, f: f}
	j.segs[id] = j.current
	j.reclaim()
	return nil
}

func segmentName(id int) string { return fmt.Sprintf("%08d%s", id, segmentSuffix) }

// checkLinked fails, for good, once the current segment is no longer in
// the file system: what is appended to it would be acknowledged and lost.
// j.mu must be held.
func (j *Journal) checkLinked() error {
	if !j.lost {
		var st unix.Stat_t
		if err := unix.Fstat(int(j.current.f.Fd()), &st); err != nil || st.Nlink > 0 {
			return err
		}
		j.lost = true
	}
	return fmt.Errorf("journal %s: %w", j.path(), ErrJournalLost)
}

// Lost reports whether the journal's files were removed under it.
func (j *Journal) Lost() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lost
}

// Append writes a record to the current segment.
func (j *Journal) Append(r Record) (Pos, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	pos, err := j.write(recordParts(r))
	if err == nil {
		j.current.live++
	}
	return pos, err
}

// write appends an entry, framed in parts, to the current segment; j.mu
// must be held.
func (j *Journal) write(parts [][]byte) (Pos, error) {
	if j.closed {
		return Pos{}, errors.New("journal: closed")
	}
	if err := j.checkLinked(); err != nil {
		return Pos{}, err
	}
	var size int64
	for _, p := range parts {
		size += int64(len(p))
	}
	if j.current.size > 0 && j.current.size+size > segmentMaxSize {
		if err := j.rotate(); err != nil {
			return Pos{}, err
		}
	}
	seg := j.current
	if _, err := store.WriteParts(seg.f, seg.size, parts); err != nil {
		// A partial entry ends its segment on replay (its checksum fails),
		// so later entries must not follow it: start a new segment.
		j.rotate()
		return Pos{}, fmt.Errorf("journal: %w", err)
	}
	pos := Pos{seg.id, seg.size}
	seg.size += size
	return pos, nil
}

// Release drops a record that a later record of the same inner chunk
// replaced before it was published.
func (j *Journal) Release(p Pos) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.release(p)
}

// Published records that the records at ps are in their shards, so that a
// replay leaves them out, and releases them.
func (j *Journal) Published(ps []Pos) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, err := j.write(markerParts(ps))
	for _, p := range ps {
		j.release(p)
	}
	return err
}

func (j *Journal) release(p Pos) {
	if seg, ok := j.segs[p.seg]; ok {
		seg.live--
		j.reclaim()
	}
}

// reclaim deletes the oldest segments while their records are all
// released. Only the oldest go: a marker lives in a later segment than the
// records it names, which must not outlive it. When no record at all is
// live, the current segment is emptied.
func (j *Journal) reclaim() {
	for _, id := range slices.Sorted(maps.Keys(j.segs)) {
		seg := j.segs[id]
		if seg.live > 0 {
			return
		}
		if seg == j.current {
			if seg.size > 0 && seg.f.Truncate(0) == nil {
				seg.size = 0
			}
			return
		}
		seg.f.Close()
		j.dir.Remove(segmentName(id))
		delete(j.segs, id)
	}
}

// Bytes is the size of the journal's segments on disk.
func (j *Journal) Bytes() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	var n int64
	for _, seg := range j.segs {
		n += seg.size
	}
	return n
}

// Sync makes every appended record durable.
func (j *Journal) Sync() error {
	j.mu.Lock()
	if err := j.checkLinked(); err != nil {
		j.mu.Unlock()
		return err
	}
	files := make([]*os.File, 0, len(j.segs))
	for _, s := range j.segs {
		files = append(files, s.f)
	}
	j.mu.Unlock()
	for _, f := range files {
		if err := unix.Fdatasync(int(f.Fd())); err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("journal sync: %w", err)
		}
	}
	return nil
}

// Close closes the journal. A journal whose records are all published is
// removed; otherwise it stays for the next mount to replay.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	lost := j.checkLinked() != nil
	j.closed = true
	live := 0
	for _, s := range j.segs {
		live += s.live
		s.f.Close()
	}
	if live == 0 {
		return j.remove()
	}
	j.owner.Close()
	j.dir.Close()
	if lost {
		return fmt.Errorf("journal %s: %w: %d updates that are not published are lost", j.path(), ErrJournalLost, live)
	}
	return fmt.Errorf("journal %s: %d records are not published; the next read-write mount replays them", j.path(), live)
}

// remove deletes the journal's files and its directory; j.mu must be held
// (or j not yet shared).
func (j *Journal) remove() error {
	err := removeJournal(j.parent.root, j.parent.path, j.name, j.dir)
	if j.owner != nil {
		j.owner.Close() // the lock is held until the files are gone
	}
	j.dir.Close()
	return err
}

// removeJournal deletes the journal directory name in parent (at
// parentPath), dir open on it: the files a journal holds, then the
// directory. Anything else in it stays, and so does the directory: zarrfs
// removes only what it made.
func removeJournal(parent *os.Root, parentPath, name string, dir *os.Root) error {
	f, err := dir.Open(".")
	if err != nil {
		return err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Type().IsRegular() && (e.Name() == ownerFile || e.Name() == ownerTemp || segmentID(e.Name()) > 0) {
			if err := dir.Remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	// A directory holding more than a journal stays, as does what it holds.
	if err := parent.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		errs = append(errs, fmt.Errorf("journal %s: %w", filepath.Join(parentPath, name), err))
	}
	return errors.Join(errs...)
}

// segmentID is the number a segment file's name carries, 0 for any other
// name.
func segmentID(name string) int {
	num, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(num) != 8 {
		return 0
	}
	id, err := strconv.Atoi(num)
	if err != nil || id < 0 || segmentName(id) != name {
		return 0
	}
	return id
}

// recordParts frames a record: magic, body length, crc32c, body. The
// body's data is its own part, written without being copied.
func recordParts(r Record) [][]byte {
	b := make([]byte, recordHeader, recordHeader+16+len(r.Array)+len(r.Shard))
	var flags byte
	if r.Delete {
		flags = flagDelete
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(r.Array)))
	b = append(b, r.Array...)
	b = binary.AppendUvarint(b, uint64(len(r.Shard)))
	b = append(b, r.Shard...)
	b = binary.AppendUvarint(b, uint64(r.Chunk))
	return seal(b, r.Data)
}

// markerParts frames a marker naming published records: the count, then
// each one's segment and offset.
func markerParts(ps []Pos) [][]byte {
	b := append(make([]byte, recordHeader, recordHeader+1+10+20*len(ps)), flagPublished)
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, p := range ps {
		b = binary.AppendUvarint(b, uint64(p.seg))
		b = binary.AppendUvarint(b, uint64(p.off))
	}
	return seal(b, nil)
}

// seal fills in the header at the start of head for the body that follows
// it in head and goes on in data.
func seal(head, data []byte) [][]byte {
	body := head[recordHeader:]
	binary.LittleEndian.PutUint32(head, recordMagic)
	binary.LittleEndian.PutUint32(head[4:], uint32(len(body)+len(data)))
	binary.LittleEndian.PutUint32(head[8:], crc32.Update(codec.CRC32C(body), codec.Castagnoli, data))
	return [][]byte{head, data}
}

// errTorn ends a segment: a record that was being written when its writer died.
var errTorn = errors.New("torn record")

// entry is what a journal holds: a record, or a marker naming published
// records.
type entry struct {
	Record
	pos       Pos
	published []Pos // markers only
}

func (e entry) marker() bool { return e.published != nil }

// decodeEntry reads the entry at the start of b and its encoded length.
func decodeEntry(b []byte) (entry, int, error) {
	if len(b) < recordHeader || binary.LittleEndian.Uint32(b) != recordMagic {
		return entry{}, 0, errTorn
	}
	n := int(binary.LittleEndian.Uint32(b[4:]))
	if n > len(b)-recordHeader {
		return entry{}, 0, errTorn
	}
	body := b[recordHeader : recordHeader+n]
	if codec.CRC32C(body) != binary.LittleEndian.Uint32(b[8:]) {
		return entry{}, 0, errTorn
	}
	if len(body) > 0 && body[0] == flagPublished {
		ps, err := decodeMarker(body[1:])
		return entry{published: ps}, recordHeader + n, err
	}
	r, err := decodeRecordBody(body)
	return entry{Record: r}, recordHeader + n, err
}

// decodeMarker reads the positions a marker names.
func decodeMarker(b []byte) ([]Pos, error) {
	errMalformed := errors.New("journal: malformed marker")
	next := func() (uint64, error) {
		v, k := uvarint(b)
		if k <= 0 {
			return 0, errMalformed
		}
		b = b[k:]
		return v, nil
	}
	n, err := next()
	if err != nil || n > uint64(len(b)) {
		return nil, errMalformed
	}
	ps := make([]Pos, n)
	for i := range ps {
		seg, err1 := next()
		off, err2 := next()
		if err1 != nil || err2 != nil || seg > 1<<31 || off > segmentMaxSize<<1 {
			return nil, errMalformed
		}
		ps[i] = Pos{int(seg), int64(off)}
	}
	if len(b) > 0 {
		return nil, errMalformed
	}
	return ps, nil
}

// decodeRecordBody reads the body of a record.
func decodeRecordBody(body []byte) (Record, error) {
	if len(body) == 0 || body[0]&^flagDelete != 0 {
		return Record{}, fmt.Errorf("journal: malformed record body")
	}
	var r Record
	r.Delete = body[0]&flagDelete != 0
	rest := body[1:]
	str := func() (string, bool) {
		l, k := uvarint(rest)
		if k <= 0 || l > uint64(len(rest)-k) {
			return "", false
		}
		s := string(rest[k : k+int(l)])
		rest = rest[k+int(l):]
		return s, true
	}
	var ok1, ok2 bool
	r.Array, ok1 = str()
	r.Shard, ok2 = str()
	chunk, k := uvarint(rest)
	if !ok1 || !ok2 || k <= 0 || chunk > 1<<40 {
		return Record{}, fmt.Errorf("journal: malformed record body")
	}
	r.Chunk = int(chunk)
	r.Data = rest[k:]
	return r, nil
}

// uvarint reads a minimally encoded uvarint (k <= 0 for any other), so
// that every entry that decodes encodes to the same bytes.
func uvarint(b []byte) (v uint64, k int) {
	v, k = binary.Uvarint(b)
	if k > 1 && b[k-1] == 0 {
		return 0, 0
	}
	return v, k
}

// readEntries yields the entries of the journal directory dir in order.
// Each segment ends at its first torn entry.
func readEntries(dir *os.Root) iter.Seq2[entry, error] {
	return func(yield func(entry, error) bool) {
		f, err := dir.Open(".")
		if err != nil {
			yield(entry{}, err)
			return
		}
		entries, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			yield(entry{}, err)
			return
		}
		var ids []int
		for _, e := range entries {
			if id := segmentID(e.Name()); id > 0 {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			b, err := readSegment(dir, segmentName(id))
			if err != nil {
				yield(entry{}, err)
				return
			}
			for off := 0; off < len(b); {
				e, n, err := decodeEntry(b[off:])
				if errors.Is(err, errTorn) {
					break
				}
				e.pos = Pos{id, int64(off)}
				if !yield(e, err) || err != nil {
					return
				}
				off += n
			}
		}
	}
}

// readSegment reads a segment file, which must be a regular file.
func readSegment(dir *os.Root, name string) ([]byte, error) {
	f, err := openRegular(dir, name, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// journalDir is a journal directory zarrfs made, open, with its owner
// file.
type journalDir struct {
	parent     *os.Root // the directory holding it
	parentPath string
	name       string
	dir        *os.Root
	owner      *os.File
	// store is the store it names ("" for one made before journals named
	// their store); home, whether it is in the directory of root's store,
	// whose root outlives it (another store's directory is opened for it
	// alone and closed with it).
	store string
	home  bool
}

func (j journalDir) path() string { return filepath.Join(j.parentPath, j.name) }

func (j journalDir) close() {
	j.owner.Close()
	j.dir.Close()
	if !j.home {
		j.parent.Close()
	}
}

// ours reports whether the journal's writes belong to root's store: it
// names the store, or, made before journals named their store, it is in
// the store's own directory.
func (j journalDir) ours(root *JournalRoot) bool {
	return j.store == root.store || j.store == "" && j.home
}

// stray reports whether the journal is not root's store's but the user
// must hear of it beside that store: it names another store and is in
// this store's directory, or it names the same bucket and prefix as this
// store through another endpoint (another spelling of the same server,
// perhaps).
func (j journalDir) stray(root *JournalRoot) bool {
	return !j.ours(root) && (j.home && j.store != "" || sameLocation(j.store, root.store))
}

// sameLocation reports whether two store identities name the same bucket
// (or container) and prefix, the part before the query that names the
// endpoint or account.
func sameLocation(a, b string) bool {
	la, _, _ := strings.Cut(a, "?")
	lb, _, _ := strings.Cut(b, "?")
	return a != "" && b != "" && a != inStore && la == lb
}

// journalDirs calls fn for every journal directory root can see, open,
// its owner file opened for writing with write; fn must close it. Those
// are the journals in root's directory and, for a remote store, those in
// the other stores' directories under the base (a journal moved there is
// still its store's). Entries that are not journals zarrfs made are
// passed over and reported to skip, in root's directory; elsewhere they
// are not root's concern.
func journalDirs(root *JournalRoot, write bool, skip func(path string, err error), fn func(journalDir) error) error {
	if root == nil {
		return nil
	}
	if root.root != nil {
		open := func() (*os.Root, error) { return root.root, nil }
		if err := journalsIn(root.root, root.path, open, true, write, skip, fn); err != nil {
			return err
		}
	}
	if root.base == nil {
		return nil
	}
	names, err := dirNames(root.base, root.basePath)
	if err != nil {
		return err
	}
	for _, name := range names {
		if name == root.name || !isStoreDirName(name) {
			continue
		}
		sub, err := openPrivateDir(root.base, name, false)
		if err != nil || sub == nil {
			continue // not this user's: none of its journals are
		}
		open := func() (*os.Root, error) { return openPrivateDir(root.base, name, false) }
		err = journalsIn(sub, filepath.Join(root.basePath, name), open, false, write, func(string, error) {}, fn)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// journalsIn calls fn for every journal directory in parent (at path),
// each with the parent that open gives.
func journalsIn(parent *os.Root, path string, open func() (*os.Root, error), home, write bool, skip func(string, error), fn func(journalDir) error) error {
	names, err := dirNames(parent, path)
	if err != nil {
		return err
	}
	for _, name := range names {
		j := journalDir{parentPath: path, name: name, home: home}
		dir, err := openPrivateDir(parent, name, false)
		if err != nil || dir == nil {
			skip(j.path(), err)
			continue
		}
		owner, store, err := openOwner(dir, write)
		if errors.Is(err, fs.ErrNotExist) {
			dir.Close() // being created
			continue
		}
		if err == nil {
			j.parent, err = open()
			if err == nil && j.parent == nil {
				err = fs.ErrNotExist
			}
			if err != nil {
				owner.Close()
			}
		}
		if err != nil {
			dir.Close()
			skip(j.path(), err)
			continue
		}
		j.dir, j.owner, j.store = dir, owner, store
		if err := fn(j); err != nil {
			return fmt.Errorf("journal %s: %w", j.path(), err)
		}
	}
	return nil
}

// dirNames lists the names in the directory r (at path), sorted.
func dirNames(r *os.Root, path string) ([]string, error) {
	f, err := r.Open(".")
	if err != nil {
		return nil, fmt.Errorf("journals in %s: %w", path, err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("journals in %s: %w", path, err)
	}
	slices.Sort(names)
	return names, nil
}

// orphans finds and locks the journals of root's store that no live
// process owns; the strays (journalDir.stray) go to stray, unlocked and
// closed.
func orphans(root *JournalRoot, skip func(string, error), stray func(journalDir)) ([]journalDir, error) {
	var out []journalDir
	err := journalDirs(root, true, skip, func(j journalDir) error {
		if !j.ours(root) {
			if j.stray(root) {
				stray(j)
			}
			j.close()
			return nil
		}
		if ok, _ := store.TryLock(j.owner); !ok {
			j.close() // alive
			return nil
		}
		out = append(out, j)
		return nil
	})
	return out, err
}
