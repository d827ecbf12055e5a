// Package diskcache keeps byte values in files of a local directory, so
// that what a mount fetched from a remote store survives remounts. Keys
// must name immutable content (a remote store's key with its generation),
// so an entry is never stale, only evicted: least recently used first when
// the files add up to more than the bound. Every file ends with a crc32c
// of its key and content; a file that fails it (damaged, or another key's
// entry moved in its place) is a miss and is removed. The directory must
// be this user's alone: another user who could write it could plant
// entries with their checksums.
package diskcache

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Cache is a directory of cached values.
type Cache struct {
	dir      string
	maxBytes int64

	mu    sync.Mutex
	bytes int64

	hits, misses, rejected atomic.Uint64
}

// Stats are the cache's counters.
type Stats struct {
	Hits     uint64 `json:"hits"`
	Misses   uint64 `json:"misses"`
	Rejected uint64 `json:"rejected"` // entries failing their checksum, removed
	Bytes    int64  `json:"bytes"`
	MaxBytes int64  `json:"max_bytes"`
}

// Open opens (creating it, 0700) the cache in dir, holding at most
// maxBytes. An existing directory that others can write, or that another
// user owns, is refused.
func Open(dir string, maxBytes int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s is owned by uid %d, not by this user (uid %d): its entries could be planted", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s is writable by its group or by others (mode %#o): its entries could be planted; chmod go-w it", dir, fi.Mode().Perm())
	}
	c := &Cache{dir: dir, maxBytes: maxBytes}
	for _, f := range c.files() {
		c.bytes += f.size
	}
	c.evict()
	return c, nil
}

// path is where the value of key lives: two levels of hash prefix, so no
// directory grows huge.
func (c *Cache) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	name := hex.EncodeToString(sum[:])
	return filepath.Join(c.dir, name[:2], name[2:])
}

// Get returns the value of key.
func (c *Cache) Get(key string) ([]byte, bool) {
	p := c.path(key)
	b, err := os.ReadFile(p)
	if err != nil || len(b) < 4 || checksum(key, b[:len(b)-4]) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		if err == nil {
			c.rejected.Add(1)
			c.remove(p, int64(len(b)))
		}
		c.misses.Add(1)
		return nil, false
	}
	now := time.Now()
	os.Chtimes(p, now, now) // recency, for eviction
	c.hits.Add(1)
	return b[:len(b)-4], true
}

// Put stores value under key (replacing it), written to a temporary file
// and renamed, so readers never see half a value. Errors are ignored: a
// cache that cannot write only misses.
func (c *Cache) Put(key string, value []byte) {
	p := c.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-")
	if err != nil {
		return
	}
	_, err = f.Write(binary.LittleEndian.AppendUint32(append(make([]byte, 0, len(value)+4), value...), checksum(key, value)))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var old int64
	if fi, serr := os.Stat(p); serr == nil {
		old = fi.Size()
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return
	}
	c.mu.Lock()
	c.bytes += int64(len(value)) + 4 - old
	over := c.bytes > c.maxBytes
	c.mu.Unlock()
	if over {
		c.evict()
	}
}

// checksum is the crc32c of an entry's key (with its length) and value:
// an entry read under another key fails it.
func checksum(key string, value []byte) uint32 {
	head := append(binary.LittleEndian.AppendUint64(nil, uint64(len(key))), key...)
	return crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, value)
}

func (c *Cache) remove(p string, size int64) {
	if os.Remove(p) == nil {
		c.mu.Lock()
		c.bytes -= size
		c.mu.Unlock()
	}
}

type file struct {
	path  string
	size  int64
	mtime time.Time
}

func (c *Cache) files() []file {
	var out []file
	filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			out = append(out, file{p, fi.Size(), fi.ModTime()})
		}
		return nil
	})
	return out
}

// evict removes the least recently used files until the cache holds at
// most 90% of its bound, so evictions come in batches.
func (c *Cache) evict() {
	c.mu.Lock()
	over := c.bytes > c.maxBytes
	c.mu.Unlock()
	if !over {
		return
	}
	files := c.files()
	slices.SortFunc(files, func(a, b file) int { return cmp.Compare(a.mtime.UnixNano(), b.mtime.UnixNano()) })
	for _, f := range files {
		c.mu.Lock()
		done := c.bytes <= c.maxBytes/10*9
		c.mu.Unlock()
		if done {
			return
		}
		c.remove(f.path, f.size)
	}
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Rejected: c.rejected.Load(), Bytes: c.bytes, MaxBytes: c.maxBytes}
}
