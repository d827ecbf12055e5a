package zipstore

import (
	"bufio"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sync"
)

// inflated reads a deflated member by range. Deflate cannot start
// mid-stream, so a read inflates the member from its start, or from where
// the last read left off when it starts there or later (readers of a
// shard mostly go forward), discarding what lies before its range: it
// holds the flate state (about 40 KiB), a read buffer and the range, never
// the member, whatever the member inflates to. The member's crc32 is
// checked by the read that reaches its end; a member found corrupt then
// fails every later read.
type inflated struct {
	data *io.SectionReader // the member's deflated bytes
	size int64             // its size inflated, as the central directory says
	crc  uint32

	mu  sync.Mutex
	cur *cursor // nil until the first read, and after Close
	bad error
}

// cursor is a position in the inflated member.
type cursor struct {
	fr  io.ReadCloser
	pos int64
	sum hash.Hash32
}

// inflateBuf is the read buffer of a cursor over the deflated bytes.
const inflateBuf = 32 << 10

// skipStep is how much a read discards between checks of its context.
const skipStep = 1 << 20

func newInflated(data *io.SectionReader, size int64, crc uint32) *inflated {
	return &inflated{data: data, size: size, crc: crc}
}

// ReadAt reads the bytes at off; io.EOF when they end before p does.
func (z *inflated) ReadAt(p []byte, off int64) (int, error) {
	return z.readAt(context.Background(), p, off)
}

// readAt is ReadAt, stopping when ctx is done.
func (z *inflated) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 || off > z.size {
		return 0, fmt.Errorf("read at %d of a member of %d bytes: %w", off, z.size, io.ErrUnexpectedEOF)
	}
	n := int(min(int64(len(p)), z.size-off))
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.bad != nil {
		return 0, z.bad
	}
	if z.cur == nil || z.cur.pos > off {
		z.restart()
	}
	for z.cur.pos < off {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if _, err := io.CopyN(io.Discard, z, min(off-z.cur.pos, skipStep)); err != nil {
			return 0, z.fail(err)
		}
	}
	if _, err := io.ReadFull(z, p[:n]); err != nil {
		return 0, z.fail(err)
	}
	if z.cur.pos == z.size {
		if err := z.verify(); err != nil {
			return 0, z.fail(err)
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read reads on from the cursor (for ReadAt's copies, with z.mu held),
// refusing a member that inflates to fewer bytes than it says.
func (z *inflated) Read(p []byte) (int, error) {
	c := z.cur
	p = p[:min(int64(len(p)), z.size-c.pos)]
	if len(p) == 0 {
		return 0, io.EOF
	}
	n, err := c.fr.Read(p)
	c.sum.Write(p[:n])
	c.pos += int64(n)
	if err == io.EOF && c.pos < z.size {
		err = fmt.Errorf("inflated %d bytes, the central directory says %d: %w", c.pos, z.size, io.ErrUnexpectedEOF)
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// verify checks, at the end of the member, that the deflated stream ends
// there too and that the crc32 of what it inflated to is the member's.
func (z *inflated) verify() error {
	var more [1]byte
	if n, _ := io.ReadFull(z.cur.fr, more[:]); n > 0 {
		return fmt.Errorf("inflates to more than the %d bytes the central directory says", z.size)
	}
	if got := z.cur.sum.Sum32(); got != z.crc {
		return fmt.Errorf("crc32 %08x of the inflated member, the central directory says %08x", got, z.crc)
	}
	return nil
}

// fail records that the member cannot be read (corrupt, or its file
// failing) unless the reader gave up, and returns err.
func (z *inflated) fail(err error) error {
	z.closeCursor()
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		z.bad = err
	}
	return err
}

// restart starts inflating from the beginning.
func (z *inflated) restart() {
	z.closeCursor()
	z.cur = &cursor{
		fr:  flate.NewReader(bufio.NewReaderSize(io.NewSectionReader(z.data, 0, z.data.Size()), inflateBuf)),
		sum: crc32.NewIEEE(),
	}
}

func (z *inflated) closeCursor() {
	if z.cur != nil {
		z.cur.fr.Close()
		z.cur = nil
	}
}

// Close releases the flate state.
func (z *inflated) Close() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.closeCursor()
	return nil
}
