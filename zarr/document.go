package zarr

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// DefaultMaxDocumentSize is the default bound of a metadata document
// (SetMaxDocumentSize): far above what real hierarchies write (the
// consolidated metadata of thousands of arrays), far below what would
// take a mount's memory. Parsing a document takes a few times its size.
const DefaultMaxDocumentSize = 32 << 20

var maxDocumentSize atomic.Int64

func init() { maxDocumentSize.Store(DefaultMaxDocumentSize) }

// SetMaxDocumentSize bounds every metadata document this process reads
// (zarr.json, .zarray, .zgroup, .zattrs, .zmetadata, tombstones), by the
// bytes stored and, from a server sending them compressed, by the bytes
// inflated: a larger one is refused, naming its key, before more than n+1
// bytes are read. It is the command line's --max-metadata-size, set once
// before stores are read.
func SetMaxDocumentSize(n int64) { maxDocumentSize.Store(n) }

// MaxDocumentSize is the bound SetMaxDocumentSize set.
func MaxDocumentSize() int64 { return maxDocumentSize.Load() }

// ReadDocument reads the metadata document at key, refusing one larger
// than MaxDocumentSize.
func ReadDocument(ctx context.Context, s store.Store, key string) ([]byte, error) {
	b, _, err := s.Get(ctx, key, store.Span{Length: -1, Max: MaxDocumentSize()}, store.Cond{})
	return b, documentErr(key, err)
}

// ReadCurrentDocument reads the whole current value of a metadata
// document under update (store.Update's cur, nil when there is none),
// refusing one larger than MaxDocumentSize.
func ReadCurrentDocument(cur store.Object, key string) ([]byte, error) {
	if cur == nil {
		return nil, fmt.Errorf("%w: %s disappeared", store.ErrNotFound, key)
	}
	size := cur.Info().Size
	if err := (store.Span{Max: MaxDocumentSize()}).CheckLength(size); err != nil {
		return nil, documentErr(key, err)
	}
	b := make([]byte, size)
	if n, err := cur.ReadAt(b, 0); n < len(b) {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b, nil
}

// documentErr names the key and the bound in the error of a document
// too large to read.
func documentErr(key string, err error) error {
	if !errors.Is(err, store.ErrTooLarge) {
		return err
	}
	return fmt.Errorf("%w: metadata document %s is larger than %d bytes (--max-metadata-size)", store.ErrTooLarge, key, MaxDocumentSize())
}
