package fs

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// TestTooLargeErrnoByOperation: ErrTooLarge is one error, and the
// operation decides what it means. An operation that sets a file's size
// or content refuses with EFBIG (the caller asked for too much); any
// other found something stored too large to read: EIO, with the store
// key in the log. The stored value here is a real one: a sparse file one
// byte larger than a whole read may be.
func TestTooLargeErrnoByOperation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(store.MaxValueSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := store.OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, stored := store.ReadAll(ctx, s, "big")
	if stored == nil {
		t.Fatal("a value of MaxValueSize+1 bytes was read whole")
	}
	var log bytes.Buffer
	b := &binding{opts: Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}}
	for _, op := range []string{opWrite, opTruncate, opOpenWrite} {
		log.Reset()
		if got := b.errno(ctx, op, "v3/a/c/0", stored); got != syscall.EFBIG {
			t.Errorf("%s: %v, want EFBIG", op, got)
		}
		if !strings.Contains(log.String(), "refused: file too large") {
			t.Errorf("%s: the log does not say the file is too large:\n%s", op, log.String())
		}
	}
	for _, op := range []string{"read", "lookup", "getattr", "open", "commit"} {
		log.Reset()
		if got := b.errno(ctx, op, "v3/a/c/0", stored); got != syscall.EIO {
			t.Errorf("%s: %v, want EIO", op, got)
		}
		if l := log.String(); !strings.Contains(l, "big") || !strings.Contains(l, "too large") {
			t.Errorf("%s: the log does not name the key and the reason:\n%s", op, l)
		}
	}
}
