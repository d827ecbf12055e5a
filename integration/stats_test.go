package integration_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// mountStats is the part of MNT/.zarrfs/stats the tests look at.
type mountStats struct {
	Cache struct {
		Misses   uint64 `json:"misses"`
		MaxBytes int64  `json:"max_bytes"`
	} `json:"cache"`
	IndexLoads uint64 `json:"index_loads"`
	Served     struct {
		PassThroughBytes uint64 `json:"pass_through_bytes"`
		TranscodedBytes  uint64 `json:"transcoded_bytes"`
		MetadataBytes    uint64 `json:"metadata_bytes"`
	} `json:"served"`
	Errors      map[string]uint64 `json:"errors"`
	Requests    map[string]uint64 `json:"requests"`
	Coalesced   uint64            `json:"coalesced"`
	Fetched     uint64            `json:"fetched_bytes"`
	Unpublished int               `json:"unpublished"`
	Cluster     map[string]any    `json:"cluster"`
	Transcodes  uint64            `json:"transcodes"`
	Pushed      uint64            `json:"pushed"`
	ReadAhead   uint64            `json:"read_ahead"`
	URing       uint64            `json:"uring_requests"`
}

// readStats reads the stats file and checks that stat(2) gives its size.
func readStats(t *testing.T, root string) mountStats {
	t.Helper()
	path := filepath.Join(root, ".zarrfs", "stats")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s mountStats
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", path, err, b)
	}
	if s.Errors == nil {
		t.Errorf("%s has no errors object:\n%s", path, b)
	}
	return s
}

// listNames lists the names in dir.
func listNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestStatsFile reads MNT/.zarrfs/stats of read-only, read-write and
// single-view mounts: it is in no listing, before or after a lookup, its counters are current at
// every read (read-only mounts let the kernel cache file contents), and
// they count what was served, the cache bound and the errors returned.
func TestStatsFile(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	h := scanStore(t, dir)
	var bigEndian *storedArray // inner chunks end with a crc32c
	for _, sa := range h.arrays {
		if sa.path() == "float32_bigendian" {
			bigEndian = sa
		}
	}
	for _, args := range [][]string{{"--ro"}, {}, {"--ro", "--view", "v2"}} {
		t.Run(strings.Join(append([]string{"mount"}, args...), " "), func(t *testing.T) {
			m := mount(t, dir, append(args, "--cache-size", "32MiB")...)
			root, v2 := m.Dir, filepath.Join(m.Dir, "v2")
			if slices.Contains(args, "v2") {
				v2 = m.Dir
			}
			listings := map[string][]string{}
			for _, d := range []string{root, v2} {
				listings[d] = listNames(t, d)
				if slices.Contains(listings[d], ".zarrfs") {
					t.Errorf("%s lists .zarrfs", d)
				}
			}
			before := readStats(t, root)
			if before.Cache.MaxBytes != 32<<20 || before.Served.PassThroughBytes != 0 {
				t.Errorf("stats of a fresh mount: %+v", before)
			}
			readAll(t, v2)
			after := readStats(t, root)
			if after.IndexLoads == 0 || after.Cache.Misses == 0 || after.Served.PassThroughBytes == 0 ||
				after.Served.TranscodedBytes == 0 || after.Served.MetadataBytes == 0 {
				t.Errorf("stats after reading every file: %+v", after)
			}
			if fi, err := os.Stat(filepath.Join(root, ".zarrfs")); err != nil || !fi.IsDir() {
				t.Errorf("stat .zarrfs: %v", err)
			}
			// Once looked up, it is still in no listing: find, rsync and
			// tar count the same files whatever ran before them.
			for d, want := range listings {
				if got := listNames(t, d); !slices.Equal(got, want) {
					t.Errorf("%s after a lookup of .zarrfs lists %q, before %q", d, got, want)
				}
			}
			// A chunk whose bytes fail their checksum is an EIO, counted.
			c := bigEndian.chunks[0]
			if _, err := os.ReadFile(filepath.Join(v2, bigEndian.path(), v2Keys(".").Key(c.coords))); err != nil {
				t.Fatal(err)
			}
			if n := readStats(t, root).Errors["EIO"]; n != 0 {
				t.Errorf("%d EIO before any error", n)
			}
		})
	}
}

// TestStatsErrors damages an inner chunk: reading it fails with EIO, and
// the stats file counts each failure.
func TestStatsErrors(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	h := scanStore(t, dir)
	for _, sa := range h.arrays {
		if sa.path() != "float32_bigendian" { // inner chunks end with a crc32c
			continue
		}
		c := sa.chunks[0]
		shard := filepath.Join(dir, filepath.FromSlash(c.shard))
		b, err := os.ReadFile(shard)
		if err != nil {
			t.Fatal(err)
		}
		b[c.off] ^= 0xff
		if err := os.WriteFile(shard, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m := mount(t, dir, "--ro")
		path := filepath.Join(m.Dir, "v2", sa.path(), v2Keys(".").Key(c.coords))
		for range 2 {
			if _, err := os.ReadFile(path); !errors.Is(err, syscall.EIO) {
				t.Fatalf("read %s: %v, want EIO", path, err)
			}
		}
		if n := readStats(t, m.Dir).Errors["EIO"]; n < 2 {
			t.Errorf("the stats file counts %d EIO after two failed reads", n)
		}
		return
	}
	t.Fatal("the generated store has no float32_bigendian array")
}

// TestStatsInterval: --stats-interval logs the counters periodically, one
// line each, with the stats file's names; a negative interval is refused.
func TestStatsInterval(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV2Store(t, dir)
	m := mount(t, dir, "--ro", "--stats-interval", "50ms")
	readAll(t, m.Dir)
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(m.Log(), "msg=stats") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	var lines []string
	for line := range strings.SplitSeq(m.Log(), "\n") {
		if strings.Contains(line, "msg=stats") {
			lines = append(lines, line)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("%d stats lines logged in 10s, want at least 2:\n%s", len(lines), m.Log())
	}
	for _, key := range []string{"cache.hits=", "index_loads=", "served.pass_through_bytes="} {
		if !strings.Contains(lines[len(lines)-1], key) {
			t.Errorf("stats line lacks %s: %s", key, lines[len(lines)-1])
		}
	}

	mnt := t.TempDir()
	out, err := exec.Command(zarrfsBin, "mount", "--stats-interval", "-1s", dir, mnt).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--stats-interval") {
		t.Errorf("mount --stats-interval -1s: %v, %q; want a failure naming the flag", err, out)
	}
}
