package zipstore_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
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
		s, err := zipstore.Open(context.Background(), writeZip(t, method, members, order))
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
	if _, err := zipstore.Open(context.Background(), p); err == nil || !bytes.Contains([]byte(err.Error()), []byte(p)) {
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
	s, err := zipstore.Open(context.Background(), p)
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
		s, err := zipstore.New(context.Background(), bytes.NewReader(b), int64(len(b)), "fuzz.zip", "g")
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

// writeRawZip writes a zip of members given deflated (content as the
// deflate stream, with the crc32 and size of what it inflates to).
func writeRawZip(t testing.TB, members []rawMember) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "raw.zip")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := zip.NewWriter(f)
	for _, m := range members {
		fw, err := w.CreateRaw(&zip.FileHeader{Name: m.name, Method: zip.Deflate, CRC32: m.crc,
			CompressedSize64: uint64(len(m.deflated)), UncompressedSize64: uint64(m.size)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(m.deflated); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

type rawMember struct {
	name     string
	deflated []byte
	crc      uint32
	size     int64
}

// bomb returns a deflate stream of n MiB of byte c (n copies of one
// flushed MiB: a stream's blocks need nothing before them), its crc32.
func bomb(n int, c byte) ([]byte, uint32) {
	mib := bytes.Repeat([]byte{c}, 1<<20)
	var block bytes.Buffer
	fw, _ := flate.NewWriter(&block, flate.BestCompression)
	fw.Write(mib)
	fw.Flush()
	stream := append(bytes.Repeat(block.Bytes(), n), 0x03, 0x00) // an empty final block
	sum := crc32.NewIEEE()
	for range n {
		sum.Write(mib)
	}
	return stream, sum.Sum32()
}

// TestDeflatedReadByRange: reads of a deflated member of 128 MiB, by Get,
// ReadAt and through Open, allocate the range read and the flate state
// (its Huffman tables anew for each block), never the member. A member that inflates to other bytes
// than its crc32 says, or to more or fewer bytes than its size, fails
// the read that reaches its end, and every read after it.
func TestDeflatedReadByRange(t *testing.T) {
	ctx := context.Background()
	const size = 128 << 20
	stream, crc := bomb(size>>20, 'x')
	short, _ := bomb(3, 'x')
	p := writeRawZip(t, []rawMember{
		{"big", stream, crc, size},
		{"badcrc", stream, crc + 1, size},
		{"short", short, crc, 4 << 20},
		{"long", stream, crc, size - 1},
	})
	s, err := zipstore.Open(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	info, err := s.Stat(ctx, "big")
	if err != nil || info.Size != size {
		t.Fatalf("Stat: %+v, %v", info, err)
	}
	allocated := func(what string, limit uint64, read func() error) {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := read(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > limit {
			t.Errorf("%s allocated %d KiB, want at most %d", what, n>>10, limit>>10)
		}
	}
	allocated("Get of the last 16 bytes", 16<<20, func() error {
		b, _, err := s.Get(ctx, "big", store.Last(16), store.Cond{})
		if err == nil && !bytes.Equal(b, bytes.Repeat([]byte("x"), 16)) {
			err = fmt.Errorf("got %q", b)
		}
		return err
	})
	allocated("ReadAt of 4 KiB in the middle", 16<<20, func() error {
		return s.ReadAt(ctx, "big", info.Generation, make([]byte, 4096), size/2)
	})
	o, err := s.Open(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	buf := make([]byte, 1<<20)
	allocated("reading through Open, on and on", 16<<20+1<<20, func() error {
		for off := int64(0); off < size; off += 8 << 20 {
			if _, err := o.ReadAt(buf, off); err != nil {
				return err
			}
		}
		return nil
	})
	if _, err := o.ReadAt(buf, size-1<<20); err != nil {
		t.Errorf("the last MiB, through Open: %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Get(done, "big", store.Last(16), store.Cond{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a Get whose context is done: %v, want it to stop", err)
	}
	for key, want := range map[string]string{"badcrc": "crc32", "short": "inflated 3145728 bytes", "long": "inflates to more"} {
		o, err := s.Open(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		size := o.Info().Size
		if _, err := o.ReadAt(make([]byte, 8), size-8); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: reading its end: %v, want an error saying %q", key, err, want)
		}
		if _, err := o.ReadAt(make([]byte, 8), 0); err == nil {
			t.Errorf("%s: a read after it was found corrupt succeeded", key)
		}
		o.Close()
	}
}

// TestDirectoryBounds: a zip of 70,000 entries (zip64 counts) opens and
// lists, each key once; one claiming more entries than MaxEntries, or
// more than its central directory holds, is refused before its entries
// are read; opening stops when the context is done.
func TestDirectoryBounds(t *testing.T) {
	ctx := context.Background()
	names := map[string]string{}
	var order []string
	for i := range 70000 {
		k := fmt.Sprintf("a/c/%d", i)
		names[k] = "v"
		order = append(order, k)
	}
	order = append(order, "a/c/7") // a later member of the same name replaces it
	p := writeZip(t, zip.Store, names, order)
	s, err := zipstore.Open(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range s.List(ctx, "a/c/") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	var root []store.Entry
	for e, err := range s.ListDir(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		root = append(root, e)
	}
	s.Close()
	if n != 70000 || len(root) != 1 || root[0] != (store.Entry{Name: "a", Dir: true}) {
		t.Errorf("listed %d keys below a/c/ and %v at the root; want 70000 and a/", n, root)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := zipstore.Open(cancelled, p); !errors.Is(err, context.Canceled) {
		t.Errorf("opening with a done context: %v", err)
	}

	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// The zip64 end record holds the counts: claim more.
	rec := bytes.LastIndex(b, []byte("PK\x06\x06"))
	for _, entries := range []uint64{zipstore.MaxEntries + 1, 5_000_000 / 46} {
		c := bytes.Clone(b)
		binary.LittleEndian.PutUint64(c[rec+24:], entries)
		binary.LittleEndian.PutUint64(c[rec+32:], entries)
		_, err := zipstore.New(ctx, bytes.NewReader(c), int64(len(c)), "claims.zip", "g")
		if err == nil || !strings.Contains(err.Error(), "entries") {
			t.Errorf("a zip claiming %d entries: %v, want a refusal", entries, err)
		}
	}
}
