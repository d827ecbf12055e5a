package requests

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// A write whose attempt failed without an answer that says what the
// server did (a timeout, a reset, an answer cut short, a 5xx) may have
// been applied all the same. A retry conditional on the value's former
// state (If-None-Match: *, If-Match, GCS's ifGenerationMatch) is then
// refused because of that first attempt's own write: 412 (Azure: 409),
// or 404 to a delete. Put and Delete settle such a refusal by reading
// what the store holds: the write succeeded when the value is what was
// written (a delete: when the value is gone). A refusal of a first
// attempt, or of a write whose attempts all had answers, stands.

// Put runs put, one attempt of an upload to key on condition of the
// value parts make one after another, as Do does, and returns the
// uploaded value's Info. A retry refused by its condition
// (store.ErrPrecondition) after an attempt whose outcome is unknown
// succeeded when r then holds that value at key; the Info is then the
// one read.
func (c *Client) Put(ctx context.Context, r store.Reader, key string, parts [][]byte, put func(ctx context.Context) (store.Info, error)) (store.Info, error) {
	var info store.Info
	unknown := false
	err := c.Do(ctx, "PUT "+key, func(ctx context.Context) error {
		var err error
		info, err = put(ctx)
		unknown = unknown || IsRetryable(err)
		return err
	})
	if err == nil || !unknown || !errors.Is(err, store.ErrPrecondition) {
		return info, err
	}
	// A longer value is not the one written: refused before its bytes come.
	size := store.TotalLen(parts)
	held, cur, rerr := r.Get(ctx, key, store.Span{Length: -1, Max: max(size, 1)}, store.Cond{})
	switch {
	case rerr == nil && equalParts(held, parts):
		c.limits.Logger.Info("a retried write was refused for the value its own earlier attempt stored: it succeeded", "key", key, "refusal", err)
		cur.Size = size
		return cur, nil
	case rerr != nil && !errors.Is(rerr, store.ErrNotFound) && !errors.Is(rerr, store.ErrTooLarge):
		return store.Info{}, fmt.Errorf("%w; reading it to tell whether an earlier attempt, whose answer was lost, stored it: %v", err, rerr)
	}
	return store.Info{}, err
}

// Delete runs del, one attempt of a delete of key on condition cond, as
// Do does. A missing value is no error unless cond requires a generation.
// A retry refused (store.ErrPrecondition) or answered store.ErrNotFound
// after an attempt whose outcome is unknown succeeded when r no longer
// holds key.
func (c *Client) Delete(ctx context.Context, r store.Reader, key string, cond store.Cond, del func(ctx context.Context) error) error {
	unknown := false
	err := c.Do(ctx, "DELETE "+key, func(ctx context.Context) error {
		err := del(ctx)
		unknown = unknown || IsRetryable(err)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound) && cond.IfMatch == "":
		return nil
	case unknown && (errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrNotFound)):
		_, serr := r.Stat(ctx, key)
		if errors.Is(serr, store.ErrNotFound) {
			c.limits.Logger.Info("a retried delete was refused after its own earlier attempt deleted the value: it succeeded", "key", key, "refusal", err)
			return nil
		}
		if serr != nil {
			return fmt.Errorf("%w; looking whether an earlier attempt, whose answer was lost, deleted it: %v", err, serr)
		}
	}
	return err
}

// equalParts reports whether b is the parts one after another.
func equalParts(b []byte, parts [][]byte) bool {
	if int64(len(b)) != store.TotalLen(parts) {
		return false
	}
	for _, p := range parts {
		if !bytes.Equal(b[:len(p)], p) {
			return false
		}
		b = b[len(p):]
	}
	return true
}
