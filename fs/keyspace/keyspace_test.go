package keyspace_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

func openFS(t testing.TB, dir string, opts keyspace.Options) *keyspace.FS {
	t.Helper()
	s, err := store.OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return openFSOver(t, s, opts)
}

// rangeOnly hides that a directory store opens files, so the views read
// chunks by ranges tied to generations, as from an object store.
type rangeOnly struct{ storetest.Store }

func openFSOver(t testing.TB, s store.Store, opts keyspace.Options) *keyspace.FS {
	t.Helper()
	h, err := zarr.Open(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	f := keyspace.New(h, opts)
	t.Cleanup(f.Close)
	return f
}

// materialize copies every file of a view into dst by walking it as a
// reader of the mount would: List, Lookup, Open, ReadAt.
func materialize(t *testing.T, d *keyspace.Dir, dst string) (files int) {
	t.Helper()
	ctx := context.Background()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for e, err := range d.List(ctx) {
		if err != nil {
			t.Fatalf("list %s: %v", d, err)
		}
		got, err := d.Lookup(ctx, e.Name)
		if err != nil {
			t.Fatalf("lookup %s/%s: %v", d, e.Name, err)
		}
		if got.Attr.Ino != e.Ino || got.Attr.Dir != e.Dir {
			t.Fatalf("%s/%s: listing says ino %d dir %v, lookup %d %v", d, e.Name, e.Ino, e.Dir, got.Attr.Ino, got.Attr.Dir)
		}
		target := filepath.Join(dst, e.Name)
		if got.Dir != nil {
			files += materialize(t, got.Dir, target)
			continue
		}
		h, err := got.File.Open(ctx)
		if err != nil {
			t.Fatalf("open %s: %v", got.File, err)
		}
		b, err := io.ReadAll(io.NewSectionReader(h, 0, h.Size()))
		h.Close()
		if err != nil {
			t.Fatalf("read %s: %v", got.File, err)
		}
		if int64(len(b)) != got.Attr.Size {
			t.Fatalf("%s: read %d bytes, st_size says %d", got.File, len(b), got.Attr.Size)
		}
		if err := os.WriteFile(target, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files++
	}
	return files
}

// nestedSharding names generated arrays whose inner chunks are shards
// themselves: the v3 view unshards one level, so they stay sharded there.
var nestedSharding = map[string]bool{"bool_nested": true}

// checkView materializes a view and checks every array reads back to its digest.
func checkView(t *testing.T, f *keyspace.FS, v keyspace.View, want map[string]string) {
	t.Helper()
	dst := t.TempDir()
	materialize(t, f.Root(v), dst)
	ctx := context.Background()
	h := zarrtest.OpenHierarchy(t, dst, true)
	for path, digest := range want {
		n, ok := h.Node(path)
		if !ok || n.Array == nil {
			t.Errorf("%s view: no array at %q (%v)", v, path, n)
			continue
		}
		wantFormat := map[keyspace.View]int{keyspace.V3: 3, keyspace.V2: 2}[v]
		if n.Format != wantFormat || n.Array.Sharding() != nil && !(v == keyspace.V3 && nestedSharding[path]) {
			t.Errorf("%s view: %s is format %d, sharded %v", v, path, n.Format, n.Array.Sharding() != nil)
		}
		got, err := zarrtest.DigestArray(ctx, n.Array)
		if err != nil {
			t.Errorf("%s view: %s: %v", v, path, err)
		} else if got != digest {
			t.Errorf("%s view: %s: sha256 %s, want %s", v, path, got, digest)
		}
	}
}

func TestViewsOfGeneratedStores(t *testing.T) {
	for _, write := range []func(testing.TB, string) []zarrtest.Generated{zarrtest.WriteV3Store, zarrtest.WriteV2Store} {
		dir := t.TempDir()
		want := map[string]string{}
		for _, g := range write(t, dir) {
			want[g.Path] = g.Digest
		}
		for _, opts := range []keyspace.Options{{V2Separator: "."}, {V2Separator: "/", V2Transcode: keyspace.TranscodeRaw}} {
			f := openFS(t, dir, opts)
			checkView(t, f, keyspace.V3, want)
			checkView(t, f, keyspace.V2, want)
		}
		s, err := store.OpenDir(dir, true)
		if err != nil {
			t.Fatal(err)
		}
		f := openFSOver(t, rangeOnly{s}, keyspace.Options{})
		checkView(t, f, keyspace.V3, want)
		checkView(t, f, keyspace.V2, want)
		sharded := slices.ContainsFunc(write(t, t.TempDir()), func(g zarrtest.Generated) bool { return g.Sharded })
		if st := f.Stats(); st.ShardOpens != 0 || st.RangeReads == 0 || sharded && st.Coalesced == 0 {
			t.Errorf("a store read by ranges opened %d shard files, read %d ranges and coalesced %d chunks into them", st.ShardOpens, st.RangeReads, st.Coalesced)
		}
		s.Close()
	}
}

// TestViewsOfFixtures checks both views of every fixture array against
// EXPECTED.jsonl; an array a view leaves out fails the test unless it is
// on the named list of known omissions (with why).
func TestViewsOfFixtures(t *testing.T) {
	fixtures := zarrtest.Fixtures(t)
	f, err := os.Open(filepath.Join(fixtures, "EXPECTED.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// knownOmitted are the fixtures a view leaves out, with why; any other
	// omission fails.
	knownOmitted := map[string]string{
		"v3 zarrita.js/v2/data.zarr/1d.contiguous.json2.O": "Python objects encoded by numcodecs json2 have no v3 data type",
	}
	counts := map[keyspace.View]int{}
	total := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			Fixture string `json:"fixture"`
			SHA256  string `json:"sha256"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		total++
		fs := openFS(t, filepath.Join(fixtures, e.Fixture), keyspace.Options{})
		for _, v := range []keyspace.View{keyspace.V3, keyspace.V2} {
			_, err := fs.Root(v).Lookup(context.Background(), map[keyspace.View]string{keyspace.V3: "zarr.json", keyspace.V2: ".zarray"}[v])
			why, known := knownOmitted[v.String()+" "+e.Fixture]
			switch {
			case err != nil && known:
				t.Logf("%s view omits %s, as expected: %s", v, e.Fixture, why)
				continue
			case err != nil:
				t.Errorf("%s view omits %s: %v", v, e.Fixture, err)
				continue
			case known:
				t.Errorf("%s view shows %s, listed as omitted (%s): take it off the list", v, e.Fixture, why)
			}
			checkView(t, fs, v, map[string]string{"": e.SHA256})
			counts[v]++
		}
	}
	t.Logf("fixture views: %d arrays; v3 view shows %d, v2 view shows %d, each read back to the expected sha256", total, counts[keyspace.V3], counts[keyspace.V2])
}

func TestChunkFilesAreShardRanges(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	f := openFS(t, dir, keyspace.Options{})
	ctx := context.Background()
	arr := lookupDir(t, f.Root(keyspace.V3), "uint16_scrambled")
	var listed []string
	c := lookupDir(t, arr, "c")
	for row, err := range c.List(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		rowDir := lookupDir(t, c, row.Name)
		for e, err := range rowDir.List(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			listed = append(listed, row.Name+"/"+e.Name)
			entry, err := rowDir.Lookup(ctx, e.Name)
			if err != nil {
				t.Fatal(err)
			}
			xattrs, err := entry.File.(*keyspace.Chunk).Xattrs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			x := map[string]string{}
			for _, a := range xattrs {
				x[a.Name] = a.Value
			}
			shard, err := os.ReadFile(filepath.Join(dir, x["user.zarr.shard"]))
			if err != nil {
				t.Fatal(err)
			}
			var off, n int
			json.Unmarshal([]byte(x["user.zarr.offset"]), &off)
			json.Unmarshal([]byte(x["user.zarr.nbytes"]), &n)
			h, err := entry.File.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, h.Size())
			h.ReadAt(b, 0)
			h.Close()
			if !bytes.Equal(b, shard[off:off+n]) {
				t.Fatalf("c/%s/%s is not bytes [%d, +%d) of %s", row.Name, e.Name, off, n, x["user.zarr.shard"])
			}
		}
	}
	// Pattern leaves the first inner chunk (2x4 at the origin) and the
	// last shard empty: 8x4 inner chunks, minus 1, minus the last shard's 4x2.
	if len(listed) != 32-1-8 {
		t.Fatalf("listed %d chunks, want 23: %v", len(listed), listed)
	}
	if _, err := lookupDir(t, c, "0").Lookup(ctx, "0"); !errors.Is(err, keyspace.ErrNotFound) {
		t.Fatalf("lookup of an empty inner chunk: %v, want ErrNotFound", err)
	}
	for _, name := range []string{"00", "-1", "+1", "99", "x"} {
		if _, err := c.Lookup(ctx, name); !errors.Is(err, keyspace.ErrNotFound) {
			t.Errorf("lookup of %q: %v, want ErrNotFound", name, err)
		}
	}
}

func TestCorruptShardIsIsolated(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	shard := filepath.Join(dir, "int64_v2keys", "0.0")
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-9] ^= 1 // break the index checksum
	os.WriteFile(shard, b, 0o644)
	f := openFS(t, dir, keyspace.Options{})
	ctx := context.Background()
	for _, v := range []keyspace.View{keyspace.V3, keyspace.V2} {
		arr := lookupDir(t, f.Root(v), "int64_v2keys")
		if _, err := arr.Lookup(ctx, "1.1"); !errors.Is(err, keyspace.ErrCorrupt) {
			t.Errorf("%s view: chunk in a corrupt shard: %v, want ErrCorrupt", v, err)
		}
		if _, err := arr.Lookup(ctx, "0.2"); err != nil {
			t.Errorf("%s view: chunk in a healthy shard: %v", v, err)
		}
		var names []string
		for e, err := range arr.List(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, e.Name)
		}
		if slices.Contains(names, "1.1") || !slices.Contains(names, "0.2") {
			t.Errorf("%s view lists %v", v, names)
		}
	}
}

// writeTransposed writes a v3 store in dir of uint16 arrays of shape
// [4 6 8], each one shard of [2 3 4] inner chunks transposed in an order
// v2 cannot express and then compressed with the codecs its name maps to
// (none for nil), the shard index at index ("start" or "end"); it returns
// the arrays' digests.
func writeTransposed(t *testing.T, dir, index string, compressors map[string][]meta.Codec) map[string]string {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{}
	for name, compress := range compressors {
		inner := append([]meta.Codec{zarrtest.C("transpose", `{"order":[0,2,1]}`), zarrtest.BytesLE}, compress...)
		a, err := zarr.CreateArrayV3(ctx, s, name, &meta.ArrayV3{Shape: []int{4, 6, 8}, DataType: dtype.TypeUint16, ChunkShape: []int{4, 6, 8}, FillValue: []byte{0, 0},
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
			Codecs:      []meta.Codec{zarrtest.Sharding([]int{2, 3, 4}, inner, []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}, index)}})
		if err != nil {
			t.Fatal(err)
		}
		data := zarrtest.Pattern(a, 2)
		if err := a.Write(ctx, data); err != nil {
			t.Fatal(err)
		}
		digests[name] = zarrtest.Digest(data)
	}
	return digests
}

// TestTruncatedShardTranscode: a chunk to transcode that its shard's
// index places past the end of the file is corrupt data, named by the
// shard's key, not bytes made up to fill it.
func TestTruncatedShardTranscode(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeTransposed(t, dir, "start", map[string][]meta.Codec{"a": nil})
	f := openFS(t, dir, keyspace.Options{V2Transcode: keyspace.TranscodeRaw})
	d := lookupDir(t, f.Root(keyspace.V2), "a")
	first, err := d.Lookup(ctx, "0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.File.Open(ctx); err != nil { // the index is read, the shard open
		t.Fatal(err)
	}
	shard := filepath.Join(dir, "a", "c", "0", "0", "0")
	info, err := os.Stat(shard)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(shard, info.Size()-10); err != nil {
		t.Fatal(err)
	}
	// As the mount reads: with the cached index, within its revalidation
	// interval.
	last, err := d.Lookup(ctx, "1.1.1")
	if err == nil {
		_, err = last.File.(*keyspace.Chunk).ReadAt(ctx, make([]byte, last.Attr.Size), 0)
	}
	if !errors.Is(err, keyspace.ErrCorrupt) || !strings.Contains(err.Error(), "a/c/0/0/0") {
		t.Errorf("the chunk cut short: %v, want ErrCorrupt naming the shard", err)
	}
}

func lookupDir(t *testing.T, d *keyspace.Dir, name string) *keyspace.Dir {
	t.Helper()
	e, err := d.Lookup(context.Background(), name)
	if err != nil || e.Dir == nil {
		t.Fatalf("lookup %s/%s: %v, %+v", d, name, err, e)
	}
	return e.Dir
}

// TestTranscodeEncodings: the v2 view encodes what it transcodes (inner
// chunks transposed in an order v2 cannot express) uncompressed or with
// blosc lz4, as Options.V2Transcode says; TranscodeAuto compresses only
// what the store compresses. Every choice reads back the stored content.
func TestTranscodeEncodings(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	want := writeTransposed(t, dir, "end", map[string][]meta.Codec{"plain": nil, "zstd": {zarrtest.Zstd}})
	const lz4, none = `"cname":"lz4"`, `"compressor":null`
	for encoding, compressors := range map[string]map[string]string{
		keyspace.TranscodeAuto:     {"plain": none, "zstd": lz4},
		keyspace.TranscodeBloscLZ4: {"plain": lz4, "zstd": lz4},
		keyspace.TranscodeRaw:      {"plain": none, "zstd": none},
	} {
		f := openFS(t, dir, keyspace.Options{V2Transcode: encoding})
		for name, compressor := range compressors {
			d := lookupDir(t, f.Root(keyspace.V2), name)
			if zarray := compact(t, readFile(t, d, ".zarray")); !strings.Contains(zarray, compressor) {
				t.Errorf("%s: the .zarray of %s is %s, want %s", encoding, name, zarray, compressor)
			}
			// An uncompressed chunk's size needs no transcode: only its read does.
			before := f.Stats().Transcodes
			e, err := d.Lookup(ctx, "1.1.1") // 0.0.0 holds only the fill value
			if err != nil {
				t.Fatal(err)
			}
			looked := f.Stats().Transcodes - before
			if b := readFile(t, d, "1.1.1"); int64(len(b)) != e.Attr.Size {
				t.Errorf("%s: %s/1.1.1 has size %d and %d bytes", encoding, name, e.Attr.Size, len(b))
			}
			if compressor == none && looked != 0 {
				t.Errorf("%s: looking up %s/1.1.1, uncompressed, transcoded it", encoding, name)
			}
		}
		checkView(t, f, keyspace.V2, want)
	}
}

// TestTranscodedKeys: a transcoded chunk's cache key, in memory and in
// the cluster, names the --v2-transcode setting: views of other settings
// over one store, whose .zarray describe other bytes, never share a key
// (even auto and blosc-lz4, which encode a compressed array alike), and
// one view names a chunk alike each time.
func TestTranscodedKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeTransposed(t, dir, "end", map[string][]meta.Codec{"zstd": {zarrtest.Zstd}})
	seen := map[string]string{}
	for _, setting := range []string{keyspace.TranscodeRaw, keyspace.TranscodeBloscLZ4, keyspace.TranscodeAuto} {
		f := openFS(t, dir, keyspace.Options{V2Transcode: setting})
		k, err := keyspace.TranscodedKey(ctx, f, "zstd", []int{1, 1, 1})
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := keyspace.TranscodedKey(ctx, f, "zstd", []int{1, 1, 1}); again != k {
			t.Errorf("%s: the chunk's key is %q, then %q", setting, k, again)
		}
		if other, dup := seen[k]; dup {
			t.Errorf("settings %s and %s share the key %q", other, setting, k)
		}
		seen[k] = setting
	}
}

// TestDeliveredLeavesCache: a transcoded chunk of a fixed size (raw)
// leaves the cache once delivered whole, so reading it again transcodes it
// again; one delivered in part, or of a size only its transcode tells
// (blosc lz4), stays.
func TestDeliveredLeavesCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeTransposed(t, dir, "end", map[string][]meta.Codec{"a": nil})
	for _, c := range []struct {
		encoding string
		off      int64
		part     bool
		leaves   bool
	}{
		{keyspace.TranscodeRaw, 0, false, true},
		{keyspace.TranscodeRaw, 0, true, false},
		{keyspace.TranscodeRaw, 2, false, false},
		{keyspace.TranscodeBloscLZ4, 0, false, false},
	} {
		f := openFS(t, dir, keyspace.Options{V2Transcode: c.encoding})
		d := lookupDir(t, f.Root(keyspace.V2), "a")
		e, err := d.Lookup(ctx, "1.1.1")
		if err != nil {
			t.Fatal(err)
		}
		chunk := e.File.(*keyspace.Chunk)
		first := readFile(t, d, "1.1.1")
		transcodes := f.Stats().Transcodes
		n := len(first) - int(c.off)
		if c.part {
			n--
		}
		chunk.Delivered(ctx, c.off, n)
		again := readFile(t, d, "1.1.1")
		if !bytes.Equal(again, first) {
			t.Fatalf("%s: the chunk reads differently after its delivery", c.encoding)
		}
		if left := f.Stats().Transcodes > transcodes; left != c.leaves {
			t.Errorf("%s: %d bytes from %d of %d delivered: transcoded again %v, want %v", c.encoding, n, c.off, len(first), left, c.leaves)
		}
	}
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
