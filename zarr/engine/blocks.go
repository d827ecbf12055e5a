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
// run, from the aligned blocks that cover it: from memory, the disk cache
// or the cluster (whose owner of a block reads it from the store once for
// every mount), else from the store.
func (a *Array) fetchRange(ctx context.Context, loc Location, span storedRange, run []storedRange) ([]byte, error) {
	e := a.e
	if len(run) > 1 {
		e.counts.coalesced.Add(uint64(len(run) - 1))
	}
	o := blocks.Object{Store: e.store.String(), Key: loc.Key, Gen: loc.Gen, Size: loc.Size}
	buf, err := e.blockReader().Read(ctx, o, span.off, span.n, a.blockChecks(o, span, run))
	if errors.Is(err, store.ErrPrecondition) {
		return nil, ErrStale
	}
	return buf, err
}

// blockReader reads the blocks of the store through the caches the
// engine has.
func (e *Engine) blockReader() *blocks.Reader {
	r := &blocks.Reader{Memory: e.cache, Origin: func(ctx context.Context, o blocks.Object, p []byte, off int64) error {
		e.counts.rangeReads.Add(1)
		e.counts.fetchedBytes.Add(uint64(len(p)))
		return e.store.ReadAt(ctx, o.Key, o.Gen, p, off)
	}}
	if e.opts.DiskCache != nil {
		r.Disk = e.opts.DiskCache
	}
	if e.cluster != nil {
		r.Peers = e.cluster
	}
	return r
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
