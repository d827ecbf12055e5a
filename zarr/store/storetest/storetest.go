// Package storetest checks that a store keeps the contract of
// store.Store: spans, generations, conditions, listings and concurrent
// updates. Every store implementation runs it.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// Store is what Run checks: a store that lists and takes writes.
type Store interface {
	store.Store
	store.Lister
	store.Writer
}

// Run checks s, an empty writable store.
func Run(t *testing.T, s Store) {
	t.Run("Spans", func(t *testing.T) { spans(t, s) })
	t.Run("Conditions", func(t *testing.T) { conditions(t, s) })
	t.Run("Listing", func(t *testing.T) { listing(t, s) })
	if l, ok := s.(store.InfoLister); ok {
		t.Run("ListedGenerations", func(t *testing.T) { listedGenerations(t, s, l) })
	}
	t.Run("InvalidKeys", func(t *testing.T) { invalidKeys(t, s) })
	t.Run("UpdateLosesNothing", func(t *testing.T) { updateLosesNothing(t, s) })
}

func spans(t *testing.T, s Store) {
	ctx := context.Background()
	put, err := s.Put(ctx, "spans/v", [][]byte{[]byte("hello "), nil, []byte("world")}, store.Cond{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		span store.Span
		want string
	}{
		{store.Range(6, 5), "world"},
		{store.Range(6, -1), "world"},
		{store.Range(0, 1), "h"},
		{store.Last(5), "world"},
		{store.Last(100), "hello world"},
		{store.All, "hello world"},
	} {
		b, info, err := s.Get(ctx, "spans/v", c.span, store.Cond{})
		if err != nil || string(b) != c.want || info.Size != 11 || info.Generation != put.Generation {
			t.Errorf("Get(%+v) = %q, %+v, %v; want %q of the value Put described (%+v)", c.span, b, info, err, c.want, put)
		}
	}
	for _, span := range []store.Span{store.Range(6, 6), store.Range(20, 1)} {
		if _, _, err := s.Get(ctx, "spans/v", span, store.Cond{}); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Get(%+v) past the end: %v, want ErrUnexpectedEOF", span, err)
		}
	}
	bufs := [][]byte{make([]byte, 3), nil, make([]byte, 4)}
	if err := store.ReadScatter(ctx, s, "spans/v", put.Generation, bufs, 2); err != nil || string(bytes.Join(bufs, []byte("|"))) != "llo|| wor" {
		t.Errorf("ReadScatter of [2, 9) into 3, 0 and 4 bytes = %q, %v", bufs, err)
	}
	if err := store.ReadScatter(ctx, s, "spans/v", put.Generation, bufs, 5); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadScatter past the end: %v, want ErrUnexpectedEOF", err)
	}
	info, err := s.Stat(ctx, "spans/v")
	if err != nil || info.Size != 11 || info.Generation != put.Generation {
		t.Errorf("Stat = %+v, %v; Put said %+v", info, err, put)
	}
	if _, _, err := s.Get(ctx, "spans/missing", store.Last(4), store.Cond{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "spans/missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat of a missing key: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "spans/missing", store.Cond{}); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
}

// conditions: reads and writes hold against the generation a value is
// at, and a refused write changes nothing.
func conditions(t *testing.T, s Store) {
	ctx := context.Background()
	v1, err := s.Put(ctx, "cond/k", [][]byte{[]byte("one")}, store.Cond{IfNoneMatch: store.AnyGeneration})
	if err != nil {
		t.Fatalf("create-only Put of a new key: %v", err)
	}
	if _, err := s.Put(ctx, "cond/k", [][]byte{[]byte("two")}, store.Cond{IfNoneMatch: store.AnyGeneration}); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("create-only Put of an existing key: %v, want ErrPrecondition", err)
	}
	if _, err := s.Put(ctx, "cond/k", [][]byte{[]byte("two")}, store.Cond{IfMatch: `"other"`}); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("Put at another generation: %v, want ErrPrecondition", err)
	}
	if b, _ := store.ReadAll(ctx, s, "cond/k"); string(b) != "one" {
		t.Fatalf("refused writes changed the value to %q", b)
	}
	if _, _, err := s.Get(ctx, "cond/k", store.Last(2), store.Cond{IfNoneMatch: v1.Generation}); !errors.Is(err, store.ErrNotModified) {
		t.Fatalf("Get if changed of an unchanged value: %v, want ErrNotModified", err)
	}
	p := make([]byte, 2)
	if err := s.ReadAt(ctx, "cond/k", v1.Generation, p, 1); err != nil || string(p) != "ne" {
		t.Fatalf("ReadAt at the current generation = %q, %v", p, err)
	}
	v2, err := s.Put(ctx, "cond/k", [][]byte{[]byte("two!")}, store.Cond{IfMatch: v1.Generation})
	if err != nil || v2.Generation == v1.Generation {
		t.Fatalf("Put at the current generation: %+v, %v", v2, err)
	}
	if err := s.ReadAt(ctx, "cond/k", v1.Generation, p, 1); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("ReadAt at a replaced generation: %v, want ErrPrecondition", err)
	}
	if err := s.ReadAt(ctx, "cond/k", v2.Generation, p, 3); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadAt past the end: %v, want ErrUnexpectedEOF", err)
	}
	b, info, err := s.Get(ctx, "cond/k", store.All, store.Cond{IfMatch: v2.Generation})
	if err != nil || string(b) != "two!" || info.Generation != v2.Generation || info.Size != 4 {
		t.Fatalf("Get at the current generation = %q, %+v, %v", b, info, err)
	}
	if _, _, err := s.Get(ctx, "cond/k", store.All, store.Cond{IfNoneMatch: v1.Generation}); err != nil {
		t.Fatalf("Get if changed of a changed value: %v", err)
	}
	if err := s.Delete(ctx, "cond/k", store.Cond{IfMatch: v2.Generation}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "cond/k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after a conditional Delete: %v", err)
	}
}

func listing(t *testing.T, s Store) {
	ctx := context.Background()
	keys := []string{"list/zarr.json", "list/x/zarr.json", "list/x/c/0/0", "list/x/c/0/1", "list/x/c/1/0", "list/y/.zarray", "list/y/0.0", "list/x.y"}
	for _, k := range keys {
		if err := store.Write(ctx, s, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	for k, err := range s.List(ctx, "list") {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, k)
	}
	slices.Sort(all)
	want := slices.Sorted(slices.Values(keys))
	if !slices.Equal(all, want) {
		t.Errorf("List = %v, want %v", all, want)
	}
	var under []string
	for k, err := range s.List(ctx, "list/x/c/") {
		if err != nil {
			t.Fatal(err)
		}
		under = append(under, k)
	}
	if slices.Sort(under); !slices.Equal(under, []string{"list/x/c/0/0", "list/x/c/0/1", "list/x/c/1/0"}) {
		t.Errorf("List(list/x/c/) = %v", under)
	}
	var names []string
	for e, err := range s.ListDir(ctx, "list") {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, e.Name+map[bool]string{true: "/", false: ""}[e.Dir])
	}
	if !slices.Equal(names, []string{"x/", "x.y", "y/", "zarr.json"}) && !slices.Equal(names, []string{"x.y", "x/", "y/", "zarr.json"}) {
		t.Errorf("ListDir(list) = %v", names)
	}
	for range s.ListDir(ctx, "list/missing") {
		t.Error("ListDir of a missing prefix yielded an entry")
	}
}

func invalidKeys(t *testing.T, s Store) {
	ctx := context.Background()
	for _, key := range []string{"../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\\b", ""} {
		if _, err := store.ReadAll(ctx, s, key); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := store.Write(ctx, s, key, []byte("x")); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	for range s.ListDir(ctx, "../") {
		return
	}
	t.Error("ListDir(../) yielded nothing, not even an error")
}

// updateLosesNothing increments a counter from goroutines at once.
func updateLosesNothing(t *testing.T, s Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				if err := Increment(ctx, s, "update/n"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b, err := store.ReadAll(ctx, s, "update/n"); err != nil || string(b) != "40" {
		t.Fatalf("counter = %q, %v; want 40", b, err)
	}
}

// Increment adds one to the decimal counter at key with store.Update.
func Increment(ctx context.Context, s store.Store, key string) error {
	return store.Update(ctx, s, key, func(cur store.Object) (store.Change, error) {
		n := 0
		if cur != nil {
			b := make([]byte, cur.Info().Size)
			if _, err := cur.ReadAt(b, 0); err != nil && err != io.EOF {
				return store.Change{}, err
			}
			var err error
			if n, err = strconv.Atoi(string(b)); err != nil {
				return store.Change{}, fmt.Errorf("torn value %q", b)
			}
		}
		return store.Change{Value: [][]byte{[]byte(strconv.Itoa(n + 1))}}, nil
	})
}

// listedGenerations: a listing describes each value with the generation
// that reads return and condition on, so that one listing can tell which
// of many values changed (engine revalidation).
func listedGenerations(t *testing.T, s Store, l store.InfoLister) {
	ctx := context.Background()
	listed := func() map[string]store.Info {
		got := map[string]store.Info{}
		for v, err := range l.ListInfo(ctx, "gens") {
			if err != nil {
				t.Fatal(err)
			}
			got[v.Key] = v.Info
		}
		return got
	}
	put := map[string]store.Info{}
	for _, k := range []string{"gens/a/c/0", "gens/a/c/1"} {
		info, err := s.Put(ctx, k, [][]byte{[]byte(k)}, store.Cond{})
		if err != nil {
			t.Fatal(err)
		}
		put[k] = info
	}
	before := listed()
	if len(before) != len(put) {
		t.Fatalf("ListInfo = %v, want the keys of %v", before, put)
	}
	for k, info := range before {
		got, err := s.Stat(ctx, k)
		if err != nil || info.Generation == "" || info.Generation != got.Generation || info.Generation != put[k].Generation || info.Size != int64(len(k)) {
			t.Errorf("ListInfo describes %s as %+v; Stat says %+v (%v), Put said %+v", k, info, got, err, put[k])
		}
		if _, _, err := s.Get(ctx, k, store.Last(1), store.Cond{IfNoneMatch: info.Generation}); !errors.Is(err, store.ErrNotModified) {
			t.Errorf("Get of %s if changed from its listed generation %q: %v, want ErrNotModified", k, info.Generation, err)
		}
		p := make([]byte, 1)
		if err := s.ReadAt(ctx, k, info.Generation, p, 0); err != nil {
			t.Errorf("ReadAt of %s at its listed generation: %v", k, err)
		}
	}
	if _, err := s.Put(ctx, "gens/a/c/1", [][]byte{[]byte("replaced")}, store.Cond{}); err != nil {
		t.Fatal(err)
	}
	after := listed()
	if after["gens/a/c/0"].Generation != before["gens/a/c/0"].Generation || after["gens/a/c/1"].Generation == before["gens/a/c/1"].Generation {
		t.Errorf("after replacing gens/a/c/1, ListInfo = %v; before %v", after, before)
	}
}
