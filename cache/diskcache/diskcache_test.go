package diskcache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestGetPutEvictCorrupt(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get("a"); ok {
		t.Fatal("hit in an empty cache")
	}
	c.Put("a", []byte("alpha"))
	if b, ok := c.Get("a"); !ok || string(b) != "alpha" {
		t.Fatalf("Get(a) = %q, %v", b, ok)
	}
	// Reopened, it still holds the value and counts its bytes.
	c2, err := Open(dir, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := c2.Get("a"); !ok || string(b) != "alpha" || c2.Stats().Bytes != 9 {
		t.Fatalf("after reopening: %q, %v, %+v", b, ok, c2.Stats())
	}
	// A damaged file is a miss, and is removed.
	os.WriteFile(c.path("a"), []byte("alphX\x00\x00\x00\x00"), 0o600)
	if _, ok := c.Get("a"); ok {
		t.Fatal("a damaged entry was served")
	}
	if _, err := os.Stat(c.path("a")); err == nil {
		t.Fatal("a damaged entry was kept")
	}
	// Beyond the bound, the least recently used go first.
	value := bytes.Repeat([]byte{1}, 996) // 1000 bytes on disk
	for i := range 10 {
		c.Put(fmt.Sprint(i), value)
		os.Chtimes(c.path(fmt.Sprint(i)), time.Unix(int64(1000+i), 0), time.Unix(int64(1000+i), 0))
	}
	c.Get("0") // now the most recent
	c.Put("10", value)
	if _, ok := c.Get("0"); !ok {
		t.Error("the most recently used entry was evicted")
	}
	if _, ok := c.Get("1"); ok {
		t.Error("the least recently used entry was kept")
	}
	if st := c.Stats(); st.Bytes > 10_000 {
		t.Errorf("the cache holds %d bytes, over its bound", st.Bytes)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*", ".tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestSwappedEntries: an entry moved under another key's name (two files
// swapped) is a miss, removed and counted, never the other key's value.
func TestSwappedEntries(t *testing.T) {
	c, err := Open(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	c.Put("a", []byte("alpha"))
	c.Put("b", []byte("bravo"))
	a, _ := os.ReadFile(c.path("a"))
	b, _ := os.ReadFile(c.path("b"))
	os.WriteFile(c.path("a"), b, 0o600)
	os.WriteFile(c.path("b"), a, 0o600)
	for _, k := range []string{"a", "b"} {
		if v, ok := c.Get(k); ok {
			t.Errorf("Get(%s) after swapping the entries: %q, want a miss", k, v)
		}
	}
	if st := c.Stats(); st.Rejected != 2 {
		t.Errorf("%d rejected entries counted, want 2", st.Rejected)
	}
}

// TestUnsafeDirectory: a new cache directory is 0700; an existing one that
// others can write, or another user owns, is refused with the reason.
func TestUnsafeDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "cache")
	if _, err := Open(dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("a new cache directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(open, 1<<20); err == nil || !strings.Contains(err.Error(), "writable") {
		t.Errorf("a world-writable cache directory: %v; want refused as writable", err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: a directory of another user is not tested")
		return
	}
	theirs := t.TempDir()
	if err := os.Chown(theirs, 65534, 65534); err != nil { // nobody
		t.Fatal(err)
	}
	if _, err := Open(theirs, 1<<20); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("a cache directory owned by nobody: %v; want refused as another user's", err)
	}
}
