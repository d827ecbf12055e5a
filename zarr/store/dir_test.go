package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
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
	if err := s.Put(ctx, "a/b/c/0/1", []byte("hello world")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "a/b/c/0/1")
	if err != nil || string(got) != "hello world" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	part, err := s.GetRange(ctx, "a/b/c/0/1", 6, 5)
	if err != nil || string(part) != "world" {
		t.Fatalf("GetRange = %q, %v", part, err)
	}
	tail, err := s.GetRange(ctx, "a/b/c/0/1", 6, -1)
	if err != nil || string(tail) != "world" {
		t.Fatalf("GetRange to end = %q, %v", tail, err)
	}
	if _, err := s.GetRange(ctx, "a/b/c/0/1", 6, 6); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("GetRange past the end: %v, want ErrUnexpectedEOF", err)
	}
	info, err := s.Stat(ctx, "a/b/c/0/1")
	if err != nil || info.Size != 11 || info.Version == "" {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
	if err := s.Put(ctx, "a/b/c/0/1", []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	info2, _ := s.Stat(ctx, "a/b/c/0/1")
	if info2.Version == info.Version {
		t.Fatalf("Version unchanged after Put: %s", info.Version)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Join(dir, "a/b/c/0"))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want 1: %v", len(entries), entries)
	}
	if err := s.Delete(ctx, "a/b/c/0/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a/b/c/0/1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "a/b/c/0/1"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if _, err := s.Get(ctx, "a/b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a directory: %v, want ErrNotFound", err)
	}
}

func TestDirList(t *testing.T) {
	ctx := context.Background()
	s, _ := openDir(t, false)
	keys := []string{"zarr.json", "x/zarr.json", "x/c/0/0", "x/c/0/1", "x/c/1/0", "y/.zarray", "y/0.0"}
	for _, k := range keys {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
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
	for e, err := range s.ListDir(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		if e.Name == "out" || e.Name == "leak" {
			t.Errorf("ListDir shows %q, which leads out of the store", e.Name)
		}
	}
	for _, key := range []string{"../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\\b", "out/secret", "leak", ""} {
		if _, err := s.Get(ctx, key); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		// Put renames onto the name itself, so replacing the link "leak"
		// stays inside the store; every other key must be refused.
		if err := s.Put(ctx, key, []byte("x")); err == nil && key != "leak" {
			t.Errorf("Put(%q) succeeded", key)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "secret" {
		t.Fatalf("the file outside the store changed: %q %v", b, err)
	}
	if b, err := s.Get(ctx, "alias/v"); err != nil || string(b) != "inside" {
		t.Fatalf("symlink inside the store: %q, %v", b, err)
	}
}

func TestDirReadOnly(t *testing.T) {
	ctx := context.Background()
	s, dir := openDir(t, true)
	os.WriteFile(filepath.Join(dir, "k"), []byte("v"), 0o644)
	if err := s.Put(ctx, "k", []byte("w")); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Put on a read-only store: %v", err)
	}
	if err := s.Delete(ctx, "k"); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Delete on a read-only store: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "k")); !bytes.Equal(b, []byte("v")) {
		t.Fatalf("value changed: %q", b)
	}
}

func TestDirOpenFd(t *testing.T) {
	ctx := context.Background()
	s, _ := openDir(t, false)
	s.Put(ctx, "shard", []byte("0123456789"))
	f, err := s.Open(ctx, "shard")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, ok := f.(store.FdFile)
	if !ok || fd.Fd() == 0 {
		t.Fatalf("Dir files are not FdFile: %T", f)
	}
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 4); err != nil || string(buf) != "456" {
		t.Fatalf("ReadAt = %q, %v", buf, err)
	}
	if f.Info().Size != 10 {
		t.Fatalf("Info().Size = %d", f.Info().Size)
	}
}
