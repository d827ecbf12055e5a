package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
)

// TestCountedRemote sends real requests through the latency and the
// counter to a web server: each is counted by kind once, with the bytes
// of its response body, and take starts the count again.
func TestCountedRemote(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shard"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer web.Close()
	c, u, stop, err := countedRemote(web.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(rng string) {
		req, _ := http.NewRequest(http.MethodGet, u+"/shard", nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get("bytes=-10")
	get("bytes=100-199")
	get("")
	counts, n := c.take()
	want := map[string]int{"suffix GET": 1, "ranged GET": 1, "GET": 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) || n != 10+100+1000 {
		t.Fatalf("counted %v and %d bytes, want %v and 1110", counts, n, want)
	}
	if counts, n := c.take(); len(counts) != 0 || n != 0 {
		t.Fatalf("a second take counted %v and %d bytes, want nothing", counts, n)
	}
}

func TestChunkCoords(t *testing.T) {
	got, err := chunkCoords("array/c/3/0/12")
	if err != nil || fmt.Sprint(got) != "[3 0 12]" {
		t.Fatalf("chunkCoords = %v, %v; want [3 0 12]", got, err)
	}
	for _, bad := range []string{"array/0.0.0", "array/c/1/x/2"} {
		if _, err := chunkCoords(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("chunkCoords(%q) = %v, want an error naming the key", bad, err)
		}
	}
}

// TestCompareChecks builds the table from made-up measurements and reads
// each check's result: a zarrfs cell over 1.0 (but in the 16-thread row),
// io_uring slower than /dev/fuse, a contender faster than zarrfs, too many
// bytes or index requests and too much memory each turn their check MISS
// and are named in it; the others PASS.
func TestCompareChecks(t *testing.T) {
	s := func(d time.Duration) sample { return sample{d, d, d} }
	cs := []contender{{name: "zarrfs /dev/fuse", zarrfs: true}, {name: "zarrfs io_uring", zarrfs: true}, {name: "rclone"}, {name: "s3fs", skip: "not installed"}}
	var cells [compareRows][]*cell
	for r := range cells {
		cells[r] = make([]*cell, len(cs))
		for i := range 3 {
			cells[r][i] = &cell{times: s(time.Duration(5+i) * time.Second), reqs: map[string]int{"suffix GET": 16}, rss: 100 << 20}
		}
	}
	cells[rowPython][2], cells[rowWarmPython][2] = nil, nil // rclone cannot
	cells[rowZarrita16][0].times = s(20 * time.Second)      // not checked against 1.0
	cells[rowZarrita16][2].times = s(30 * time.Second)      // and rclone slower there
	cells[rowCat][1].times = s(11 * time.Second)            // io_uring over 1.0, behind rclone
	cells[rowZarrita][1].reqs["suffix GET"] = 32            // revalidated
	cells[rowRandom][0].fetched = 3 << 20                   // 3x the 1 MiB needed
	cells[rowWarmZarrita][1].rss = 400 << 20                // over 256 + 64 MiB
	b := &bench{}
	b.compareTable(cs, cells, s(10*time.Second), s(10*time.Second), nil, nil, 1<<20, 16)
	var checks []row
	for _, r := range b.rows {
		if r.pass != nil {
			checks = append(checks, r)
		}
	}
	want := map[string]bool{
		"zarrfs /dev/fuse: every cell <= 1.0":                                    true,
		"zarrfs /dev/fuse: 200 random chunks fetch <= 2x the bytes they need":    false,
		"zarrfs /dev/fuse: a whole-array read makes one index request per shard": true,
		"zarrfs /dev/fuse: peak RSS <= --cache-size + 64 MiB":                    true,
		"zarrfs /dev/fuse ahead of rclone in every row":                          true,
		"zarrfs io_uring: every cell <= 1.0":                                     false,
		"zarrfs io_uring: 200 random chunks fetch <= 2x the bytes they need":     true,
		"zarrfs io_uring: a whole-array read makes one index request per shard":  false,
		"zarrfs io_uring: peak RSS <= --cache-size + 64 MiB":                     false,
		"zarrfs io_uring ahead of rclone in every row":                           false,
		"io_uring <= /dev/fuse in every row":                                     false,
	}
	for prefix, pass := range want {
		found := false
		for _, r := range checks {
			if strings.HasPrefix(r.name, prefix) {
				found = true
				if *r.pass != pass {
					t.Errorf("check %q: pass=%v, want %v", r.name, *r.pass, pass)
				}
			}
		}
		if !found {
			t.Errorf("no check %q", prefix)
		}
	}
	if len(checks) != len(want) {
		t.Errorf("%d checks, want %d (s3fs, skipped, has none)", len(checks), len(want))
	}
	for _, miss := range []string{"cat of every file 1.10", "32 suffix GETs", "400 MiB", "fetched 3 MiB"} {
		found := false
		for _, r := range checks {
			found = found || !*r.pass && strings.Contains(r.name, miss)
		}
		if !found {
			t.Errorf("no check that missed names %q", miss)
		}
	}
}

// TestZarritaReads runs zarrita_read.mjs on a small sharded store, as
// files and over HTTP: the whole array reads the same both ways, and
// reading every chunk by its coordinates adds up to the whole.
func TestZarritaReads(t *testing.T) {
	oracle := os.Getenv("ZARRFS_ORACLE")
	if _, err := exec.LookPath("node"); oracle == "" || err != nil {
		msg := "zarrita is not installed: set ZARRFS_ORACLE to the oracle's oracle.mjs (.ci/run does this)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip("SKIP: " + msg)
	}
	dir := t.TempDir()
	spec := arraySpec{name: "a", typ: dtype.TypeUint16, shape: []int{16, 16}, shard: []int{8, 16}, inner: []int{4, 4}, codecs: []meta.Codec{bytesLE}}
	if err := writeStore(context.Background(), dir, []arraySpec{spec}); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(filepath.Dir(oracle), fmt.Sprintf("zarrfs-test-zarrita-read-%d.mjs", os.Getpid()))
	if err := os.WriteFile(script, zarritaReadJS, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(script) })
	web := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer web.Close()
	_, files, err := zarrita(script, dir, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	_, http, err := zarrita(script, web.URL, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	var all [][]int
	for i := range 4 {
		for j := range 4 {
			all = append(all, []int{i, j})
		}
	}
	picks := filepath.Join(dir, "picks.json")
	data, _ := json.Marshal(all)
	if err := os.WriteFile(picks, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, chunks, err := zarrita(script, web.URL, "a", picks)
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 || files != http || chunks != files {
		t.Fatalf("checksums: whole as files %v, over HTTP %v, chunk by chunk %v; want equal and not 0", files, http, chunks)
	}
	if err := os.WriteFile(picks, []byte("[[0,0]]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, one, err := zarrita(script, dir, "a", picks); err != nil || one == 0 || one >= files {
		t.Fatalf("one chunk: checksum %v, %v; want a part of %v", one, err, files)
	}
}
