package requests_test

import (
	"bytes"
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

// TestReadSelectionScatter: an answer read into several buffers (a span
// of chunks, each read into its own) fills them in order with no copy
// when it is the range asked for, lands elsewhere when it is more (a
// whole value), and is refused as ReadSelection refuses it into one
// buffer when it is not what was asked for.
func TestReadSelectionScatter(t *testing.T) {
	const value = "hello world" // 11 bytes
	for _, c := range []struct {
		name         string
		span         store.Span // with Bufs of sizes
		sizes        []int
		body         string
		declared     int64
		contentRange string
		into         bool // the answer went into the buffers
		retry, eof   bool // an error, Retryable, wrapping io.ErrUnexpectedEOF
		fails        bool
	}{
		{name: "206", span: store.Range(2, 8), sizes: []int{3, 0, 1, 4}, body: "llo worl", declared: 8, contentRange: "bytes 2-9/11", into: true},
		{name: "206 of unknown size", span: store.Range(2, 8), sizes: []int{3, 5}, body: "llo worl", declared: 8, contentRange: "bytes 2-9/*", into: true},
		{name: "206 of unknown length", span: store.Range(2, 8), sizes: []int{3, 5}, body: "llo worl", declared: -1, contentRange: "bytes 2-9/11"},
		{name: "200 of a value the range's length", span: store.Range(0, 11), sizes: []int{5, 6}, body: value, declared: 11, into: true},
		{name: "200 for a range", span: store.Range(2, 8), sizes: []int{3, 5}, body: value, declared: 11},
		{name: "another range", span: store.Range(2, 8), sizes: []int{3, 5}, body: "hello wo", declared: 8, contentRange: "bytes 0-7/11", fails: true, retry: true},
		{name: "body shorter than announced", span: store.Range(2, 8), sizes: []int{3, 5}, body: "llo w", declared: 8, contentRange: "bytes 2-9/11", fails: true, retry: true, eof: true},
		{name: "body shorter than the first buffer", span: store.Range(2, 8), sizes: []int{3, 5}, body: "l", declared: 8, contentRange: "bytes 2-9/11", fails: true, retry: true, eof: true},
		{name: "body longer than announced", span: store.Range(2, 8), sizes: []int{3, 5}, body: "llo world", declared: 8, contentRange: "bytes 2-9/11", fails: true, retry: true, eof: true},
		{name: "shorter range announced", span: store.Range(2, 8), sizes: []int{3, 5}, body: "llo wor", declared: 7, contentRange: "bytes 2-8/11", fails: true, retry: true},
		{name: "past the end", span: store.Range(6, 6), sizes: []int{3, 3}, body: "world", declared: 5, contentRange: "bytes 6-10/11", fails: true, eof: true},
		{name: "whole value for a range to the end", span: store.Span{Offset: 2, Length: -1}, sizes: []int{4, 7}, body: value, declared: 11, fails: true},
	} {
		bufs := make([][]byte, len(c.sizes))
		for i, n := range c.sizes {
			bufs[i] = make([]byte, n)
		}
		c.span.Bufs = bufs
		b, err := requests.ReadSelection(c.span, strings.NewReader(c.body), c.declared, c.contentRange)
		want := value[max(c.span.Offset, 0):]
		if c.span.Length >= 0 {
			want = want[:min(int(c.span.Length), len(want))]
		}
		switch {
		case c.fails && err == nil:
			t.Errorf("%s: %q, want an error", c.name, b)
		case c.fails && (requests.IsRetryable(err) != c.retry || errors.Is(err, io.ErrUnexpectedEOF) != c.eof):
			t.Errorf("%s: %v: retryable %v, EOF %v; want %v, %v", c.name, err, requests.IsRetryable(err), errors.Is(err, io.ErrUnexpectedEOF), c.retry, c.eof)
		case c.fails:
		case err != nil:
			t.Errorf("%s: %v; want %q", c.name, err, want)
		case c.into && (&b[0] != &bufs[0][0] || string(bytes.Join(bufs, nil)) != want):
			t.Errorf("%s: %q returned, buffers %q; want %q read into the buffers", c.name, b, bufs, want)
		case !c.into && (&b[0] == &bufs[0][0] || string(b) != want):
			t.Errorf("%s: %q returned (into the buffers: %v); want %q in a buffer of its own", c.name, b, &b[0] == &bufs[0][0], want)
		}
	}
}
