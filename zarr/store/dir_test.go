package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
)

func openDir(t *testing.T, readOnly bool) (*store.Dir, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := store.OpenDir(dir, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func TestDirPutGetDelete(t *testing.T) {
	ctx := context.Background()
	s, dir := openDir(t, false)
	put, err := s.Put(ctx, "a/b/c/0/1", [][]byte{[]byte("hello "), nil, []byte("world")}, store.Cond{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.ReadAll(ctx, s, "a/b/c/0/1")
	if err != nil || string(got) != "hello world" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	for _, c := range []struct {
		span store.Span
		want string
	}{
		{store.Range(6, 5), "world"},
		{store.Range(6, -1), "world"},
		{store.Last(5), "world"},
		{store.Last(100), "hello world"},
		{store.All, "hello world"},
	} {
		b, info, err := s.Get(ctx, "a/b/c/0/1", c.span, store.Cond{})
		if err != nil || string(b) != c.want || info.Size != 11 || info.Generation != put.Generation {
			t.Errorf("Get(%+v) = %q, %+v, %v; want %q of the value Put described (%+v)", c.span, b, info, err, c.want, put)
		}
	}
	if _, _, err := s.Get(ctx, "a/b/c/0/1", store.Range(6, 6), store.Cond{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Get past the end: %v, want ErrUnexpectedEOF", err)
	}
	info, err := s.Stat(ctx, "a/b/c/0/1")
	if err != nil || info.Size != 11 || info.Generation != put.Generation {
		t.Fatalf("Stat = %+v, %v; Put said %+v", info, err, put)
	}
	if err := store.Write(ctx, s, "a/b/c/0/1", []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	info2, _ := s.Stat(ctx, "a/b/c/0/1")
	if info2.Generation == info.Generation {
		t.Fatalf("Generation unchanged after Put: %s", info.Generation)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Join(dir, "a/b/c/0"))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want 1: %v", len(entries), entries)
	}
	if err := s.Delete(ctx, "a/b/c/0/1", store.Cond{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ReadAll(ctx, s, "a/b/c/0/1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "a/b/c/0/1", store.Cond{}); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if _, err := store.ReadAll(ctx, s, "a/b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a directory: %v, want ErrNotFound", err)
	}
}

func TestDirList(t *testing.T) {
	ctx := context.Background()
	s, _ := openDir(t, false)
	keys := []string{"zarr.json", "x/zarr.json", "x/c/0/0", "x/c/0/1", "x/c/1/0", "y/.zarray", "y/0.0"}
	for _, k := range keys {
		if err := store.Write(ctx, s, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	for k, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, k)
	}
	slices.Sort(all)
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("List = %v, want %v", all, want)
	}
	var under []string
	for k, err := range s.List(ctx, "x/c/") {
		if err != nil {
			t.Fatal(err)
		}
		under = append(under, k)
	}
	if !slices.Equal(under, []string{"x/c/0/0", "x/c/0/1", "x/c/1/0"}) {
		t.Fatalf("List(x/c/) = %v", under)
	}
	var names []string
	for e, err := range s.ListDir(ctx, "x") {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, e.Name+map[bool]string{true: "/", false: ""}[e.Dir])
	}
	if !slices.Equal(names, []string{"c/", "zarr.json"}) {
		t.Fatalf("ListDir(x) = %v", names)
	}
	for range s.ListDir(ctx, "missing") {
		t.Fatal("ListDir of a missing prefix yielded an entry")
	}
}

func TestDirRefusesEscapes(t *testing.T) {
	ctx := context.Background()
	s, dir := openDir(t, false)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "leak")); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "in"), 0o755)
	os.WriteFile(filepath.Join(dir, "in", "v"), []byte("inside"), 0o644)
	if err := os.Symlink("in", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	// Links out of the store are listed (so that reading them fails with
	// a reason, instead of the values silently missing), as what they
	// lead to.
	listed := map[string]bool{}
	for e, err := range s.ListDir(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		listed[e.Name] = e.Dir
	}
	if dir, ok := listed["out"]; !ok || !dir {
		t.Errorf("ListDir lists the link to a directory out of the store as %v (listed: %v), want a directory", dir, ok)
	}
	if dir, ok := listed["leak"]; !ok || dir {
		t.Errorf("ListDir lists the link to a file out of the store as a directory: %v (listed: %v)", dir, ok)
	}
	var listErr error
	for _, err := range s.ListDir(ctx, "out") {
		listErr = err
	}
	if !errors.Is(listErr, store.ErrInvalidKey) {
		t.Errorf("ListDir(out): %v, want ErrInvalidKey", listErr)
	}
	for _, key := range []string{"../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\\b", "out/secret", "leak", ""} {
		if _, err := store.ReadAll(ctx, s, key); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		// Put renames onto the name itself, so replacing the link "leak"
		// stays inside the store; every other key must be refused.
		if err := store.Write(ctx, s, key, []byte("x")); err == nil && key != "leak" {
			t.Errorf("Put(%q) succeeded", key)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "secret" {
		t.Fatalf("the file outside the store changed: %q %v", b, err)
	}
	if b, err := store.ReadAll(ctx, s, "alias/v"); err != nil || string(b) != "inside" {
		t.Fatalf("symlink inside the store: %q, %v", b, err)
	}
}

func TestDirReadOnly(t *testing.T) {
	ctx := context.Background()
	s, dir := openDir(t, true)
	os.WriteFile(filepath.Join(dir, "k"), []byte("v"), 0o644)
	if err := store.Write(ctx, s, "k", []byte("w")); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Put on a read-only store: %v", err)
	}
	if _, err := s.Put(ctx, "k", [][]byte{[]byte("w")}, store.Cond{IfNoneMatch: store.AnyGeneration}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("conditional Put on a read-only store: %v", err)
	}
	if err := s.Delete(ctx, "k", store.Cond{}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Delete on a read-only store: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "k")); !bytes.Equal(b, []byte("v")) {
		t.Fatalf("value changed: %q", b)
	}
}

func TestDirOpen(t *testing.T) {
	ctx := context.Background()
	s, _ := openDir(t, false)
	store.Write(ctx, s, "shard", []byte("0123456789"))
	f, err := s.Open(ctx, "shard")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 4); err != nil || string(buf) != "456" {
		t.Fatalf("ReadAt = %q, %v", buf, err)
	}
	if info, _ := s.Stat(ctx, "shard"); f.Info() != info {
		t.Fatalf("Info() = %+v, Stat = %+v", f.Info(), info)
	}
}

func TestDirConformance(t *testing.T) {
	s, _ := openDir(t, false)
	storetest.Run(t, s)
	// The optimistic loop of store.Update, as on object stores.
	s2, _ := openDir(t, false)
	storetest.Run(t, optimistic{s2})
}

// TestDirWholeValueBound: a whole read of a value larger than MaxValueSize
// (here a sparse file) fails with ErrTooLarge naming the key, without
// allocating it; ranges of it still read.
func TestDirWholeValueBound(t *testing.T) {
	ctx := context.Background()
	s, dir := openDir(t, false)
	if err := os.WriteFile(filepath.Join(dir, "big"), []byte("head"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "big"), store.MaxValueSize+1); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ReadAll(ctx, s, "big"); !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "big") {
		t.Errorf("ReadAll of a value of MaxValueSize+1 bytes: %v, want ErrTooLarge naming the key", err)
	}
	if b, _, err := s.Get(ctx, "big", store.Range(0, 4), store.Cond{}); err != nil || string(b) != "head" {
		t.Errorf("a range of it: %q, %v", b, err)
	}
}

func TestSpanReadBody(t *testing.T) {
	span := store.Span{Length: -1, Max: 8}
	if _, _, err := span.ReadBody(strings.NewReader("0123456789"), 10); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("declared 10 bytes, at most 8: %v", err)
	}
	if _, _, err := span.ReadBody(strings.NewReader("0123456789"), -1); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("undeclared 10 bytes, at most 8: %v", err)
	}
	if parts, n, err := span.ReadBody(strings.NewReader("01234567"), -1); err != nil || n != 8 || len(parts) != 1 || string(parts[0]) != "01234567" {
		t.Errorf("8 bytes, at most 8: %q, %d, %v", parts, n, err)
	}
}

// TestDirPrune: after deletes, Prune removes the directories that held
// only the deleted keys, up to stop, and nothing else: a directory that
// still holds a file (a key, or a user's) stops it, a symbolic link is
// neither removed nor followed, and stop itself stays.
func TestDirPrune(t *testing.T) {
	ctx := context.Background()
	s, dir := openDir(t, false)
	for _, key := range []string{"g/a/c/0/0", "g/a/c/1/0", "g/b/c/0/0", "other/x/y/z"} {
		if _, err := s.Put(ctx, key, [][]byte{[]byte(key)}, store.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	// g/b/c/1 leads to an empty directory elsewhere.
	if err := os.MkdirAll(filepath.Join(dir, "other", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "..", "other", "empty"), filepath.Join(dir, "g", "b", "c", "1")); err != nil {
		t.Fatal(err)
	}
	del := func(key, stop string) {
		t.Helper()
		if err := s.Delete(ctx, key, store.Cond{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Prune(key, stop); err != nil {
			t.Fatalf("Prune(%s, %s): %v", key, stop, err)
		}
	}
	exists := func(p string) bool {
		_, err := os.Lstat(filepath.Join(dir, p))
		return err == nil
	}
	del("g/a/c/0/0", "g")
	if exists("g/a/c/0") || !exists("g/a/c/1/0") {
		t.Errorf("after deleting g/a/c/0/0: g/a/c/0 exists %v, g/a/c/1/0 exists %v; want the empty directory gone, the other key kept", exists("g/a/c/0"), exists("g/a/c/1/0"))
	}
	del("g/a/c/1/0", "g")
	if exists("g/a") || !exists("g") {
		t.Errorf("after deleting g/a's last key: g/a exists %v, g (stop) exists %v", exists("g/a"), exists("g"))
	}
	del("g/b/c/0/0", "")
	if !exists("g/b/c/1") || !exists("other/empty") || exists("g/b/c/0") {
		t.Errorf("g/b/c holds a link: link kept %v, its target kept %v, g/b/c/0 removed %v", exists("g/b/c/1"), exists("other/empty"), !exists("g/b/c/0"))
	}
	if err := s.Prune("g/b/c/1/k", ""); err != nil || !exists("other/empty") {
		t.Errorf("Prune through a link: %v; its target kept %v", err, exists("other/empty"))
	}
	if err := s.Prune("other/x/y/z", "g"); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("Prune of a key not below stop: %v; want ErrInvalidKey", err)
	}
	if !exists("other/x/y/z") {
		t.Errorf("Prune removed a key")
	}
	// Keys deleted together, then pruned one by one (as a node delete does).
	for _, key := range []string{"h/c/0/0", "h/c/0/1"} {
		if _, err := s.Put(ctx, key, [][]byte{[]byte(key)}, store.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"h/c/0/0", "h/c/0/1"} {
		if err := s.Delete(ctx, key, store.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"h/c/0/0", "h/c/0/1"} {
		if err := s.Prune(key, ""); err != nil {
			t.Errorf("Prune(%s) after its directory went with another key: %v", key, err)
		}
	}
	if exists("h") {
		t.Errorf("h, which held only deleted keys, is left")
	}
	// A Put into a directory a Prune removed makes it again.
	if _, err := s.Put(ctx, "g/a/c/0/0", [][]byte{[]byte("again")}, store.Cond{}); err != nil {
		t.Fatal(err)
	}
}
