package integration_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/integration"
)

// TestDiskCacheSwapped: a --cache-dir filled by one mount, whose entry
// files are then swapped pairwise (as someone planting entries would),
// makes the next mount read the store's bytes, not the swapped ones.
func TestDiskCacheSwapped(t *testing.T) {
	clusterStore(t, "dcs")
	arrays := append(slices.Clone(crcArrays), "uint16_zstd_end", "int32_gzip_start_nocrc")
	cacheDir := t.TempDir()
	first := mount(t, "s3://zarr/dcs", "--ro", "--cache-dir", cacheDir)
	want := arrayFiles(t, first.Dir, arrays, time.Minute)
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	var entries []string
	filepath.WalkDir(cacheDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			entries = append(entries, p)
		}
		return nil
	})
	slices.Sort(entries)
	if len(entries) < 10 {
		t.Fatalf("the first mount left %d cache entries, want many", len(entries))
	}
	for i := 0; i+1 < len(entries); i += 2 {
		a, b := entries[i], entries[i+1]
		tmp := a + ".swap"
		if err := os.Rename(a, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(b, a); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, b); err != nil {
			t.Fatal(err)
		}
	}
	second := mount(t, "s3://zarr/dcs", "--ro", "--cache-dir", cacheDir)
	sameFiles(t, "after the cache entries were swapped", arrayFiles(t, second.Dir, arrays, time.Minute), want)
	st := diskCacheStats(t, second.Dir)
	t.Logf("%d cache entries swapped; the second mount's disk cache: %+v", len(entries), st)
	if st.Rejected == 0 {
		t.Error("no swapped entry was counted as rejected")
	}
}

// diskCacheStats reads the disk_cache counters of the stats file.
func diskCacheStats(t *testing.T, root string) (s struct {
	Hits, Misses, Rejected uint64
}) {
	t.Helper()
	var st struct {
		DiskCache *struct {
			Hits, Misses, Rejected uint64
		} `json:"disk_cache"`
	}
	b, err := os.ReadFile(filepath.Join(root, ".zarrfs", "stats"))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil || st.DiskCache == nil {
		t.Fatalf("stats file: %v\n%s", err, b)
	}
	return *st.DiskCache
}

// TestDiskCacheUnsafeDir: a --cache-dir others can write, or another user
// owns, is refused with the reason; a new one is made 0700.
func TestDiskCacheUnsafeDir(t *testing.T) {
	clusterStore(t, "dcu")
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	theirs := t.TempDir()
	if err := os.Chown(theirs, 65534, 65534); err != nil { // nobody
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, reason string }{
		{open, "writable by its group or by others"},
		{theirs, "owned by uid 65534"},
	} {
		dir := filepath.Join(t.TempDir(), "mnt")
		os.Mkdir(dir, 0o755)
		m, err := integration.Start(zarrfsBin, "s3://zarr/dcu", dir, "--ro", "--cache-dir", c.dir)
		if err == nil {
			m.Stop()
			t.Errorf("a mount with --cache-dir %s (%s) was allowed", c.dir, c.reason)
		} else if !strings.Contains(err.Error(), c.reason) {
			t.Errorf("a mount with --cache-dir %s: %v; want the reason %q", c.dir, err, c.reason)
		}
	}
	fresh := filepath.Join(t.TempDir(), "new", "cache")
	mount(t, "s3://zarr/dcu", "--ro", "--cache-dir", fresh)
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("a new --cache-dir: %v, %v; want mode 0700", fi.Mode(), err)
	}
}
