package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/zarrfs/zarrfs/cache/blocks"
	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// fetchRange reads span of the shard at loc's generation, the chunks of
// run, and returns each chunk's bytes in a buffer of its own: a slice of
// a shared one would keep the whole span (or a block of the block cache)
// in memory for as long as any of its chunks is cached. Through the
// engine's stack of block caches when it has one (memory, the disk cache,
// the cluster, whose owner of a block reads it from the store once for
// every mount), the chunks are copied out of the blocks; else the span is
// read from the store straight into them (scatter), with no copy.
func (a *Array) fetchRange(ctx context.Context, loc Location, span storedRange, run []storedRange) ([][]byte, error) {
	e := a.e
	if len(run) > 1 {
		e.counts.coalesced.Add(uint64(len(run) - 1))
	}
	var buf []byte
	var err error
	if stack := a.blockStack(); stack != nil {
		o := blocks.Object{Store: e.id, Key: loc.Key, Gen: loc.Gen, Size: loc.Size}
		buf, err = blocks.Read(ctx, stack, o, span.off, span.n, a.blockChecks(o, span, run))
	} else if chunks, bufs := scatter(span, run); chunks != nil {
		return chunks, stale(store.ReadScatter(ctx, e.origin.Store, loc.Key, loc.Gen, bufs, span.off))
	} else {
		buf = make([]byte, span.n)
		err = e.origin.Store.ReadAt(ctx, loc.Key, loc.Gen, buf, span.off)
	}
	if err != nil {
		return nil, stale(err)
	}
	chunks := make([][]byte, len(run))
	for i, c := range run {
		chunks[i] = bytes.Clone(buf[c.off-span.off : c.off-span.off+c.n])
	}
	return chunks, nil
}

// scatter returns the buffers one read of span fills, one after another
// (bufs): one of its own for each chunk of run (chunks), and scratch for
// the gaps between them (at most coalesceGap, see following), whose bytes
// are dropped. Nil when chunks of run share stored bytes (an index may
// point several chunks at one copy of equal bytes): one read cannot fill
// each of them.
func scatter(span storedRange, run []storedRange) (chunks, bufs [][]byte) {
	at, gap := span.off, int64(0)
	for _, c := range run {
		if c.off < at {
			return nil, nil
		}
		gap, at = max(gap, c.off-at), c.off+c.n
	}
	scratch := make([]byte, gap)
	chunks = make([][]byte, len(run))
	at = span.off
	for i, c := range run {
		if c.off > at {
			bufs = append(bufs, scratch[:c.off-at])
		}
		chunks[i] = make([]byte, c.n)
		bufs = append(bufs, chunks[i])
		at = c.off + c.n
	}
	return chunks, bufs
}

// stale is err, or ErrStale for a read refused as the shard changed.
func stale(err error) error {
	if errors.Is(err, store.ErrPrecondition) {
		return ErrStale
	}
	return err
}

// stackBlocks composes the engine's block caches, each wrapping the next:
// memory, the disk cache, the cluster, the store. Without a disk cache or
// a cluster, which share blocks, there is none: a read fetches just the
// span its readers need.
func (e *Engine) stackBlocks() {
	stack := func(peers bool) *blocks.Memory {
		var src blocks.Source = e.origin
		if peers {
			src = &blocks.Peers{Cluster: e.cluster, Next: src}
		}
		if e.opts.DiskCache != nil {
			src = &blocks.Disk{Cache: e.opts.DiskCache, Next: src}
		}
		if !peers && e.opts.DiskCache == nil {
			return nil
		}
		return &blocks.Memory{Cache: e.cache, Next: src}
	}
	e.blocks.Store(stack(e.cluster != nil))
	e.unshared.Store(stack(false))
}

// blockStack is the stack of block caches the array's chunk bytes are
// read through; nil: none, read ranges from origin.
func (a *Array) blockStack() *blocks.Memory {
	if a.e.cluster != nil && !a.chunksFromPeers() {
		return a.e.unshared.Load()
	}
	return a.e.blocks.Load()
}

// countedReads reads ranges of the engine's store, counting them.
type countedReads struct{ e *Engine }

func (c countedReads) ReadAt(ctx context.Context, key string, gen store.Generation, p []byte, off int64) error {
	c.e.counts.rangeReads.Add(1)
	c.e.counts.fetchedBytes.Add(uint64(len(p)))
	return c.e.store.ReadAt(ctx, key, gen, p, off)
}

func (c countedReads) ReadScatter(ctx context.Context, key string, gen store.Generation, bufs [][]byte, off int64) error {
	c.e.counts.rangeReads.Add(1)
	c.e.counts.fetchedBytes.Add(uint64(store.TotalLen(bufs)))
	return store.ReadScatter(ctx, c.e.store, key, gen, bufs, off)
}

// blockChecks check the blocks of span, the chunks of run: each chunk's
// crc32c when the array's chunks end with one, in a block alone for the
// chunks that lie in it whole, and in span for all of them.
func (a *Array) blockChecks(o blocks.Object, span storedRange, run []storedRange) blocks.Checks {
	if !endsWithCRC32C(a.chain) {
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
