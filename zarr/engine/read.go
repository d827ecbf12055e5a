package engine

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// ReadStored reads a chunk's stored bytes: from memory (a pending
// update), an open shard file, or by ranges tied to the shard's
// generation (ErrStale when the shard was replaced since its index was
// read; see readRange).
func (a *Array) ReadStored(ctx context.Context, loc Location) ([]byte, error) {
	if loc.Data != nil {
		return loc.Data, nil
	}
	if a.e.files == nil {
		return a.readRange(ctx, loc)
	}
	if err := a.CheckSize(ctx, loc); err != nil {
		return nil, err
	}
	return a.readShardFile(ctx, loc, make([]byte, loc.N))
}

// scratchBuffers hold the stored bytes of local chunks read only to be
// decoded (see ReadScratch): reused, they cost neither fresh memory nor
// zeroing nor a collection, where a new buffer per chunk was half of what
// a cold read of transcoded chunks allocated.
var scratchBuffers sync.Pool // of *[]byte

// ReadScratch reads a chunk's stored bytes for a decode that keeps none
// of them: from a local shard file into a pooled buffer, which done gives
// back, so the caller calls it only once nothing it keeps shares the
// bytes. Stored bytes held elsewhere (pending updates, ranges cached from
// stores read by ranges) are read as ReadStored does, and done does
// nothing.
func (a *Array) ReadScratch(ctx context.Context, loc Location) (b []byte, done func(), err error) {
	if loc.Data != nil || a.e.files == nil {
		b, err := a.ReadStored(ctx, loc)
		return b, func() {}, err
	}
	if err := a.CheckSize(ctx, loc); err != nil {
		return nil, func() {}, err
	}
	buf, _ := scratchBuffers.Get().(*[]byte)
	if buf == nil || int64(cap(*buf)) < loc.N {
		b := make([]byte, loc.N)
		buf = &b
	}
	done = func() { scratchBuffers.Put(buf) }
	if b, err = a.readShardFile(ctx, loc, (*buf)[:loc.N]); err != nil {
		done()
		return nil, func() {}, err
	}
	return b, done, nil
}

// readShardFile reads the stored bytes at loc of a local shard file into
// b, of loc.N bytes.
func (a *Array) readShardFile(ctx context.Context, loc Location, b []byte) ([]byte, error) {
	file, release, err := a.e.files.acquire(ctx, loc.Key, loc.Gen)
	if err != nil {
		return nil, err
	}
	defer release()
	n, err := file.ReadAt(b, loc.Off)
	if n == len(b) {
		return b, nil
	}
	if err == io.EOF {
		return nil, fmt.Errorf("%w: %s: the inner chunk at offset %d ends past the end of the shard", ErrCorrupt, loc.Key, loc.Off)
	}
	return nil, fmt.Errorf("%s: %w", loc.Key, err)
}

// OpenShard returns the open shard file of a local store holding loc (at
// its generation; ErrStale if the shard is another now) and a function
// that releases it.
func (e *Engine) OpenShard(ctx context.Context, loc Location) (store.Object, func(), error) {
	return e.files.acquire(ctx, loc.Key, loc.Gen)
}

// CheckSize refuses to read a stored chunk whole when it is larger than
// any chunk of the array encodes to: a corrupt index entry, or one in a
// sparse shard, must not make the daemon allocate gigabytes. Reads from
// an open shard file may still serve such a chunk as stored.
func (a *Array) CheckSize(ctx context.Context, loc Location) error {
	if err := a.source.CheckEncodedSize(loc.N); err != nil {
		err = fmt.Errorf("%w: %s: the inner chunk at offset %d: %v", ErrCorrupt, loc.Key, loc.Off, err)
		a.e.LogOnce(ctx, loc.Key, "inner chunk too large to read whole", "error", err)
		return err
	}
	return nil
}
