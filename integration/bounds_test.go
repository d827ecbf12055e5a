package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
)

// The bound tests give the mount sizes that must not become allocations:
// an index entry declaring a chunk of size bytes, in a sparse shard.

// hugeChunkStore writes a store whose array uint16_transpose_3d has, in its
// first shard, an index entry declaring inner chunk [0 1 1] to be size
// bytes (a hole after the other chunks, before the index). It returns the
// stored bytes of the chunks before and after it in key order, [0 1 0]
// and [1 0 0], keyed by fmt.Sprint of their coordinates.
func hugeChunkStore(t *testing.T, size int64) (string, *zarr.Array, map[string][]byte) {
	t.Helper()
	dir, _ := writeStore(t)
	a := storeArray(t, dir, "uint16_transpose_3d")
	want := map[string][]byte{}
	for _, c := range [][]int{{0, 1, 0}, {1, 0, 0}} {
		b, ok := storedInner(t, dir, a, c)
		if !ok {
			t.Fatalf("%s: chunk %v is not stored", a.Path, c)
		}
		want[fmt.Sprint(c)] = b
	}
	ix, body := shardIndex(t, dir, a, []int{0, 0, 0})
	ix.Set(3, body, size) // local chunk 3 of the first shard is [0 1 1]
	rewriteShard(t, dir, a, []int{0, 0, 0}, body, ix, body+size+1<<20)
	return dir, a, want
}

// checkDaemonAfterHugeChunk checks that the daemon is alive and answers,
// that it never grew near the declared size and that its log names the
// shard and the reason.
func checkDaemonAfterHugeChunk(t *testing.T, m *integration.Mount, a *zarr.Array, want map[string][]byte, reason string) {
	t.Helper()
	if mounted, _ := zfs.Mounted(m.Dir); !mounted {
		t.Fatalf("the mount is gone\n%s", m.Log())
	}
	if _, err := os.ReadFile(filepath.Join(m.Dir, ".zarrfs", "stats")); err != nil {
		t.Errorf("the daemon does not answer: %v", err)
	}
	other := []int{1, 0, 0}
	if got := readOrMissing(t, chunkPath(m.Dir, "v3", ".", a, other)); !bytes.Equal(got, want[fmt.Sprint(other)]) {
		t.Errorf("chunk %v after the huge one: %d bytes, want the %d stored", other, len(got), len(want[fmt.Sprint(other)]))
	}
	rss := daemonRSS(t, m.Pid())
	if rss > 1<<30 {
		t.Errorf("the daemon grew to %d MiB", rss>>20)
	}
	t.Logf("peak RSS of the daemon: %d MiB", rss>>20)
	log := m.Log()
	if !strings.Contains(log, a.ChunkKey([]int{0, 0, 0})) && !strings.Contains(log, a.Path) || !strings.Contains(log, reason) {
		t.Errorf("the log does not name the shard and %q:\n%s", reason, log)
	}
}

// TestAttackHugeChunkHTTP: a web server whose shard index declares a
// chunk of 1 TB. A reader reading the chunk files in key order (whose
// next chunk the mount prepares for the kernel) gets EIO for that chunk
// and the right bytes for the others; the daemon stays up and small.
func TestAttackHugeChunkHTTP(t *testing.T) {
	dir, a, want := hugeChunkStore(t, 1<<40)
	consolidate(t, dir)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	m := mount(t, srv.URL+"/", "--ro")
	// In key order: the mount prepares the content of the next chunk.
	for _, c := range [][]int{{0, 1, 0}, {0, 1, 1}} {
		p := chunkPath(m.Dir, "v3", ".", a, c)
		if c[2] == 1 {
			// Its size is 1 TB: read a little of it.
			f, err := os.Open(p)
			if err == nil {
				_, err = f.Read(make([]byte, 4096))
				f.Close()
			}
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("the chunk declared 1 TB: %v; want EIO\n%s", err, m.Log())
			}
			continue
		}
		if got := readOrMissing(t, p); !bytes.Equal(got, want[fmt.Sprint(c)]) {
			t.Errorf("chunk %v: %d bytes, want the %d stored\n%s", c, len(got), len(want[fmt.Sprint(c)]), m.Log())
		}
	}
	checkDaemonAfterHugeChunk(t, m, a, want, "too large")
}

// TestAttackHugeChunkOpenRW: a chunk of a sparse shard whose index
// declares 100 GB, opened read-write without truncating: EFBIG, the
// daemon stays up and small, and the mount unmounts cleanly.
func TestAttackHugeChunkOpenRW(t *testing.T) {
	dir, a, want := hugeChunkStore(t, 100<<30)
	m := mount(t, dir)
	p := chunkPath(m.Dir, "v3", ".", a, []int{0, 1, 1})
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err == nil {
		f.Close()
	}
	requireErrno(t, "opening the chunk declared 100 GB read-write", err, syscall.EFBIG)
	checkDaemonAfterHugeChunk(t, m, a, want, "file too large")
	stop(t, m, dir)
}
