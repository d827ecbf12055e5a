package zarr

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// StoredChunks yields the grid coordinates of every chunk (shard) that is
// stored, found by listing the array's keys. Keys that name no chunk of
// the grid are skipped. On a store that cannot list (a web server) every
// chunk of the grid is probed with Stat.
func (a *Array) StoredChunks(ctx context.Context) iter.Seq2[[]int, error] {
	return func(yield func([]int, error) bool) {
		var probing bool
		for c, err := range a.candidates(ctx, &probing) {
			if err == nil && probing {
				if _, err = a.store.Stat(ctx, a.ChunkKey(c)); errors.Is(err, store.ErrNotFound) {
					continue
				}
			}
			if !yield(c, err) || err != nil {
				return
			}
		}
	}
}

// ChunkCandidates yields the grid coordinates of the chunks (shards) that
// may be stored: those listed, or on a store that cannot list, every chunk
// of the grid, which the caller finds missing or not as it reads them.
func (a *Array) ChunkCandidates(ctx context.Context) iter.Seq2[[]int, error] {
	return a.candidates(ctx, new(bool))
}

// candidates is ChunkCandidates, setting *probing when it probes the grid.
func (a *Array) candidates(ctx context.Context, probing *bool) iter.Seq2[[]int, error] {
	return func(yield func([]int, error) bool) {
		prefix := a.Path
		if prefix != "" {
			prefix += "/"
		}
		for key, err := range store.List(ctx, a.store, prefix) {
			if errors.Is(err, store.ErrNoListing) {
				*probing = true
				grid := a.Grid()
				c := make([]int, len(grid))
				for ok := nd.Size(grid) > 0; ok; ok = nd.Next(c, grid) {
					if !yield(slices.Clone(c), nil) {
						return
					}
				}
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if c, ok := a.ParseChunkKey(strings.TrimPrefix(key, prefix)); ok && !yield(c, nil) {
				return
			}
		}
	}
}

// ChunkReport describes one stored chunk (for sharded arrays: one shard).
type ChunkReport struct {
	Key    string
	Coords []int
	Size   int64
	// Stored and Empty count inner chunks of a shard within the array's
	// shape (an unsharded chunk counts as one stored chunk); StoredBytes
	// is the size of the stored inner chunks.
	Stored, Empty int
	StoredBytes   int64
	// Err is why the chunk is broken, nil when it is healthy.
	Err error
}

// InspectChunk reads the chunk (shard) at grid coordinates. It always
// validates a shard's index (checksum and bounds); with verify it also
// decodes every stored inner chunk (or the whole unsharded chunk), which
// checks chunk checksums and sizes.
func (a *Array) InspectChunk(ctx context.Context, coords []int, verify bool) ChunkReport {
	r := ChunkReport{Key: a.ChunkKey(coords), Coords: coords}
	if a.shard == nil {
		info, err := a.store.Stat(ctx, r.Key)
		if err != nil {
			r.Err = err
			return r
		}
		r.Size, r.Stored, r.StoredBytes = info.Size, 1, info.Size
		if verify {
			_, _, r.Err = a.ReadChunk(ctx, coords)
		}
		return r
	}
	// Verifying reads every inner chunk: one request for the whole shard.
	// Otherwise the index alone is read.
	var f store.Object
	var ix *sharding.Index
	var err error
	if verify {
		if f, err = store.Open(ctx, a.store, r.Key); err == nil {
			defer f.Close()
			r.Size = f.Info().Size
			ix, err = a.shard.ReadIndex(f, r.Size)
		}
	} else {
		var info store.Info
		ix, info, err = a.ReadShardIndex(ctx, r.Key, store.Cond{})
		r.Size = info.Size
	}
	if err != nil {
		r.Err = err
		return r
	}
	var errs []error
	innerGrid := a.InnerGrid()
	for i := 0; i < ix.Len(); i++ {
		off, n, ok := ix.Chunk(i)
		if !nd.Inside(a.InnerCoords(coords, i), innerGrid) {
			if ok {
				errs = append(errs, fmt.Errorf("inner chunk %d lies outside the array but is stored", i))
			}
			continue
		}
		if !ok {
			r.Empty++
			continue
		}
		r.Stored++
		r.StoredBytes += n
		if !verify {
			continue
		}
		if err := a.shard.Inner().CheckEncodedSize(n); err != nil {
			errs = append(errs, fmt.Errorf("inner chunk %d at offset %d: %w", i, off, err))
			continue
		}
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil {
			errs = append(errs, fmt.Errorf("inner chunk %d: %w", i, err))
		} else if _, err := a.shard.Inner().Decode(b); err != nil {
			errs = append(errs, fmt.Errorf("inner chunk %d: %w", i, err))
		}
	}
	r.Err = errors.Join(errs...)
	return r
}

// InspectStored inspects every stored chunk (shard) of the array with
// workers goroutines and yields the reports as they complete.
func (a *Array) InspectStored(ctx context.Context, verify bool, workers int) iter.Seq[ChunkReport] {
	return func(yield func(ChunkReport) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		coords := make(chan []int)
		reports := make(chan ChunkReport)
		var listErr error
		go func() {
			defer close(coords)
			for c, err := range a.StoredChunks(ctx) {
				if err != nil {
					listErr = err
					return
				}
				select {
				case coords <- c:
				case <-ctx.Done():
					return
				}
			}
		}()
		var wg sync.WaitGroup
		for range max(workers, 1) {
			wg.Go(func() {
				for c := range coords {
					select {
					case reports <- a.InspectChunk(ctx, c, verify):
					case <-ctx.Done():
						return
					}
				}
			})
		}
		go func() { wg.Wait(); close(reports) }()
		for r := range reports {
			if !yield(r) {
				return
			}
		}
		if listErr != nil {
			yield(ChunkReport{Key: a.Path, Err: fmt.Errorf("list chunks: %w", listErr)})
		}
	}
}
