package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
)

// TestUpcomingFollowsReaders: the engine alone, without a view, follows
// a reader through an array's chunks in key order. A read continues a
// sequence when it comes right after the last chunk asked for; a lookup
// only after a chunk that was read (lookups alone are what a reader the
// kernel serves from its pages sends). The chunk after the last one asked
// for is upcoming and the next ones are ahead, up to the end of the grid;
// none before anything was asked for.
func TestUpcomingFollowsReaders(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	_, a := open(t, openDir(t, dir), engine.Options{Revalidate: time.Hour})
	if a.Upcoming([]int{0}) || len(a.Ahead(4)) != 0 {
		t.Errorf("before any reader: chunk 0 upcoming %v, ahead %v; want none", a.Upcoming([]int{0}), a.Ahead(4))
	}
	for _, s := range []struct {
		what       string
		chunk      int
		read       bool
		sequential bool
	}{
		{"lookup of 0", 0, false, false},
		{"lookup of 1 after a lookup of 0", 1, false, false},
		{"lookup of 2 after a lookup of 1", 2, false, false},
		{"read of 2 after its lookup", 2, true, false},
		{"lookup of 3 after a read of 2", 3, false, true},
		{"read of 3 after its lookup", 3, true, false},
		{"read of 4 after a read of 3", 4, true, true},
		{"read of 4 again", 4, true, false},
		{"read of 9 after 4", 9, true, false},
		{"read of 8 after 9", 8, true, false},
		{"read of 9 after 8", 9, true, true},
		{"lookup of 10 after a read of 9", 10, false, true},
		{"lookup of 11 after a lookup of 10 after a read", 11, false, false},
	} {
		note := a.NoteLookup
		if s.read {
			note = a.NoteRead
		}
		if got := note([]int{s.chunk}); got != s.sequential {
			t.Errorf("%s: continues a sequential reader %v, want %v", s.what, got, s.sequential)
		}
		if !a.Upcoming([]int{s.chunk + 1}) || a.Upcoming([]int{s.chunk}) || a.Upcoming([]int{s.chunk + 2}) {
			t.Errorf("%s: upcoming: chunk %d %v (want true), %d %v and %d %v (want false)", s.what,
				s.chunk+1, a.Upcoming([]int{s.chunk + 1}), s.chunk, a.Upcoming([]int{s.chunk}), s.chunk+2, a.Upcoming([]int{s.chunk + 2}))
		}
	}
	if got := a.Ahead(3); !slices.EqualFunc(got, [][]int{{12}, {13}, {14}}, slices.Equal) {
		t.Errorf("3 chunks ahead of a reader at 11: %v, want [[12] [13] [14]]", got)
	}
	a.NoteRead([]int{chunks - 2})
	if got := a.Ahead(4); !slices.EqualFunc(got, [][]int{{chunks - 1}}, slices.Equal) {
		t.Errorf("4 chunks ahead of a reader at %d of %d: %v, want the last one alone", chunks-2, chunks, got)
	}
	a.NoteRead([]int{chunks - 1})
	if got := a.Ahead(4); len(got) != 0 || a.Upcoming([]int{0}) {
		t.Errorf("after the last chunk: %v ahead, chunk 0 upcoming %v; want none", got, a.Upcoming([]int{0}))
	}
}

// TestUpcomingDenseShard: readers reading a shard's chunks from a store
// read by ranges in no order make it dense once denseReads (8) of the
// last reads were of it: then its cached chunks are upcoming, with no
// sequence of any reader; those of a shard read less are not, nor any of
// a store of files (whose pages the kernel keeps and reads ahead itself).
func TestUpcomingDenseShard(t *testing.T) {
	dir := t.TempDir()
	writeArray(t, dir, 0, nil)
	for _, byRange := range []bool{true, false} {
		var s store.Store = openDir(t, dir)
		if byRange {
			s = rangeOnly{s.(storetest.Store)}
		}
		_, a := open(t, s, engine.Options{Revalidate: time.Hour})
		// 8 of shard 1's chunks (16..31) in no order, one of shard 2's
		// among them.
		order := []int{perShard + 3, perShard + 11, 2 * perShard, perShard + 6, perShard + 14, perShard + 1, perShard + 9, perShard + 4, perShard + 7}
		for i, c := range order {
			if i == len(order)-1 && a.Upcoming([]int{order[0]}) {
				t.Errorf("by range %v: chunk %d, read, upcoming after 7 reads of its shard", byRange, order[0])
			}
			if _, b, err := read(t, a, c, false); err != nil || !isChunk(b, c, 0) {
				t.Fatalf("by range %v: chunk %d: %v", byRange, c, err)
			}
		}
		if got := a.Upcoming([]int{order[0]}); got != byRange {
			t.Errorf("by range %v: chunk %d, read, upcoming %v after 8 reads of its shard in the last 9; want %v", byRange, order[0], got, byRange)
		}
		if a.Upcoming([]int{2 * perShard}) {
			t.Errorf("by range %v: chunk %d, read, upcoming after one read of its shard", byRange, 2*perShard)
		}
		if a.Upcoming([]int{perShard}) {
			t.Errorf("by range %v: chunk %d of the dense shard, never read nor fetched, upcoming", byRange, perShard)
		}
		a.NoteRead([]int{perShard + 7})
		if !a.Upcoming([]int{perShard + 8}) {
			t.Errorf("by range %v: chunk %d, after the last read, not upcoming", byRange, perShard+8)
		}
	}
}
