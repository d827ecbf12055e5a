package diskcache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
