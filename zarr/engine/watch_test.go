package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestWatchedShardToldWithoutReaders: a watched shard of a directory store
// replaced outside the engine is told to Options.Changed, every inner
// chunk of it, with no reader asking; a shard not watched is not. A store
// read by ranges (as an object store) watches nothing.
func TestWatchedShardToldWithoutReaders(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	var mu sync.Mutex
	var told []int
	opts := engine.Options{Revalidate: 50 * time.Millisecond, Changed: func(_ *zarr.Array, c []int) {
		mu.Lock()
		told = append(told, c[0])
		mu.Unlock()
	}}
	_, a := open(t, openDir(t, dir), opts)
	_, byRange := open(t, rangeOnly{openDir(t, dir)}, opts)
	loc, _, err := read(t, a, 5, false)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Watch(loc) {
		t.Fatal("a shard of a directory store is not watched")
	}
	if loc, _, err := read(t, byRange, 5, false); err != nil || byRange.Watch(loc) {
		t.Errorf("a shard read by ranges is watched (%v)", err)
	}
	for i := 16; i < 32; i++ { // shard 1, read but not watched
		if _, _, err := read(t, a, i, false); err != nil {
			t.Fatal(err)
		}
	}

	writeArray(t, dir, 1, nil) // every shard replaced
	want := make([]int, perShard)
	for i := range want {
		want[i] = i
	}
	var got []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		got = slices.Clone(told)
		mu.Unlock()
		if len(got) >= perShard {
			break
		}
	}
	slices.Sort(got)
	got = slices.Compact(got)
	if !slices.Equal(got, want) {
		t.Errorf("chunks told changed within 10 s of the replacement, no reader asking: %v, want those of the watched shard %v", got, want)
	}
}

// TestWatchIsBounded: at most watchMax objects are watched at once (here
// 32); past that, Watch says no, and an object watched already is still
// watched.
func TestWatchIsBounded(t *testing.T) {
	const n, bound = 64, 32
	engine.SetWatchMax(t, bound)
	dir := t.TempDir()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := zarr.CreateArrayV3(ctx, s, "a", &meta.ArrayV3{
		Shape: []int{n}, DataType: dtype.TypeUint8, ChunkShape: []int{1},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, FillValue: []byte{0},
		Codecs: zarr.ShardedCodecs([]int{1}, raw),
	}); err != nil {
		t.Fatal(err)
	}
	h, err := zarr.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	node, _ := h.Node("a")
	if err := node.Array.Write(ctx, zarrtest.Pattern(node.Array, 3)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, a := open(t, openDir(t, dir), engine.Options{Revalidate: time.Hour})
	watched := 0
	var first engine.Location
	for i := range n {
		loc, ok, err := a.Locate(ctx, []int{i}, false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		if a.Watch(loc) {
			if watched == 0 {
				first = loc
			}
			watched++
		}
	}
	if watched != bound {
		t.Errorf("%d objects watched, want %d", watched, bound)
	}
	if !a.Watch(first) {
		t.Error("an object watched already is refused once the bound is reached")
	}
}
