package engine

import (
	"slices"
	"sync"

	"github.com/zarrfs/zarrfs/zarr/nd"
)

// What a reader reads next is worth preparing before it asks (fetched,
// transcoded, handed to the kernel's page cache): the chunk after the last
// one it asked for, when it reads an array's chunks in key order (as cat of
// a directory, cp -r, and zarr-python reading a region do), and the cached
// chunks of a shard read densely (see Touched). Chunks of arrays read in no
// order are not, so that listing or stat-ing a chunk directory prepares no
// chunk. The users of an Array tell it what their readers ask for
// (NoteRead, NoteLookup), and ask it what comes next (Upcoming, Ahead).

// sequence remembers the last chunk of an array a reader asked for.
type sequence struct {
	mu   sync.Mutex
	last []int
	read bool // last's bytes were asked for, not only its attributes
	run  int  // chunks in a row, ending at last, asked for in key order
}

// NoteRead records that a reader read the chunk at (inner grid) coords,
// and reports whether it continues a sequential reader: it comes right
// after the last chunk asked for, in key order.
func (a *Array) NoteRead(coords []int) bool { return a.seq.asked(a.grid, coords, true) }

// NoteLookup records that a reader looked the chunk at coords up (its
// attributes) without reading it, and reports whether it continues a
// sequential reader. A lookup does so only after a chunk that was read: a
// reader the kernel serves from the pages it keeps looks names up again
// whenever their entries expire (--revalidate) and reads nothing, and
// chunks prepared ahead of it would only fill the cache, never delivered.
func (a *Array) NoteLookup(coords []int) bool { return a.seq.asked(a.grid, coords, false) }

func (s *sequence) asked(grid, coords []int, read bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sequential := s.follows(grid, coords) && (read || s.read)
	switch {
	case sequential:
		s.run++
	case !slices.Equal(s.last, coords):
		s.run = 1
	}
	if !slices.Equal(s.last, coords) {
		s.last = slices.Clone(coords)
		s.read = read
	} else {
		s.read = s.read || read
	}
	return sequential
}

// runTo returns how many chunks in a row, ending at coords, readers asked
// for in key order; 0 when coords is not the last chunk asked for.
func (s *sequence) runTo(coords []int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(s.last, coords) {
		return 0
	}
	return s.run
}

// follows reports whether coords come right after the last chunk asked
// for, in key order. The caller holds s.mu.
func (s *sequence) follows(grid, coords []int) bool {
	return s.last != nil && slices.Equal(nextChunk(s.last, grid), coords)
}

// Upcoming reports whether the chunk at coords is one a reader reads next:
// the chunk after the last one a reader asked for (see NoteRead), or a
// cached chunk of a dense shard. It loads and fetches nothing.
func (a *Array) Upcoming(coords []int) bool {
	a.seq.mu.Lock()
	follows := a.seq.follows(a.grid, coords)
	a.seq.mu.Unlock()
	return follows || a.denseCached(coords)
}

// Ahead returns the coordinates of the n chunks after the last one a reader
// asked for, in key order: those a sequential reader reads next (fewer at
// the end of the grid, none before any was asked for).
func (a *Array) Ahead(n int) [][]int {
	a.seq.mu.Lock()
	next := slices.Clone(a.seq.last)
	a.seq.mu.Unlock()
	var ahead [][]int
	for range n {
		if next = nextChunk(next, a.grid); next == nil {
			break
		}
		ahead = append(ahead, next)
	}
	return ahead
}

// nextChunk returns the coordinates after coords in C order of grid, the
// order of chunk keys; nil after the last chunk (or when coords is nil).
func nextChunk(coords, grid []int) []int {
	if coords == nil {
		return nil
	}
	next := slices.Clone(coords)
	if !nd.Next(next, grid) {
		return nil
	}
	return next
}
