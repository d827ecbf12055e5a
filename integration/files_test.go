package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestChunkFiles checks the chunk files of every array against the shard
// indexes read straight from the store: each array directory lists exactly
// the stored inner chunks, a v3 chunk file holds exactly the bytes at its
// indexed range of the shard, and names of empty, out-of-range and
// malformed chunks are ENOENT. The mounts cover flat and nested ("/") key
// layouts in both views.
func TestChunkFiles(t *testing.T) {
	v3, _, v2, _ := generated(t)
	dir := func(d string) func(testing.TB) string { return func(testing.TB) string { return d } }
	cases := []struct {
		name  string
		store func(testing.TB) string
		v2sep string
	}{
		{"generated-v3", dir(v3), "."},
		{"generated-v3-nested-v2", dir(v3), "/"},
		{"generated-v2-nested-v2", dir(v2), "/"},
		{"fixtures", zarrtest.Fixtures, "."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := c.store(t)
			h := scanStore(t, store)
			m := mount(t, store, "--ro", "--v2-separator", c.v2sep)
			var files, absent, content int
			for _, sa := range h.arrays {
				shown := map[string]bool{}
				for _, v := range views {
					dir := filepath.Join(m.Dir, v, sa.path())
					if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && omitted(m.Log(), v, sa.path()) != "" {
						continue
					}
					shown[v] = true
					keys := sa.keys(v, c.v2sep)
					if got, want := chunkFiles(t, dir), sa.names(keys); !slices.Equal(got, want) {
						t.Errorf("%s/%s lists %d chunk files, the shard indexes %d:\n\tlisted only: %v\n\tindexed only: %v",
							v, sa.path(), len(got), len(want), minus(got, want), minus(want, got))
					}
					files += len(sa.chunks)
					for _, name := range absentNames(sa, keys) {
						absent++
						if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, syscall.ENOENT) {
							t.Errorf("stat %s/%s/%s: %v, want ENOENT", v, sa.path(), name, err)
						}
					}
				}
				if !shown["v3"] {
					continue
				}
				for _, ch := range sa.chunks {
					name := sa.keys("v3", c.v2sep).Key(ch.coords)
					got, err := os.ReadFile(filepath.Join(m.Dir, "v3", sa.path(), name))
					if err != nil {
						t.Errorf("v3/%s/%s: %v", sa.path(), name, err)
						continue
					}
					if want := h.shardBytes(t, ch); !bytes.Equal(got, want) {
						t.Errorf("v3/%s/%s: %d bytes differ from the %d at %s[%d:]", sa.path(), name, len(got), len(want), ch.shard, ch.off)
					}
					content++
				}
			}
			t.Logf("%d arrays: %d chunk files (both views) listed as indexed, %d v3 chunk files equal to their shard range, %d absent names ENOENT",
				len(h.arrays), files, content, absent)
		})
	}
}

// absentNames returns names of chunk files that must not exist under keys:
// empty chunks (empty index entries, missing shards), coordinates outside
// the grid, and malformed names next to a stored chunk's.
func absentNames(sa *storedArray, keys meta.KeyEncoding) []string {
	var names []string
	for _, c := range sa.emptyCoords() {
		names = append(names, keys.Key(c))
	}
	base := make([]int, len(sa.grid))
	if len(sa.chunks) > 0 {
		base = sa.chunks[0].coords
	}
	// A sentinel coordinate is replaced by malformed text.
	const sentinel = 987654321
	for d := range base {
		c := slices.Clone(base)
		c[d] = sa.grid[d]
		names = append(names, keys.Key(c))
		c[d] = sentinel
		for _, bad := range []string{"-1", "x", "+0", "0" + fmt.Sprint(base[d]), "1e0", "99999999999999999999"} {
			names = append(names, strings.Replace(keys.Key(c), fmt.Sprint(sentinel), bad, 1))
		}
	}
	if len(base) == 0 {
		return names // a 0-d array's one key has no coordinates to vary
	}
	if keys.Separator == "." {
		// Nested layouts answer an extra coordinate with ENOTDIR instead.
		names = append(names, keys.Key(append(slices.Clone(base), 0)))
	}
	// The "c" prefix of the default encoding left out, or added.
	stored := keys.Key(base)
	if keys.Name == meta.KeyEncodingDefault {
		names = append(names, strings.TrimPrefix(stored, "c"+keys.Separator))
	} else {
		names = append(names, "c"+keys.Separator+stored)
	}
	return names
}

// minus returns the elements of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// TestFindAndCopy walks a mount with find(1) and copies both views out
// with cp -r: find lists exactly the metadata documents and stored chunks
// of every node, and the copies are stores that the oracles read with the
// original digests, with the inner chunks as the chunk grid.
func TestFindAndCopy(t *testing.T) {
	o := zarrtest.NewOracle(t)
	v3, arrays, _, _ := generated(t)
	h := scanStore(t, v3)
	m := mount(t, v3, "--ro", "--v2-separator", "/")

	out, err := exec.Command("find", m.Dir, "-type", "f").Output()
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	var found []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		rel, _ := filepath.Rel(m.Dir, line)
		found = append(found, rel)
	}
	slices.Sort(found)
	want := expectedFiles(h, "/")
	if !slices.Equal(found, want) {
		t.Errorf("find lists %d files, want %d:\n\tunexpected: %v\n\tmissing: %v", len(found), len(want), minus(found, want), minus(want, found))
	}
	t.Logf("find: %d files", len(found))

	dst := t.TempDir()
	for _, v := range []string{"v3", "v2"} {
		if out, err := exec.Command("cp", "-r", filepath.Join(m.Dir, v), filepath.Join(dst, v)).CombinedOutput(); err != nil {
			t.Fatalf("cp -r: %v\n%s", err, out)
		}
	}
	checkOracles(t, o, dst, m.Log(), generatedDigests(arrays))
	copied := openView(t, filepath.Join(dst, "v3"))
	for _, sa := range h.arrays {
		n, ok := copied.Node(sa.path())
		if !ok || n.Array == nil {
			t.Errorf("copy of v3: %s is not an array (%v)", sa.path(), n.Err)
			continue
		}
		inner := sa.node.Array.ChunkShape
		if sc := sa.node.Array.Sharding(); sc != nil {
			inner = sc.ChunkShape()
		}
		if !slices.Equal(n.Array.ChunkShape, inner) {
			t.Errorf("copy of v3: %s has chunks %v, want the inner chunks %v", sa.path(), n.Array.ChunkShape, inner)
		}
	}
}

// expectedFiles lists every file of both views of a mount of h, relative
// to the mount: metadata documents of every node (a v2 group's .zmetadata
// among them) and the stored chunks.
func expectedFiles(h *storedHierarchy, v2sep string) []string {
	var files []string
	for _, n := range h.nodes {
		files = append(files, filepath.Join("v3", n.Path, zarr.ZarrJSON), filepath.Join("v2", n.Path, zarr.ZAttrs))
		if n.Array != nil {
			files = append(files, filepath.Join("v2", n.Path, zarr.ZArray))
		} else {
			files = append(files, filepath.Join("v2", n.Path, zarr.ZGroup), filepath.Join("v2", n.Path, zarr.ZMetadata))
		}
	}
	for _, sa := range h.arrays {
		for _, v := range views {
			for _, name := range sa.names(sa.keys(v, v2sep)) {
				files = append(files, filepath.Join(v, sa.path(), name))
			}
		}
	}
	slices.Sort(files)
	return files
}

// TestChunkFileReadAhead reads a 512 KiB chunk file cold: the kernel must
// ask zarrfs for it in one READ. It does so only because zarrfs widens the
// mount's read-ahead past the kernel's default of 128 KiB, which a FUSE
// INIT reply can only lower: with the default it takes one per 128 KiB.
func TestChunkFileReadAhead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := zarrtest.OpenStore(t, dir)
	a, err := zarr.CreateArrayV3(ctx, s, "a", &meta.ArrayV3{Shape: []int{512, 512}, DataType: dtype.TypeUint16, ChunkShape: []int{512, 512}, FillValue: make([]byte, 2),
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
		Codecs:      []meta.Codec{zarrtest.Sharding([]int{512, 512}, []meta.Codec{zarrtest.BytesLE}, []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}, "end")}})
	if err != nil {
		t.Fatal(err)
	}
	c := codec.NewChunk(codec.Spec{Shape: a.Shape, Type: a.Type, Fill: a.Fill()})
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range c.Data {
		c.Data[i] = byte(rng.Uint32())
	}
	if err := a.WriteChunk(ctx, []int{0, 0}, c); err != nil {
		t.Fatal(err)
	}
	s.Close()
	m := mount(t, dir, "--ro", "--log-level", "debug")
	got, err := os.ReadFile(filepath.Join(m.Dir, "v3", "a", "c", "0", "0"))
	if err != nil || !bytes.Equal(got, c.Data) {
		t.Fatalf("reading the chunk file: %v (%d bytes, equal to the data written: %v)", err, len(got), bytes.Equal(got, c.Data))
	}
	var reads []string
	for line := range strings.Lines(m.Log()) {
		if strings.Contains(line, ": READ n") {
			reads = append(reads, strings.TrimSpace(line))
		}
	}
	if len(reads) != 1 || !strings.Contains(reads[0], "[0 +524288)") {
		t.Errorf("the kernel read the 512 KiB chunk file in %d READ requests, want one of all of it:\n%s", len(reads), strings.Join(reads, "\n"))
	}
}
