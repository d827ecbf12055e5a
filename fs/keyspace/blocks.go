package keyspace

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
func (av *arrayView) fetchRange(ctx context.Context, loc location, span storedRange, run []storedRange) ([]byte, error) {
	f := av.fs
	if len(run) > 1 {
		f.counts.coalesced.Add(uint64(len(run) - 1))
	}
	o := blocks.Object{Store: f.store.String(), Key: loc.key, Gen: loc.gen, Size: loc.size}
	buf, err := f.blockReader().Read(ctx, o, span.off, span.n, av.blockChecks(o, span, run))
	if errors.Is(err, store.ErrPrecondition) {
		return nil, errStale
	}
	return buf, err
}

// blockReader reads the blocks of the store through the caches the mount
// has.
func (f *FS) blockReader() *blocks.Reader {
	r := &blocks.Reader{Memory: f.cache, Origin: func(ctx context.Context, o blocks.Object, p []byte, off int64) error {
		f.counts.rangeReads.Add(1)
		f.counts.fetchedBytes.Add(uint64(len(p)))
		return f.store.ReadAt(ctx, o.Key, o.Gen, p, off)
	}}
	if f.opts.DiskCache != nil {
		r.Disk = f.opts.DiskCache
	}
	if f.cluster != nil {
		r.Peers = f.cluster
	}
	return r
}

// blockChecks check the blocks of span, the chunks of run: each chunk's
// crc32c when the array's chunks end with one, in a block alone for the
// chunks that lie in it whole, and in span for all of them.
func (av *arrayView) blockChecks(o blocks.Object, span storedRange, run []storedRange) blocks.Checks {
	if len(av.chain) == 0 || !codec.IsTrailingCRC32C(av.chain[len(av.chain)-1]) {
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
