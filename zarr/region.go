package zarr

import (
	"context"
	"fmt"
	"slices"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/nd"
)

// chunkOverlap describes the part of one chunk that a region covers.
type chunkOverlap struct {
	coords   []int // chunk grid coordinates
	inChunk  []int // start of the overlap within the chunk
	inRegion []int // start of the overlap within the region
	count    []int // size of the overlap
	whole    bool  // the overlap is the entire chunk
}

// overlaps calls fn for every chunk that intersects the region [start,
// start+count), in C order of the chunk grid.
func (a *Array) overlaps(start, count []int, fn func(o chunkOverlap) error) error {
	n := len(a.Shape)
	if len(start) != n || len(count) != n {
		return fmt.Errorf("region has %d/%d dimensions, the array %d", len(start), len(count), n)
	}
	lo, hi := make([]int, n), make([]int, n)
	for d := 0; d < n; d++ {
		if start[d] < 0 || count[d] < 0 || start[d]+count[d] > a.Shape[d] {
			return fmt.Errorf("region [%v, +%v) is outside the array's shape %v", start, count, a.Shape)
		}
		if count[d] == 0 {
			return nil
		}
		lo[d] = start[d] / a.ChunkShape[d]
		hi[d] = (start[d]+count[d]-1)/a.ChunkShape[d] + 1
	}
	span := make([]int, n)
	for d := range span {
		span[d] = hi[d] - lo[d]
	}
	pos := make([]int, n)
	for {
		o := chunkOverlap{coords: make([]int, n), inChunk: make([]int, n), inRegion: make([]int, n), count: make([]int, n), whole: true}
		for d := 0; d < n; d++ {
			c := lo[d] + pos[d]
			cs := a.ChunkShape[d]
			from := max(start[d], c*cs)
			to := min(start[d]+count[d], (c+1)*cs)
			o.coords[d] = c
			o.inChunk[d] = from - c*cs
			o.inRegion[d] = from - start[d]
			o.count[d] = to - from
			o.whole = o.whole && o.count[d] == cs
		}
		if err := fn(o); err != nil {
			return err
		}
		if !nd.Next(pos, span) {
			return nil
		}
	}
}

// ReadRegion decodes the box [start, start+count) of the array; missing
// chunks read as the fill value.
func (a *Array) ReadRegion(ctx context.Context, start, count []int) (*codec.Chunk, error) {
	out := codec.NewChunk(codec.Spec{Shape: slices.Clone(count), Type: a.Type, Fill: a.spec.Fill})
	err := a.overlaps(start, count, func(o chunkOverlap) error {
		c, found, err := a.ReadChunk(ctx, o.coords)
		if err != nil || !found {
			return err
		}
		out.CopyBox(o.inRegion, c, o.inChunk, o.count)
		return nil
	})
	return out, err
}

// Read decodes the whole array.
func (a *Array) Read(ctx context.Context) (*codec.Chunk, error) {
	return a.ReadRegion(ctx, make([]int, len(a.Shape)), a.Shape)
}

// WriteRegion stores data as the box at start of the array. Chunks only
// partly covered are read, updated and written back.
func (a *Array) WriteRegion(ctx context.Context, start []int, data *codec.Chunk) error {
	if data.Type != a.Type {
		return fmt.Errorf("writing %s data to a %s array", data.Type, a.Type)
	}
	return a.overlaps(start, data.Shape, func(o chunkOverlap) error {
		var c *codec.Chunk
		if o.whole {
			c = codec.NewChunk(a.spec)
		} else {
			var err error
			if c, _, err = a.ReadChunk(ctx, o.coords); err != nil {
				return err
			}
		}
		c.CopyBox(o.inChunk, data, o.inRegion, o.count)
		return a.WriteChunk(ctx, o.coords, c)
	})
}

// Write stores data as the whole array.
func (a *Array) Write(ctx context.Context, data *codec.Chunk) error {
	if !slices.Equal(data.Shape, a.Shape) {
		return fmt.Errorf("writing data of shape %v to an array of shape %v", data.Shape, a.Shape)
	}
	return a.WriteRegion(ctx, make([]int, len(a.Shape)), data)
}
