package requests_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
)

// TestReadSelection: an answer gives the bytes asked for, or an error
// saying why; wrong answers are retried, a value shorter than the range
// is not.
func TestReadSelection(t *testing.T) {
	const value = "hello world" // 11 bytes
	for _, c := range []struct {
		name         string
		span         store.Span
		body         string
		declared     int64
		contentRange string
		want         string
		retry, eof   bool // the error is Retryable, wraps io.ErrUnexpectedEOF
		fails        bool
	}{
		{name: "206", span: store.Range(6, 5), body: "world", declared: 5, contentRange: "bytes 6-10/11", want: "world"},
		{name: "suffix", span: store.Last(5), body: "world", declared: 5, contentRange: "bytes 6-10/11", want: "world"},
		{name: "suffix longer than the value", span: store.Last(50), body: value, declared: 11, contentRange: "bytes 0-10/11", want: value},
		{name: "200 for a range", span: store.Range(6, 5), body: value, declared: 11, want: "world"},
		{name: "unknown size", span: store.Range(6, 5), body: "world", declared: -1, contentRange: "bytes 6-10/*", want: "world"},
		{name: "past the end", span: store.Range(6, 6), body: "world", declared: 5, contentRange: "bytes 6-10/11", fails: true, eof: true},
		{name: "another range", span: store.Range(6, 5), body: "hello", declared: 5, contentRange: "bytes 0-4/11", fails: true, retry: true},
		{name: "body shorter than its range", span: store.Range(6, 5), body: "wor", declared: 3, contentRange: "bytes 6-10/11", fails: true, retry: true, eof: true},
		{name: "body longer than announced", span: store.Range(6, 5), body: "world!", declared: 5, contentRange: "bytes 6-10/11", fails: true, retry: true, eof: true},
		{name: "body shorter than announced", span: store.Range(6, 5), body: "wor", declared: 5, contentRange: "bytes 6-10/11", fails: true, retry: true, eof: true},
		{name: "more announced than asked", span: store.Range(6, 5), body: "world", declared: 5000, contentRange: "bytes 6-10/11", fails: true, retry: true},
		{name: "unreadable Content-Range", span: store.Range(6, 5), body: "world", declared: 5, contentRange: "bytes 10-6/11", fails: true, retry: true},
	} {
		b, err := requests.ReadSelection(c.span, strings.NewReader(c.body), c.declared, c.contentRange)
		switch {
		case c.fails && err == nil:
			t.Errorf("%s: %q, want an error", c.name, b)
		case !c.fails && (err != nil || string(b) != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, b, err, c.want)
		case c.fails && (requests.IsRetryable(err) != c.retry || errors.Is(err, io.ErrUnexpectedEOF) != c.eof):
			t.Errorf("%s: %v: retryable %v, EOF %v; want %v, %v", c.name, err, requests.IsRetryable(err), errors.Is(err, io.ErrUnexpectedEOF), c.retry, c.eof)
		}
	}
}
