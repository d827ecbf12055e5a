package integration_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestReadOnlySeesReplacedShard replaces a shard (a new file renamed over
// the old) under a read-only mount of a local directory with --revalidate
// 1s, while a reader reads every chunk file of the shard in passes: every
// file shows the new content within a few seconds, and no file is read old
// once any file of the shard was read new (a pass is all old, all new, or,
// the one pass the change lands in, old files then new ones).
func TestReadOnlySeesReplacedShard(t *testing.T) {
	dir, next := t.TempDir(), t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	zarrtest.WriteV3Store(t, next)
	// The array whose first shard holds the most stored chunks.
	var a *zarr.Array
	var shard []int
	var chunks [][]int
	for _, g := range arrays {
		n, _ := openView(t, dir).Node(g.Path)
		if n.Array == nil || n.Array.Sharding() == nil {
			continue
		}
		arr := n.Array
		for s := make([]int, len(arr.Shape)); ; {
			var stored [][]int
			for i := range arr.Sharding().NumChunks() {
				c := arr.InnerCoords(s, i)
				if _, ok := storedInner(t, dir, arr, c); ok && nd.Inside(c, arr.InnerGrid()) {
					stored = append(stored, c)
				}
			}
			if len(stored) > len(chunks) {
				a, shard, chunks = arr, append([]int(nil), s...), stored
			}
			if !nd.Next(s, arr.Grid()) {
				break
			}
		}
	}
	if len(chunks) < 2 {
		t.Fatal("no shard with two stored chunks")
	}
	// The replacement: the same array, other values.
	nextNode, _ := zarrtest.OpenHierarchy(t, next, false).Node(a.Path)
	nextArr := nextNode.Array
	if err := nextArr.Write(context.Background(), zarrtest.Pattern(nextArr, 7)); err != nil {
		t.Fatal(err)
	}
	m := mount(t, dir, "--ro", "--revalidate", "1s", "--view", "v3")
	paths := make([]string, len(chunks))
	old := make([][]byte, len(chunks))
	newStored := make([][]byte, len(chunks))
	for i, c := range chunks {
		paths[i] = filepath.Join(m.Dir, a.Path, keyIn(a, "v3", c))
		b, err := os.ReadFile(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		old[i] = b
		var ok bool
		if newStored[i], ok = storedInner(t, next, nextArr, c); !ok {
			t.Fatalf("%v is not stored in the replacement", c)
		}
		if bytes.Equal(old[i], newStored[i]) {
			t.Fatalf("%v: the replacement stores the same bytes", c)
		}
	}
	// isNew: the file holds the new chunk (its stored bytes, less a
	// trailing checksum the view leaves out).
	isNew := func(i int, b []byte) bool {
		n := newStored[i]
		return bytes.Equal(b, n) || len(n) == len(b)+4 && bytes.Equal(b, n[:len(b)])
	}
	// Passes over cached pages first: what the kernel keeps is the point.
	for range 3 {
		for i, p := range paths {
			if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, old[i]) {
				t.Fatalf("%s before the replacement: %d bytes, %v", p, len(b), err)
			}
		}
	}

	key := filepath.Join(dir, filepath.FromSlash(a.ChunkKey(shard)))
	tmp := key + ".new"
	b, err := os.ReadFile(filepath.Join(next, filepath.FromSlash(a.ChunkKey(shard))))
	if err == nil {
		err = os.WriteFile(tmp, b, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, key)
	}
	if err != nil {
		t.Fatal(err)
	}
	replaced := time.Now()

	seenNew, allNewAt, passes, allNewPasses := false, time.Duration(0), 0, 0
	for deadline := replaced.Add(30 * time.Second); time.Now().Before(deadline) && allNewPasses < 5; passes++ {
		newInPass := 0
		for i, p := range paths {
			b, err := os.ReadFile(p)
			switch {
			case err != nil:
				t.Fatalf("%s: %v", p, err)
			case isNew(i, b):
				seenNew = true
				newInPass++
			case !bytes.Equal(b, old[i]):
				t.Fatalf("%s: %d bytes, neither the old chunk nor the new one", p, len(b))
			case seenNew:
				t.Fatalf("pass %d, %.1fs after the replacement: %s reads old after a file of the shard read new (%d of %d new so far in this pass)",
					passes, time.Since(replaced).Seconds(), p, newInPass, len(paths))
			}
		}
		if newInPass == len(paths) {
			if allNewPasses == 0 {
				allNewAt = time.Since(replaced)
			}
			allNewPasses++
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d chunk files of %s: all new %v after the replacement, %d passes", len(paths), a.ChunkKey(shard), allNewAt.Round(time.Millisecond), passes)
	if allNewPasses < 5 {
		t.Fatalf("30 s after the replacement, the shard's %d chunk files do not all read new", len(paths))
	}
	if allNewAt > 5*time.Second {
		t.Errorf("the new shard showed %v after the replacement, want within about 1 s (--revalidate 1s)", allNewAt)
	}
}
