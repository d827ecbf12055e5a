package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// The array of TestInspect: a large shard (larger than the block a
// suffix read fetches) of bigShard inner chunks, and a small one of
// smallShard stored inner chunks, each ending with a crc32c.
const (
	bigShard   = 160
	smallShard = 4
)

// writeInspected writes array "a" of TestInspect into dir.
func writeInspected(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	m := &meta.ArrayV3{
		Shape: []int{2 * bigShard * chunkBytes}, DataType: dtype.TypeUint8, ChunkShape: []int{bigShard * chunkBytes},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, FillValue: []byte{0},
		Codecs: zarr.ShardedCodecs([]int{chunkBytes}, append(raw, meta.Codec{Name: "crc32c"})),
	}
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	a, err := zarr.CreateArrayV3(ctx, s, "a", m)
	if err != nil {
		t.Fatal(err)
	}
	data := codec.NewChunk(codec.Spec{Shape: m.Shape, Type: m.DataType, Fill: m.FillValue})
	for i := range data.Data {
		if c := i / chunkBytes; c < bigShard+smallShard {
			data.Data[i] = fill(c, 0)
		}
	}
	if err := a.Write(ctx, data); err != nil {
		t.Fatal(err)
	}
}

// TestInspect: verifying the stored shards of a store read by ranges reads
// a small shard, index and chunks, with one request, and a large one by
// ranges coalesced far beyond a chunk each; a corrupt inner chunk is named
// with its shard, in either part of a large shard, and the same from open
// shard files. Inspecting without verifying reads indexes alone.
func TestInspect(t *testing.T) {
	dir := t.TempDir()
	writeInspected(t, dir)
	ctx := context.Background()
	// Inner chunk 2 of the large shard lies before the block a suffix
	// read fetches, 150 in it; inner chunk 1 of the small shard.
	_, a := open(t, openDir(t, dir), engine.Options{})
	for _, c := range []int{2, 150, bigShard + 1} {
		loc, ok, err := a.Locate(ctx, []int{c}, false)
		if !ok || err != nil {
			t.Fatalf("inner chunk %d: stored %v, %v", c, ok, err)
		}
		path := filepath.Join(dir, filepath.FromSlash(loc.Key))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[loc.Off+10] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]string{"a/c/0": {"inner chunk 2: ", "inner chunk 150: "}, "a/c/1": {"inner chunk 1: "}}
	for _, byRange := range []bool{true, false} {
		d := openDir(t, dir)
		var s store.Store = d
		if byRange {
			s = rangeOnly{d}
		}
		e, a := open(t, s, engine.Options{})
		reports := map[string]engine.ObjectReport{}
		for r, err := range a.Inspect(ctx, true, 2) {
			if err != nil {
				t.Fatal(err)
			}
			reports[r.Key] = r
		}
		if r := reports["a/c/0"]; r.Stored != bigShard || r.Empty != 0 || r.StoredBytes != bigShard*(chunkBytes+4) {
			t.Errorf("by range %v: the large shard: %+v", byRange, r)
		}
		if r := reports["a/c/1"]; r.Stored != smallShard || r.Empty != bigShard-smallShard {
			t.Errorf("by range %v: the small shard: %+v", byRange, r)
		}
		for key, reasons := range want {
			r, ok := reports[key]
			if !ok || r.Err == nil {
				t.Errorf("by range %v: %s: %+v, want it broken", byRange, key, r)
				continue
			}
			for _, reason := range reasons {
				if !strings.Contains(r.Err.Error(), reason) {
					t.Errorf("by range %v: %s: %v, want %q", byRange, key, r.Err, reason)
				}
			}
			if n := strings.Count(r.Err.Error(), "inner chunk"); n != len(reasons) {
				t.Errorf("by range %v: %s: %v names %d inner chunks, want %d", byRange, key, r.Err, n, len(reasons))
			}
		}
		st := e.Stats()
		t.Logf("by range %v: %+v", byRange, st)
		if st.IndexLoads != 2 {
			t.Errorf("by range %v: %d index loads, want one per shard", byRange, st.IndexLoads)
		}
		// The large shard's chunks before the block the suffix read
		// fetched: 32 of them, in a few coalesced reads.
		if byRange && st.RangeReads > 8 {
			t.Errorf("by range: %d ranged reads of chunks besides the suffix reads, want a few coalesced ones", st.RangeReads)
		}
	}

	e, a := open(t, rangeOnly{openDir(t, dir)}, engine.Options{})
	n := 0
	for r, err := range a.Inspect(ctx, false, 1) {
		if err != nil || r.Err != nil {
			t.Errorf("inspected without verifying: %+v %v", r, err)
		}
		n++
	}
	if st := e.Stats(); n != 2 || st.IndexLoads != 2 || st.RangeReads != 0 {
		t.Errorf("inspected without verifying: %d shards, %+v; want 2 and their indexes alone", n, st)
	}
}
