package writeback

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

const (
	storeA      = "s3://bkt/a?endpoint=http://127.0.0.1:9000&path-style"
	storeAAlias = "s3://bkt/a?endpoint=http://localhost:9000&path-style"
	storeB      = "s3://bkt/b?endpoint=http://127.0.0.1:9000&path-style"
)

// deadJournal leaves in root the journal of a writer that died, holding
// one update of inner chunk 0 of a/c/0/0 to v; it returns the journal's
// directory.
func deadJournal(t *testing.T, root *JournalRoot, a *zarr.Array, v uint16) string {
	t.Helper()
	j, err := OpenJournal(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(Record{Array: "a", Shard: "a/c/0/0", Chunk: 0, Data: innerChunk(t, a, v)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err == nil { // left for a replay, its lock released
		t.Fatal("a journal with an unpublished record was removed at Close")
	}
	return j.path()
}

// storeRoot opens the journal directory of store under base.
func storeRoot(t *testing.T, base, store string) *JournalRoot {
	t.Helper()
	r, err := StoreJournalRoot(base, store, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestJournalNamesItsStore: a journal names the store it was made for and
// is replayed into that store only, wherever it is found under the
// journal base; a journal of another store in a store's directory, or of
// the same bucket and prefix through another endpoint, is named
// (Journals) and left alone.
func TestJournalNamesItsStore(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	h, a := newArray(t, t.TempDir(), zstdInner)
	base := filepath.Join(t.TempDir(), "journals")
	rootA, rootB := storeRoot(t, base, storeA), storeRoot(t, base, storeB)

	moved := filepath.Join(rootB.String(), "moved")
	if err := os.Rename(deadJournal(t, rootA, a, 41), moved); err != nil {
		t.Fatal(err)
	}
	owner, _ := os.ReadFile(filepath.Join(moved, ownerFile))
	if !strings.Contains(string(owner), storeA) {
		t.Fatalf("the journal's owner file does not name its store: %q", owner)
	}
	infos, err := Journals(h, rootB, quiet)
	if err != nil || len(infos) != 1 || !infos[0].Stray || infos[0].OtherEndpoint || infos[0].Store != storeA || infos[0].Records != 1 {
		t.Errorf("Journals of B with A's journal in B's directory: %+v, %v; want it named, a stray of store A holding 1 update", infos, err)
	}
	if n, err := Recover(ctx, h, rootB, quiet); n != 0 || err != nil {
		t.Errorf("Recover of B replayed %d records of A's journal (%v)", n, err)
	}
	if v := readValue(t, a, []int{0, 0}); v == 41 {
		t.Fatal("A's update was published through B")
	}
	if n, err := Recover(ctx, h, rootA, quiet); n != 1 || err != nil {
		t.Errorf("Recover of A with its journal in B's directory: %d, %v; want its 1 record", n, err)
	}
	if v := readValue(t, a, []int{0, 0}); v != 41 {
		t.Errorf("inner chunk (0,0) = %d after A's recovery, want 41", v)
	}

	// The same bucket and prefix through another endpoint: named, not
	// replayed.
	alias := storeRoot(t, base, storeAAlias)
	deadJournal(t, rootA, a, 42)
	infos, err = Journals(h, alias, quiet)
	if err != nil || len(infos) != 1 || !infos[0].Stray || !infos[0].OtherEndpoint || infos[0].Records != 1 {
		t.Errorf("Journals through another endpoint: %+v, %v; want A's journal named as the same bucket and prefix's", infos, err)
	}
	if n, err := Recover(ctx, h, alias, quiet); n != 0 || err != nil {
		t.Errorf("Recover through another endpoint replayed %d records (%v)", n, err)
	}
	if n, err := Recover(ctx, h, rootA, quiet); n != 1 || err != nil {
		t.Errorf("Recover of A: %d, %v", n, err)
	}
}

// TestLegacyJournals: a journal made before journals named their store
// (its owner file marked "zarrfs journal 1", or empty) is replayed from
// its store's own directory, which only the user can have put it in; found
// in another store's directory, it is nobody's to replay and is left
// alone. A journal inside a local store names the store holding it.
func TestLegacyJournals(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	h, a := newArray(t, dir, zstdInner)
	base := filepath.Join(t.TempDir(), "journals")
	rootA, rootB := storeRoot(t, base, storeA), storeRoot(t, base, storeB)
	for i, owner := range []string{legacyOwnerMagic, ""} {
		j := deadJournal(t, rootA, a, uint16(50+i))
		if err := os.WriteFile(filepath.Join(j, ownerFile), []byte(owner), 0o600); err != nil {
			t.Fatal(err)
		}
		if n, err := Recover(ctx, h, rootA, quiet); n != 1 || err != nil {
			t.Errorf("Recover of a legacy journal (owner %q) in its store's directory: %d, %v", owner, n, err)
		}
		j = deadJournal(t, rootA, a, uint16(60+i))
		if err := os.WriteFile(filepath.Join(j, ownerFile), []byte(owner), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(j, filepath.Join(rootB.String(), filepath.Base(j))); err != nil {
			t.Fatal(err)
		}
		if n, err := Recover(ctx, h, rootA, quiet); n != 0 || err != nil {
			t.Errorf("Recover of A replayed %d records of a legacy journal in B's directory (%v)", n, err)
		}
	}

	local := testJournalRoot(t, dir)
	j := deadJournal(t, local, a, 70)
	if owner, _ := os.ReadFile(filepath.Join(j, ownerFile)); string(owner) != ownerContent(inStore) {
		t.Errorf("a local store's journal names %q, want the store holding it", owner)
	}
	if n, err := Recover(ctx, h, local, quiet); n != 1 || err != nil {
		t.Errorf("Recover of a local store's journal: %d, %v", n, err)
	}
	for _, bad := range []string{ownerMagic, ownerMagic + "store \"\"\n", ownerMagic + "store x\n", "zarrfs journal 3\n"} {
		if _, ok := parseOwner(bad); ok {
			t.Errorf("owner file %q taken for zarrfs's", bad)
		}
	}
}

// TestStoreJournalRootUntrusted: a journal base that another user owns or
// can write (or a directory above it that others can write without the
// sticky bit) is refused, saying why; one under a sticky directory such
// as /tmp is not.
func TestStoreJournalRootUntrusted(t *testing.T) {
	for _, c := range []struct {
		name, why string
		prepare   func(t *testing.T, parent, base string)
	}{
		{"writable by others", "writable by group or others", func(t *testing.T, parent, base string) {
			os.Chmod(base, 0o777)
		}},
		{"writable by others, sticky", "writable by group or others", func(t *testing.T, parent, base string) {
			os.Chmod(base, os.ModeSticky|0o777)
		}},
		{"parent writable by others", "writable by group or others", func(t *testing.T, parent, base string) {
			os.Chmod(parent, 0o777)
		}},
		{"parent sticky", "", func(t *testing.T, parent, base string) {
			os.Chmod(parent, os.ModeSticky|0o777)
		}},
		{"another user's", "owned by uid 65534", func(t *testing.T, parent, base string) {
			if os.Geteuid() != 0 {
				zarrtest.Missing(t, "root: the test gives the directory to nobody")
			}
			os.Chown(base, 65534, 65534)
		}},
		{"a link of another user", "owned by uid 65534", func(t *testing.T, parent, base string) {
			if os.Geteuid() != 0 {
				zarrtest.Missing(t, "root: the test gives the link to nobody")
			}
			real := filepath.Join(parent, "real")
			os.Rename(base, real)
			os.Symlink(real, base)
			os.Lchown(base, 65534, 65534)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "parent")
			base := filepath.Join(parent, "journals")
			if err := os.MkdirAll(base, 0o700); err != nil {
				t.Fatal(err)
			}
			c.prepare(t, parent, base)
			r, err := StoreJournalRoot(base, storeA, true)
			if c.why == "" {
				if err != nil {
					t.Errorf("StoreJournalRoot: %v", err)
				} else {
					r.Close()
				}
				return
			}
			if err == nil {
				r.Close()
			}
			if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), c.why) {
				t.Errorf("StoreJournalRoot: %v; want a refusal saying %q", err, c.why)
			}
			if entries, _ := os.ReadDir(base); len(entries) > 0 {
				t.Errorf("the refused base holds %v", entries)
			}
		})
	}
}
