package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
)

// storedArray is an array as its store holds it, found without zarrfs's key
// spaces: the grid of chunks the views show (inner chunks for sharded
// arrays) and, from the shard indexes read with codec/sharding, where the
// bytes of every stored chunk lie.
type storedArray struct {
	node   *zarr.Node
	grid   []int
	chunks []storedChunk // in index order, shard by shard
}

// storedChunk is one stored inner chunk (for unsharded arrays: one chunk).
type storedChunk struct {
	coords []int
	shard  string // store key of the shard (or chunk) holding the bytes
	off, n int64  // the bytes' range in it
	mtime  time.Time
}

// storedHierarchy is every node of a store and the arrays among them.
type storedHierarchy struct {
	dir    string
	nodes  []*zarr.Node
	arrays []*storedArray
}

// scanStore opens the store at dir read-only and scans every array.
func scanStore(t *testing.T, dir string) *storedHierarchy {
	t.Helper()
	h := openView(t, dir)
	sh := &storedHierarchy{dir: dir, nodes: h.Nodes()}
	for _, n := range h.Arrays() {
		if n.Array != nil {
			sh.arrays = append(sh.arrays, scanArray(t, dir, n))
		}
	}
	return sh
}

// scanArray reads every shard (or chunk) file of an array straight from
// the directory and decodes the indexes.
func scanArray(t *testing.T, dir string, n *zarr.Node) *storedArray {
	t.Helper()
	a := n.Array
	sa := &storedArray{node: n, grid: a.InnerGrid()}
	grid := a.Grid()
	coords := make([]int, len(grid))
	for ok := nd.Size(grid) > 0; ok; ok = nd.Next(coords, grid) {
		key := a.ChunkKey(coords)
		path := filepath.Join(dir, filepath.FromSlash(key))
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		shard := slices.Clone(coords)
		sc := a.Sharding()
		if sc == nil {
			sa.chunks = append(sa.chunks, storedChunk{coords: shard, shard: key, n: int64(len(b)), mtime: fi.ModTime()})
			continue
		}
		ix, err := sc.ReadIndex(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		for i := range ix.Len() {
			off, size, ok := ix.Chunk(i)
			c := a.InnerCoords(shard, i)
			if ok && nd.Inside(c, sa.grid) {
				sa.chunks = append(sa.chunks, storedChunk{coords: c, shard: key, off: off, n: size, mtime: fi.ModTime()})
			}
		}
	}
	return sa
}

// path is the array's path in the store and in both views.
func (sa *storedArray) path() string { return sa.node.Path }

// views are the key spaces of a mount.
var views = []string{"v3", "v2"}

// keys is the key encoding of the array's chunk files in a view of a mount
// with the given --v2-separator: in v3/ the array's own.
func (sa *storedArray) keys(view, v2sep string) meta.KeyEncoding {
	if view == "v2" {
		return v2Keys(v2sep)
	}
	return sa.node.Array.Keys
}

// v2Keys is the key encoding of chunk files in the v2 view of a mount with
// the given --v2-separator.
func v2Keys(sep string) meta.KeyEncoding {
	return meta.KeyEncoding{Name: meta.KeyEncodingV2, Separator: sep}
}

// names returns the chunk file names (relative to the array directory) of
// every stored chunk under keys.
func (sa *storedArray) names(keys meta.KeyEncoding) []string {
	var names []string
	for _, c := range sa.chunks {
		names = append(names, keys.Key(c.coords))
	}
	slices.Sort(names)
	return names
}

// emptyCoords returns the coordinates inside the grid that have no stored
// chunk: empty index entries and chunks of missing shards.
func (sa *storedArray) emptyCoords() [][]int {
	stored := map[string]bool{}
	for _, c := range sa.chunks {
		stored[fmt.Sprint(c.coords)] = true
	}
	var empty [][]int
	coords := make([]int, len(sa.grid))
	for ok := nd.Size(sa.grid) > 0; ok; ok = nd.Next(coords, sa.grid) {
		if !stored[fmt.Sprint(coords)] {
			empty = append(empty, slices.Clone(coords))
		}
	}
	return empty
}

// shardBytes reads the stored bytes of a chunk straight from the store.
func (h *storedHierarchy) shardBytes(t *testing.T, c storedChunk) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, filepath.FromSlash(c.shard)))
	if err != nil {
		t.Fatal(err)
	}
	return b[c.off : c.off+c.n]
}

// chunkFiles lists the files below an array directory of a view, relative
// to it, leaving out its metadata documents.
func chunkFiles(t *testing.T, arrayDir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(arrayDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(arrayDir, path)
		if !d.IsDir() && !isMetadataDoc(rel) {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

func isMetadataDoc(name string) bool {
	switch name {
	case zarr.ZarrJSON, zarr.ZArray, zarr.ZAttrs, zarr.ZGroup, zarr.ZMetadata:
		return true
	}
	return false
}

// omitted returns the reason the mount's log gives for leaving the node at
// path out of a view, or "" when it does not.
func omitted(log, view, path string) string {
	re := regexp.MustCompile(`msg="node left out of (?:the ` + view + ` view|both views)" key=(?:` +
		regexp.QuoteMeta(path) + `|"` + regexp.QuoteMeta(path) + `") error=(.*)`)
	if m := re.FindStringSubmatch(log); m != nil {
		return m[1]
	}
	return ""
}
