package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckHealthyStores(t *testing.T) {
	for _, write := range []func(testing.TB, string) []zarrtest.Generated{zarrtest.WriteV3Store, zarrtest.WriteV2Store} {
		dir := t.TempDir()
		arrays := write(t, dir)
		code, out, errs := runCLI(t, "check", dir)
		if code != 0 {
			t.Fatalf("check of a healthy store exited %d:\n%s%s", code, out, errs)
		}
		if !strings.Contains(out, "0 broken") {
			t.Errorf("check output lacks the summary:\n%s", out)
		}
		// info --json agrees with what was written.
		code, out, errs = runCLI(t, "info", "--json", dir)
		if code != 0 {
			t.Fatalf("info exited %d: %s", code, errs)
		}
		seen := map[string]nodeInfo{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var in nodeInfo
			if err := json.Unmarshal([]byte(line), &in); err != nil {
				t.Fatalf("info --json line %q: %v", line, err)
			}
			seen[in.Path] = in
		}
		for _, g := range arrays {
			in, ok := seen["/"+g.Path]
			if !ok || in.Kind != "array" || in.Error != "" || in.Sharded != g.Sharded {
				t.Errorf("info of %s: %+v", g.Path, in)
			}
			if in.ChunksStored == 0 || in.ChunksStored >= in.ChunksTotal && in.ChunksTotal > 1 {
				t.Errorf("info of %s: %d/%d chunks stored; the generator leaves the last one empty", g.Path, in.ChunksStored, in.ChunksTotal)
			}
			if g.Sharded && in.InnerChunksEmpty == 0 {
				t.Errorf("info of %s: no empty inner chunks; the generator leaves some", g.Path)
			}
		}
	}
}

// TestCheckFindsBrokenShards breaks one shard per array in three ways and
// expects check to exit 1 naming exactly that shard.
func TestCheckFindsBrokenShards(t *testing.T) {
	cases := map[string]func(t *testing.T, path string){
		"flipped index byte": func(t *testing.T, path string) {
			b := readFile(t, path)
			b[len(b)-9] ^= 0x40 // inside the index (it ends with a 4-byte crc32c)
			writeFile(t, path, b)
		},
		"truncated shard": func(t *testing.T, path string) {
			b := readFile(t, path)
			writeFile(t, path, b[:len(b)/2])
		},
		"broken chunk checksum": func(t *testing.T, path string) {
			b := readFile(t, path)
			b[1] ^= 0xff // first inner chunk's data; its trailing crc32c no longer matches
			writeFile(t, path, b)
		},
	}
	for name, breakShard := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			zarrtest.WriteV3Store(t, dir)
			// complex64_crc: inner chunks end with crc32c, index at the end.
			shard := filepath.Join(dir, "complex64_crc", "c", "0")
			breakShard(t, shard)
			before := readFile(t, shard)
			code, out, _ := runCLI(t, "check", dir)
			if code != 1 {
				t.Fatalf("check exited %d, want 1:\n%s", code, out)
			}
			if !strings.Contains(out, "BROKEN complex64_crc/c/0:") {
				t.Fatalf("check does not name the broken shard:\n%s", out)
			}
			if n := strings.Count(out, "BROKEN"); n != 1 {
				t.Fatalf("check reports %d broken shards, want 1:\n%s", n, out)
			}
			if !bytes.Equal(before, readFile(t, shard)) {
				t.Fatal("check changed the store")
			}
		})
	}
}

func TestInfoOfFixtures(t *testing.T) {
	root := filepath.Join(zarrtest.Fixtures(t), "zarr-java", "sharding_index_location", "start")
	code, out, errs := runCLI(t, "info", root)
	if code != 0 {
		t.Fatalf("info exited %d: %s", code, errs)
	}
	for _, want := range []string{"shape [16 16 16]  int32", "shards [16 8 8] of inner chunks [8 4 8], index at start", "stored: 4/4 shards, 16 inner chunks (0 empty)"} {
		if !strings.Contains(out, want) {
			t.Errorf("info output lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := runCLI(t, "check", filepath.Join(zarrtest.Fixtures(t))); code != 0 {
		t.Errorf("check of the shared fixtures exited %d", code)
	}
}

func TestDemoStoreIsHealthy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if code, out, errs := runCLI(t, "demo", dir); code != 0 {
		t.Fatalf("demo exited %d: %s%s", code, out, errs)
	}
	if code, out, _ := runCLI(t, "check", dir); code != 0 {
		t.Fatalf("check of the demo store exited %d:\n%s", code, out)
	}
	if code, _, errs := runCLI(t, "demo", dir); code == 0 || !strings.Contains(errs, "not empty") {
		t.Fatalf("demo into a non-empty directory: exit %d, %s", code, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	if code, _, _ := runCLI(t, "nope"); code != 2 {
		t.Errorf("unknown command exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "info"); code != 2 {
		t.Errorf("info without a store: exit %d, want 2", code)
	}
	if code, _, errs := runCLI(t, "info", filepath.Join(t.TempDir(), "missing")); code != 1 || errs == "" {
		t.Errorf("info of a missing store: exit %d, stderr %q", code, errs)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCompactReclaimsDeadSpace(t *testing.T) {
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	shard := filepath.Join(dir, "uint16_scrambled", "c", "0", "0")
	before := len(readFile(t, shard))
	code, out, errs := runCLI(t, "compact", dir, "uint16_scrambled")
	if code != 0 || !strings.Contains(out, "compacted 3 of 3 shards") {
		t.Fatalf("compact exited %d: %s%s", code, out, errs)
	}
	if after := len(readFile(t, shard)); after >= before {
		t.Fatalf("shard is %d bytes after compaction, %d before", after, before)
	}
	if code, out, _ := runCLI(t, "compact", dir); code != 0 || !strings.Contains(out, "compacted 0 of") {
		t.Fatalf("second compact: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "check", dir); code != 0 {
		t.Fatalf("check after compact: exit %d\n%s", code, out)
	}
	for _, g := range arrays {
		if g.Path != "uint16_scrambled" {
			continue
		}
		s, _ := store.OpenDir(dir, true)
		defer s.Close()
		h, _ := zarr.Open(context.Background(), s)
		n, _ := h.Node(g.Path)
		if got, err := zarrtest.DigestArray(context.Background(), n.Array); err != nil || got != g.Digest {
			t.Fatalf("content changed by compaction: %s, %v", got, err)
		}
	}
}
