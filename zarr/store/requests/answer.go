package requests

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// ReadSelection reads the answer to a GET of span: the body of a 206 with
// its Content-Range, or a 200's whole value, of declared length (-1:
// unknown), and returns the span's bytes. An answer that does not hold
// what was asked for (a body cut short, longer than announced or than the
// range, another range than asked for) is refused, Retryable; a range past
// the value's end is io.ErrUnexpectedEOF, as the value is shorter.
func ReadSelection(span store.Span, body io.Reader, declared int64, contentRange string) ([]byte, error) {
	asked := span.Suffix
	if asked == 0 {
		asked = span.Length
	}
	if contentRange != "" && asked > 0 && declared > asked {
		return nil, Retryable(fmt.Errorf("%d bytes announced for a range of %d", declared, asked))
	}
	parts, got, err := span.ReadBody(body, declared)
	if err != nil {
		return nil, err // the transport marked a cut body Retryable
	}
	if declared >= 0 && got != declared {
		return nil, Retryable(fmt.Errorf("got %d of %d bytes: %w", got, declared, io.ErrUnexpectedEOF))
	}
	// The selection: parts[0] whole, the first of span.Bufs or a slice of
	// the one buffer read.
	b := parts[0]
	if contentRange == "" { // the whole value
		off, n, err := span.Resolve(got)
		if err != nil {
			return nil, err
		}
		if len(parts) == 1 {
			return b[off : off+n], nil
		}
		if off != 0 || n != got { // not what span.Bufs are for
			return nil, fmt.Errorf("the whole value, %d bytes, read into buffers for [%d, %d+%d)", got, span.Offset, span.Offset, span.Length)
		}
		return b, nil
	}
	first, last, size, ok := ContentRange(contentRange)
	if !ok {
		return nil, Retryable(fmt.Errorf("an answer with Content-Range %q", contentRange))
	}
	if got != last-first+1 {
		return nil, Retryable(fmt.Errorf("%d bytes for Content-Range %q: %w", got, contentRange, io.ErrUnexpectedEOF))
	}
	off, n := span.Offset, got
	switch {
	case size >= 0:
		if off, n, err = span.Resolve(size); err != nil {
			return nil, err
		}
	case span.Suffix > 0 || span.Length > 0 && n != span.Length:
		// Of a value of unknown size, only a whole range can be checked.
		return nil, fmt.Errorf("an answer with Content-Range %q for %+v", contentRange, span)
	}
	if first != off || got != n {
		return nil, Retryable(fmt.Errorf("bytes [%d, %d) sent for [%d, %d) of %d", first, last+1, off, off+n, size))
	}
	return b, nil
}

// ContentRange reads a Content-Range header, "bytes FIRST-LAST/SIZE"
// (SIZE -1 for "*").
func ContentRange(h string) (first, last, size int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes ")
	rng, total, slash := strings.Cut(spec, "/")
	a, b, dash := strings.Cut(rng, "-")
	if !found || !slash || !dash {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	first, err1 = strconv.ParseInt(a, 10, 64)
	last, err2 = strconv.ParseInt(b, 10, 64)
	size = -1
	if total != "*" {
		size, err3 = strconv.ParseInt(total, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first || size >= 0 && last >= size {
		return 0, 0, 0, false
	}
	return first, last, size, true
}

// Printable is what a server said (an error's code or message, the start
// of an error page) as one line of printable text, so that it can go into
// errors and logs.
func Printable(said string) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, strings.ToValidUTF8(said, " "))), " ")
}
