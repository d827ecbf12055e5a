package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Patch overwrites bytes of a value in place.
type Patch struct {
	Offset int64
	Data   []byte
}

// Change is what an update does to a value. The zero Change keeps it.
type Change struct {
	// Value replaces the value: its parts, one after another, are the new
	// value (a shard's inner chunks and index, written without joining
	// them first).
	Value [][]byte
	// Delete removes the value.
	Delete bool
	// Patches overwrite parts of the existing value instead, for updates
	// that keep its layout: in place where the store can (a local file),
	// by writing the patched value otherwise.
	Patches []Patch
}

// Updater is implemented by stores that read-modify-write a value under a
// lock that excludes every other updater of the key, in this process and
// in others; Update calls fn exactly once.
type Updater interface {
	Update(ctx context.Context, key string, fn func(cur Object) (Change, error)) error
}

// Update read-modify-writes the value at key without losing concurrent
// updates: fn gets the current value (nil when there is none) and returns
// the change to make. A store that locks (Updater) calls fn once under the
// key's lock. On any other store Update is an optimistic loop: read the
// value and its generation, call fn, write on condition that the value is
// still at that generation, and start again when another writer won the
// race; fn may then be called several times.
func Update(ctx context.Context, s Store, key string, fn func(cur Object) (Change, error)) error {
	w, ok := Writable(s)
	if !ok {
		return fmt.Errorf("%w: %s", ErrReadOnly, key)
	}
	if u, ok := s.(Updater); ok {
		return u.Update(ctx, key, fn)
	}
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := updateOnce(ctx, w, s, key, fn)
		if !errors.Is(err, ErrPrecondition) {
			return err
		}
		if attempt == maxUpdateAttempts {
			return fmt.Errorf("%s: other writers changed it %d times in a row: %w", key, attempt, err)
		}
		// Writers that lost together must not collide again together.
		wait := backoff/2 + rand.N(backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// maxUpdateAttempts bounds how often Update reads again after losing a race.
const maxUpdateAttempts = 20

// updateOnce is one round of the optimistic loop of Update.
func updateOnce(ctx context.Context, w Writer, s Reader, key string, fn func(cur Object) (Change, error)) error {
	cur, info, err := s.Get(ctx, key, All, Cond{})
	var obj Object
	cond := Cond{IfNoneMatch: AnyGeneration}
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	default:
		obj, cond = NewBytesObject(cur, info), Cond{IfMatch: info.Generation}
	}
	change, err := fn(obj)
	if err != nil {
		return err
	}
	switch {
	case change.Value != nil:
		_, err = w.Put(ctx, key, change.Value, cond)
	case change.Delete && obj != nil:
		err = w.Delete(ctx, key, cond)
	case len(change.Patches) > 0 && obj != nil:
		var patched []byte
		if patched, err = change.apply(cur); err == nil {
			_, err = w.Put(ctx, key, [][]byte{patched}, cond)
		}
	}
	return err
}

// apply returns a copy of value with the change's patches applied.
func (c Change) apply(value []byte) ([]byte, error) {
	out := bytes.Clone(value)
	for _, p := range c.Patches {
		if p.Offset < 0 || p.Offset+int64(len(p.Data)) > int64(len(out)) {
			return nil, fmt.Errorf("patch of %d bytes at %d lies outside the value's %d bytes", len(p.Data), p.Offset, len(out))
		}
		copy(out[p.Offset:], p.Data)
	}
	return out, nil
}
