package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// fetchRange reads span of the shard at loc's generation, the chunks of
// run: through the engine's stack of block caches when it has one (memory,
// the disk cache, the cluster, whose owner of a block reads it from the
// store once for every mount), else just the span from the store. fresh
// reports that the bytes are in a buffer of their own, which nothing else
// holds.
func (a *Array) fetchRange(ctx context.Context, loc Location, span storedRange, run []storedRange) (buf []byte, fresh bool, err error) {
	e := a.e
	if len(run) > 1 {
		e.counts.coalesced.Add(uint64(len(run) - 1))
	}
	if stack := e.blocks.Load(); stack == nil {
		buf, fresh = make([]byte, span.n), true
		err = e.origin.Store.ReadAt(ctx, loc.Key, loc.Gen, buf, span.off)
	} else {
		o := blocks.Object{Store: e.id, Key: loc.Key, Gen: loc.Gen, Size: loc.Size}
		buf, err = blocks.Read(ctx, stack, o, span.off, span.n, a.blockChecks(o, span, run))
	}
	if errors.Is(err, store.ErrPrecondition) {
		return nil, false, ErrStale
	}
	return buf, fresh, err
}

// stackBlocks composes the engine's block caches, each wrapping the next:
// memory, the disk cache, the cluster, the store. Without a disk cache or
// a cluster, which share blocks, there is none: a read fetches just the
// span its readers need.
func (e *Engine) stackBlocks() {
	var src blocks.Source = e.origin
	if e.cluster != nil {
		src = &blocks.Peers{Cluster: e.cluster, Next: src}
	}
	if e.opts.DiskCache != nil {
		src = &blocks.Disk{Cache: e.opts.DiskCache, Next: src}
	}
	if e.cluster != nil || e.opts.DiskCache != nil {
		e.blocks.Store(&blocks.Memory{Cache: e.cache, Next: src})
	}
}

// countedReads reads ranges of the engine's store, counting them.
type countedReads struct{ e *Engine }

func (c countedReads) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	c.e.counts.rangeReads.Add(1)
	c.e.counts.fetchedBytes.Add(uint64(len(p)))
	return c.e.store.ReadAt(ctx, key, gen, p, off)
}

// blockChecks check the blocks of span, the chunks of run: each chunk's
// crc32c when the array's chunks end with one, in a block alone for the
// chunks that lie in it whole, and in span for all of them.
func (a *Array) blockChecks(o blocks.Object, span storedRange, run []storedRange) blocks.Checks {
	if len(a.chain) == 0 || !codec.IsTrailingCRC32C(a.chain[len(a.chain)-1]) {
		return blocks.Checks{}
	}
	check := func(b []byte, at int64) error {
		for _, r := range run {
			if r.off >= at && r.off+r.n <= at+int64(len(b)) && !codec.EndsWithCRC32C(b[r.off-at:r.off-at+r.n]) {
				return fmt.Errorf("crc32c of the inner chunk at offset %d does not match", r.off)
			}
		}
		return nil
	}
	return blocks.Checks{
		Block: func(i int64, b []byte) error {
			off, _ := o.Block(i)
			return check(b, off)
		},
		Span: func(b []byte) error { return check(b, span.off) },
	}
}
