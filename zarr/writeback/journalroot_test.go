package writeback

import (
	"context"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// entries lists what is under dir, without following links.
func entries(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		out[rel] = d.Type()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRecoverLeavesWhatItDidNotMake: the journal directory of a store
// unpacked from an archive holds a directory without an owner file, one
// whose owner file zarrfs did not write, a link out of the store, and a
// marked journal with a FIFO for a segment and a file of the user's.
// Recover does not block on the FIFO, fails naming it, and removes
// nothing; once the segment is a file, it removes that journal's owner and
// segment only, and leaves every other entry where it was.
func TestRecoverLeavesWhatItDidNotMake(t *testing.T) {
	dir := t.TempDir()
	h, _ := newArray(t, dir, zstdInner)
	root := testJournalRoot(t, dir)
	j := root.String()
	for name, content := range map[string]string{
		"plain/notes.txt": "mine", "foreign/owner": "not zarrfs's", "foreign/00000001.wal": "",
		"marked/owner": legacyOwnerMagic, "marked/keep.txt": "mine too",
	} {
		p := filepath.Join(j, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	segment := filepath.Join(j, "marked", segmentName(1))
	if err := syscall.Mkfifo(segment, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../..", filepath.Join(j, "out")); err != nil {
		t.Fatal(err)
	}
	precious := t.TempDir() // beside the store, where the link leads
	if err := os.WriteFile(filepath.Join(precious, "thesis.tex"), []byte("years of work"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := entries(t, precious)
	before := entries(t, j)
	recover := func() error {
		done := make(chan error, 1)
		go func() {
			_, err := Recover(context.Background(), h, root, slog.New(slog.DiscardHandler))
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Recover blocked on a FIFO in a journal")
			return nil
		}
	}
	if err := recover(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Recover with a FIFO for a segment: %v, want an error naming it", err)
	}
	if after := entries(t, j); !maps.Equal(before, after) {
		t.Errorf("a failed Recover changed the journal directory: %v, was %v", after, before)
	}
	if err := os.Remove(segment); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segment, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := recover(); err != nil {
		t.Errorf("Recover: %v", err)
	}
	want := maps.Clone(before)
	delete(want, "marked/owner")
	delete(want, "marked/"+segmentName(1))
	if after := entries(t, j); !maps.Equal(want, after) {
		t.Errorf("after Recover the journal directory holds %v, want %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(want)))
	}
	if after := entries(t, precious); !maps.Equal(outside, after) {
		t.Errorf("Recover changed what is outside the store")
	}
}

// TestJournalRootUntrusted: a state directory that is a link, belongs to
// another user or that others can write is refused, and nothing is
// created through it.
func TestJournalRootUntrusted(t *testing.T) {
	for name, prepare := range map[string]func(t *testing.T, state string){
		"link": func(t *testing.T, state string) {
			if err := os.Symlink(t.TempDir(), state); err != nil {
				t.Fatal(err)
			}
		},
		"writable": func(t *testing.T, state string) {
			if err := os.Mkdir(state, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(state, 0o770); err != nil {
				t.Fatal(err)
			}
		},
		"other-owner": func(t *testing.T, state string) {
			if os.Geteuid() != 0 {
				t.Skip("chown needs root")
			}
			if err := os.Mkdir(state, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(state, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, ".zarrfs")
			prepare(t, state)
			for _, create := range []bool{false, true} {
				if r, err := LocalJournalRoot(dir, create); err == nil || !strings.Contains(err.Error(), ErrUntrusted.Error()) {
					if r != nil {
						r.Close()
					}
					t.Errorf("create %v: %v, want %v", create, err, ErrUntrusted)
				}
			}
			if _, err := os.Lstat(filepath.Join(state, "journal")); err == nil {
				t.Error("a journal directory was created in the untrusted one")
			}
		})
	}
}

// TestRecoverLegacyJournal: a journal left by a zarrfs that did not mark
// its owner files (an empty one) still holds acknowledged writes, and is
// replayed.
func TestRecoverLegacyJournal(t *testing.T) {
	dir := t.TempDir()
	h, a := newArray(t, dir, zstdInner)
	if out, err := helper(t, dir, "ZARRFS_WB_MODE=crash").CombinedOutput(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	owners, _ := filepath.Glob(filepath.Join(dir, ".zarrfs", "journal", "*", ownerFile))
	if len(owners) != 1 {
		t.Fatalf("owner files: %v", owners)
	}
	if err := os.Truncate(owners[0], 0); err != nil {
		t.Fatal(err)
	}
	n, err := Recover(context.Background(), h, testJournalRoot(t, dir), slog.New(slog.DiscardHandler))
	if err != nil || n != 8 {
		t.Fatalf("Recover = %d, %v; want 8 records", n, err)
	}
	if v := readValue(t, a, []int{3, 3}); v != 103 {
		t.Errorf("inner chunk (3,3) = %d after recovery, want 103", v)
	}
}
