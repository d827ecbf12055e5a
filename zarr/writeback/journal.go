package writeback

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

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
// every appended record durable on disk. While the process lives it
// holds an OFD lock on the directory's owner file, so other processes can
// tell a live journal from one whose writer died.
type Journal struct {
	dir   string
	owner *os.File

	mu      sync.Mutex
	current *segment
	segs    map[int]*segment
	closed  bool
}

// segment is one journal file.
type segment struct {
	id   int
	f    *os.File
	size int64
	live int // records not yet published
}

// Pos identifies an appended record, for Release.
type Pos struct{ seg int }

const (
	recordMagic    = 0x5a4a5231 // "ZJR1"
	recordHeader   = 12         // magic, body length, crc32c of the body
	segmentMaxSize = 64 << 20
	ownerFile      = "owner"
	segmentSuffix  = ".wal"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// OpenJournal creates a new journal directory under root.
func OpenJournal(root string) (*Journal, error) {
	host, _ := os.Hostname()
	var r [4]byte
	rand.Read(r[:])
	dir := filepath.Join(root, fmt.Sprintf("%s-%d-%x", host, os.Getpid(), r))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	owner, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if ok, err := store.TryLock(owner); !ok || err != nil {
		owner.Close()
		return nil, fmt.Errorf("journal %s: cannot lock the owner file: %v", dir, err)
	}
	j := &Journal{dir: dir, owner: owner, segs: map[int]*segment{}}
	if err := j.rotate(); err != nil {
		owner.Close()
		return nil, err
	}
	return j, syncDir(root)
}

// Dir is the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// rotate starts a new segment; j.mu must be held (or j not yet shared).
func (j *Journal) rotate() error {
	id := 1
	if j.current != nil {
		id = j.current.id + 1
		j.dropIfDone(j.current, true)
	}
	f, err := os.OpenFile(filepath.Join(j.dir, fmt.Sprintf("%08d%s", id, segmentSuffix)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.current = &segment{id: id, f: f}
	j.segs[id] = j.current
	return nil
}

// Append writes a record to the current segment.
func (j *Journal) Append(r Record) (Pos, error) {
	b := encodeRecord(r)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return Pos{}, errors.New("journal: closed")
	}
	if j.current.size > 0 && j.current.size+int64(len(b)) > segmentMaxSize {
		if err := j.rotate(); err != nil {
			return Pos{}, err
		}
	}
	seg := j.current
	if _, err := seg.f.WriteAt(b, seg.size); err != nil {
		// A partial record is ignored on replay (its checksum fails), and
		// later records must not follow it: start a new segment.
		j.rotate()
		return Pos{}, fmt.Errorf("journal: %w", err)
	}
	seg.size += int64(len(b))
	seg.live++
	return Pos{seg.id}, nil
}

// Release marks a record published; segments whose records are all
// published are deleted.
func (j *Journal) Release(p Pos) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if seg, ok := j.segs[p.seg]; ok {
		seg.live--
		j.dropIfDone(seg, seg != j.current)
	}
}

// dropIfDone deletes a finished segment with no live records.
func (j *Journal) dropIfDone(seg *segment, finished bool) {
	if seg.live > 0 || !finished {
		return
	}
	seg.f.Close()
	os.Remove(seg.f.Name())
	delete(j.segs, seg.id)
}

// Sync makes every appended record durable.
func (j *Journal) Sync() error {
	j.mu.Lock()
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
	j.closed = true
	live := 0
	for _, s := range j.segs {
		live += s.live
		s.f.Close()
	}
	defer j.owner.Close()
	if live > 0 {
		return fmt.Errorf("journal %s: %d records are not published; the next read-write mount replays them", j.dir, live)
	}
	return os.RemoveAll(j.dir)
}

// encodeRecord frames a record: magic, body length, crc32c, body.
func encodeRecord(r Record) []byte {
	body := make([]byte, 0, 16+len(r.Array)+len(r.Shard)+len(r.Data))
	var flags byte
	if r.Delete {
		flags = 1
	}
	body = append(body, flags)
	body = binary.AppendUvarint(body, uint64(len(r.Array)))
	body = append(body, r.Array...)
	body = binary.AppendUvarint(body, uint64(len(r.Shard)))
	body = append(body, r.Shard...)
	body = binary.AppendUvarint(body, uint64(r.Chunk))
	body = append(body, r.Data...)
	b := make([]byte, recordHeader, recordHeader+len(body))
	binary.LittleEndian.PutUint32(b, recordMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(body, castagnoli))
	return append(b, body...)
}

// errTorn ends a segment: a record that was being written when its writer died.
var errTorn = errors.New("torn record")

// decodeRecord reads the record at the start of b and its encoded length.
func decodeRecord(b []byte) (Record, int, error) {
	if len(b) < recordHeader || binary.LittleEndian.Uint32(b) != recordMagic {
		return Record{}, 0, errTorn
	}
	n := int(binary.LittleEndian.Uint32(b[4:]))
	if n > len(b)-recordHeader {
		return Record{}, 0, errTorn
	}
	body := b[recordHeader : recordHeader+n]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		return Record{}, 0, errTorn
	}
	var r Record
	r.Delete = body[0]&1 != 0
	rest := body[1:]
	str := func() (string, bool) {
		l, k := binary.Uvarint(rest)
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
	chunk, k := binary.Uvarint(rest)
	if !ok1 || !ok2 || k <= 0 || chunk > 1<<40 {
		return Record{}, 0, fmt.Errorf("journal: malformed record body")
	}
	r.Chunk = int(chunk)
	r.Data = rest[k:]
	return r, recordHeader + n, nil
}

// readRecords yields the records of a journal directory in order. Each
// segment ends at its first torn record.
func readRecords(dir string) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			yield(Record{}, err)
			return
		}
		var ids []int
		for _, e := range entries {
			if name, ok := strings.CutSuffix(e.Name(), segmentSuffix); ok {
				if id, err := strconv.Atoi(name); err == nil {
					ids = append(ids, id)
				}
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%08d%s", id, segmentSuffix)))
			if err != nil {
				yield(Record{}, err)
				return
			}
			for len(b) > 0 {
				r, n, err := decodeRecord(b)
				if errors.Is(err, errTorn) {
					break
				}
				if !yield(r, err) || err != nil {
					return
				}
				b = b[n:]
			}
		}
	}
}

// orphan is a journal whose writer died, locked by this process for replay.
type orphan struct {
	dir   string
	owner *os.File
}

// orphans finds and locks the journals under root that no live process owns.
func orphans(root string) ([]orphan, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []orphan
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		owner, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return out, err
		}
		if ok, _ := store.TryLock(owner); !ok {
			owner.Close() // alive
			continue
		}
		out = append(out, orphan{dir: dir, owner: owner})
	}
	return out, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
