package zipstore_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/zipstore"
)

// writeZip writes members (name -> content) into a zip file, stored or
// deflated, and returns its path.
func writeZip(t testing.TB, method uint16, members map[string]string, order []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "store.zip")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := zip.NewWriter(f)
	for _, name := range order {
		fw, err := w.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(fw, members[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

var members = map[string]string{
	"zarr.json": `{"zarr_format":3,"node_type":"group"}`, "a/zarr.json": `{}`, "a/c/0/0": "shard bytes 0123456789",
	"a/c/0/1": "", "b/c/1": "x", "../evil": "no", "/abs": "no",
}
var order = []string{"zarr.json", "a/", "a/zarr.json", "a/c/0/0", "a/c/0/1", "b/c/1", "../evil", "/abs"}

func TestStoredAndDeflated(t *testing.T) {
	ctx := context.Background()
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		s, err := zipstore.Open(writeZip(t, method, members, order))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, ok := any(s).(store.Writer); ok || !store.ReadOnly(s) || s.Remote() {
			t.Error("a zip store is a store.Writer, or remote")
		}
		for _, key := range []string{"zarr.json", "a/c/0/0", "a/c/0/1", "b/c/1"} {
			b, info, err := s.Get(ctx, key, store.All, store.Cond{})
			if err != nil || string(b) != members[key] || info.Size != int64(len(members[key])) {
				t.Errorf("method %d: Get(%s) = %q, %+v, %v", method, key, b, info, err)
			}
		}
		b, info, err := s.Get(ctx, "a/c/0/0", store.Last(4), store.Cond{})
		if err != nil || string(b) != "6789" {
			t.Errorf("method %d: suffix = %q, %v", method, b, err)
		}
		if _, _, err := s.Get(ctx, "a/c/0/0", store.Last(4), store.Cond{IfNoneMatch: info.Generation}); !errors.Is(err, store.ErrNotModified) {
			t.Errorf("method %d: a read at the same generation: %v, want ErrNotModified", method, err)
		}
		p := make([]byte, 5)
		if err := s.ReadAt(ctx, "a/c/0/0", info.Generation, p, 6); err != nil || string(p) != "bytes" {
			t.Errorf("method %d: ReadAt = %q, %v", method, p, err)
		}
		if err := s.ReadAt(ctx, "a/c/0/0", "other", p, 6); !errors.Is(err, store.ErrPrecondition) {
			t.Errorf("method %d: ReadAt at another generation: %v", method, err)
		}
		o, err := s.Open(ctx, "a/c/0/0")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(io.NewSectionReader(o, 0, o.Info().Size)); string(got) != members["a/c/0/0"] {
			t.Errorf("method %d: Open reads %q", method, got)
		}
		o.Close()
		for _, key := range []string{"missing", "../evil", "/abs", "a"} {
			if _, _, err := s.Get(ctx, key, store.All, store.Cond{}); err == nil {
				t.Errorf("method %d: Get(%q) succeeded", method, key)
			}
		}
		if _, err := store.Put(ctx, s, "x", [][]byte{[]byte("x")}, store.Cond{}); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("Put: %v", err)
		}
		var root, a []string
		for e, err := range s.ListDir(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			root = append(root, e.Name+map[bool]string{true: "/"}[e.Dir])
		}
		for k, err := range s.List(ctx, "a/") {
			if err != nil {
				t.Fatal(err)
			}
			a = append(a, k)
		}
		if !slices.Equal(root, []string{"a/", "b/", "zarr.json"}) || !slices.Equal(a, []string{"a/c/0/0", "a/c/0/1", "a/zarr.json"}) {
			t.Errorf("method %d: ListDir('') = %v, List(a/) = %v", method, root, a)
		}
	}
}

// TestTruncated: a zip cut short keeps its central directory unreadable
// (Open fails, naming the file); a member whose data runs past the end
// gives an error naming it, and the others still read.
func TestTruncated(t *testing.T) {
	ctx := context.Background()
	p := writeZip(t, zip.Store, members, order)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b[:len(b)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := zipstore.Open(p); err == nil || !bytes.Contains([]byte(err.Error()), []byte(p)) {
		t.Errorf("a zip without its end of central directory: %v, want an error naming it", err)
	}
	// Grow one member's size in its central directory entry, so that its
	// data runs past the end of the file.
	b = bytes.Clone(b)
	name := []byte("b/c/1")
	cd := bytes.LastIndex(b, append([]byte{}, name...)) - 46 // central directory header before the name
	if string(b[cd:cd+4]) != "PK\x01\x02" {
		t.Fatalf("no central directory entry for %s", name)
	}
	copy(b[cd+20:cd+28], []byte{0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f}) // compressed, uncompressed size
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := zipstore.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Get(ctx, "b/c/1", store.All, store.Cond{}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("b/c/1")) {
		t.Errorf("a member running past the end: %v, want an error naming it", err)
	}
	if got, _, err := s.Get(ctx, "a/c/0/0", store.All, store.Cond{}); err != nil || string(got) != members["a/c/0/0"] {
		t.Errorf("another member: %q, %v", got, err)
	}
}

// FuzzOpen: any bytes as a zip file open or fail with an error, and every
// key of one that opens reads or fails, without a panic.
func FuzzOpen(f *testing.F) {
	seed, err := os.ReadFile(writeZip(f, zip.Store, members, order))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	deflated, err := os.ReadFile(writeZip(f, zip.Deflate, members, order))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(deflated)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := zipstore.New(bytes.NewReader(b), int64(len(b)), "fuzz.zip", "g")
		if err != nil {
			return
		}
		defer s.Close()
		ctx := context.Background()
		for key, err := range s.List(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			s.Get(ctx, key, store.Last(8), store.Cond{})
			if o, err := s.Open(ctx, key); err == nil {
				o.ReadAt(make([]byte, 4), 0)
				o.Close()
			}
		}
		for range s.ListDir(ctx, "a") {
		}
	})
}
