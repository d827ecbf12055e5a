package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
)

// increment adds one to the decimal counter at key under the update lock.
func increment(ctx context.Context, s store.Store, key string) error {
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

// TestUpdateHelperProcess is the body of the other processes of
// TestUpdateLosesNothing; it does nothing in a normal run.
func TestUpdateHelperProcess(t *testing.T) {
	dir := os.Getenv("ZARRFS_UPDATE_HELPER_DIR")
	if dir == "" {
		return
	}
	s, err := store.OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := increment(context.Background(), s, "c/0/0"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpdateLosesNothing increments one key from goroutines of this process
// and from two other processes at once; every increment must count, and
// readers must only ever see whole values.
func TestUpdateLosesNothing(t *testing.T) {
	ctx := context.Background()
	s, dir := openDir(t, false)
	var procs []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUpdateHelperProcess$")
		cmd.Env = append(os.Environ(), "ZARRFS_UPDATE_HELPER_DIR="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				readerErr <- nil
				return
			default:
			}
			b, err := store.ReadAll(ctx, s, "c/0/0")
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if _, perr := strconv.Atoi(string(b)); err != nil || perr != nil {
				readerErr <- fmt.Errorf("reader saw %q, %v", b, err)
				return
			}
		}
	}()
	for range 4 {
		wg.Go(func() {
			for i := 0; i < 50; i++ {
				if err := increment(ctx, s, "c/0/0"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	close(stop)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	b, err := store.ReadAll(ctx, s, "c/0/0")
	if err != nil || string(b) != "400" {
		t.Fatalf("counter = %q, %v; want 400 (4x50 here + 2x100 in other processes)", b, err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "c", "0"))
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

func TestUpdateChanges(t *testing.T) {
	ctx := context.Background()
	s, dir := openDir(t, false)
	store.Write(ctx, s, "k", []byte("0123456789"))
	patch := func(cur store.Object) (store.Change, error) {
		return store.Change{Patches: []store.Patch{{Offset: 2, Data: []byte("ab")}, {Offset: 8, Data: []byte("z")}}}, nil
	}
	if err := s.Update(ctx, "k", patch); err != nil {
		t.Fatal(err)
	}
	if b, _ := store.ReadAll(ctx, s, "k"); string(b) != "01ab4567z9" {
		t.Fatalf("after patches: %q", b)
	}
	keep := func(cur store.Object) (store.Change, error) { return store.Change{}, nil }
	if err := s.Update(ctx, "k", keep); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.Update(ctx, "k", func(store.Object) (store.Change, error) { return store.Change{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	if b, _ := store.ReadAll(ctx, s, "k"); string(b) != "01ab4567z9" {
		t.Fatalf("a kept or failed update changed the value: %q", b)
	}
	del := func(cur store.Object) (store.Change, error) { return store.Change{Delete: true}, nil }
	if err := s.Update(ctx, "k", del); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ReadAll(ctx, s, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	var sawNil bool
	s.Update(ctx, "new/key", func(cur store.Object) (store.Change, error) {
		sawNil = cur == nil
		return store.Change{Value: [][]byte{[]byte("v")}}, nil
	})
	if b, _ := store.ReadAll(ctx, s, "new/key"); !sawNil || string(b) != "v" {
		t.Fatalf("create through Update: nil=%v value=%q", sawNil, b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("lock files left behind: %v", entries)
	}
	ro, _ := openDir(t, true)
	if err := store.Update(ctx, ro, "k", keep); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Update on a read-only store: %v", err)
	}
}

// optimistic hides a Dir's lock, so that Update runs its optimistic loop
// of conditional writes, as on an object store.
type optimistic struct{ storetest.Store }

// The optimistic loop loses no update either: writers that lose a race
// read again and retry.
func TestUpdateOptimisticLosesNothing(t *testing.T) {
	ctx := context.Background()
	dir, _ := openDir(t, false)
	s := optimistic{dir}
	if _, ok := store.Store(s).(store.Updater); ok {
		t.Fatal("the wrapper still exposes the lock")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				if err := increment(ctx, s, "n"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b, err := store.ReadAll(ctx, s, "n"); err != nil || string(b) != "100" {
		t.Fatalf("counter = %q, %v; want 100", b, err)
	}
	patch := func(cur store.Object) (store.Change, error) {
		return store.Change{Patches: []store.Patch{{Offset: 1, Data: []byte("9")}}}, nil
	}
	if err := store.Update(ctx, s, "n", patch); err != nil {
		t.Fatal(err)
	}
	if b, _ := store.ReadAll(ctx, s, "n"); string(b) != "190" {
		t.Fatalf("after a patch: %q", b)
	}
	outside := func(cur store.Object) (store.Change, error) {
		return store.Change{Patches: []store.Patch{{Offset: 2, Data: []byte("99")}}}, nil
	}
	if err := store.Update(ctx, s, "n", outside); err == nil {
		t.Fatal("a patch past the end of the value was applied")
	}
}

// WriteParts must write more parts than one vectored write takes, skip
// empty ones, and start at the offset it is given.
func TestWriteParts(t *testing.T) {
	var parts [][]byte
	for i := range 3000 {
		switch {
		case i%7 == 0:
			parts = append(parts, nil)
		case i%500 == 0:
			parts = append(parts, bytes.Repeat([]byte{byte(i)}, 100<<10))
		default:
			parts = append(parts, bytes.Repeat([]byte{byte(i)}, i%13+1))
		}
	}
	want := append([]byte("head"), bytes.Join(parts, nil)...)
	f, err := os.Create(filepath.Join(t.TempDir(), "parts"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("head")); err != nil {
		t.Fatal(err)
	}
	n, err := store.WriteParts(f, 4, parts)
	if err != nil || n != int64(len(want)-4) {
		t.Fatalf("WriteParts wrote %d bytes (%v), want %d", n, err, len(want)-4)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes (%v), want the %d bytes of the parts after the head", len(got), err, len(want))
	}
}

// TestUpdateNeverWritesThroughLinks: an update of a key whose file has
// another hard link (a snapshot made with cp -al outside the store) or
// is a symbolic link to another key changes that key alone, patches
// included; a key with a symbolic link on the way, or whose lock file is
// a link planted to another file, is refused naming it, and nothing
// changes; no write creates a file through a dangling link.
func TestUpdateNeverWritesThroughLinks(t *testing.T) {
	ctx := context.Background()
	s, dir := openDir(t, false)
	snapshot := t.TempDir()
	path := func(key string) string { return filepath.Join(dir, filepath.FromSlash(key)) }
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	patch := func(cur store.Object) (store.Change, error) {
		return store.Change{Patches: []store.Patch{{Offset: 2, Data: []byte("XY")}}}, nil
	}
	replace := func(cur store.Object) (store.Change, error) {
		return store.Change{Value: [][]byte{[]byte("new")}}, nil
	}
	for _, key := range []string{"a/c/0", "b/c/0", "b/c/1", "d/c/0"} {
		if err := store.Write(ctx, s, key, []byte("0123456789")); err != nil {
			t.Fatal(err)
		}
	}
	// a/c/0 hard-linked outside the store.
	if err := os.Link(path("a/c/0"), filepath.Join(snapshot, "0")); err != nil {
		t.Fatal(err)
	}
	// d/c/0 a symbolic link to b/c/0.
	os.Remove(path("d/c/0"))
	if err := os.Symlink("../../b/c/0", path("d/c/0")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a/c/0", "d/c/0"} {
		if err := s.Update(ctx, key, patch); err != nil {
			t.Fatalf("patch %s: %v", key, err)
		}
		if got := read(path(key)); got != "01XY456789" {
			t.Errorf("%s after a patch: %q", key, got)
		}
		if fi, err := os.Lstat(path(key)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s after a patch: %v, %v; want a file of its own", key, fi.Mode(), err)
		}
	}
	if got := read(filepath.Join(snapshot, "0")); got != "0123456789" {
		t.Errorf("the snapshot's hard link changed: %q", got)
	}
	if got := read(path("b/c/0")); got != "0123456789" {
		t.Errorf("the key the symbolic link led to changed: %q", got)
	}

	// A directory on the way that is a symbolic link to another array's.
	if err := os.Symlink("../b/c", path("e")); err != nil {
		t.Fatal(err)
	}
	for what, write := range map[string]func() error{
		"Put":           func() error { return store.Write(ctx, s, "e/1", []byte("new")) },
		"Put a new key": func() error { return store.Write(ctx, s, "e/2", []byte("new")) },
		"patch":         func() error { return s.Update(ctx, "e/1", patch) },
		"Update":        func() error { return s.Update(ctx, "e/1", replace) },
		"Delete":        func() error { return s.Delete(ctx, "e/1", store.Cond{}) },
	} {
		if err := write(); !errors.Is(err, store.ErrInvalidKey) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s through a linked directory: %v, want ErrInvalidKey naming the link", what, err)
		}
	}
	if got := read(path("b/c/1")); got != "0123456789" {
		t.Errorf("writes through a linked directory changed its file: %q", got)
	}
	if _, err := os.Lstat(path("b/c/2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a write through a linked directory created a file: %v", err)
	}

	// Lock files planted as links: to b/c/1 (symbolic, and hard), and
	// dangling to a file the update would create.
	os.Symlink("1", path("b/c/0.__lock"))
	if err := os.Link(path("b/c/1"), path("a/c/0.__lock")); err != nil {
		t.Fatal(err)
	}
	os.Symlink("9", path("b/c/5.__lock"))
	for key, want := range map[string]string{"b/c/0": "symbolic link", "a/c/0": "2 links", "b/c/5": "symbolic link"} {
		for _, fn := range []func(store.Object) (store.Change, error){patch, replace} {
			if err := s.Update(ctx, key, fn); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), key+".__lock") {
				t.Errorf("update of %s with a planted lock file: %v, want an error naming it saying %q", key, err, want)
			}
		}
	}
	if got := read(path("b/c/1")); got != "0123456789" {
		t.Errorf("a planted lock file's target changed: %q", got)
	}
	if _, err := os.Lstat(path("b/c/9")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an update created a file through a dangling lock link: %v", err)
	}
}
