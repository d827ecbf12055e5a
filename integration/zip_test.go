package integration_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// pythonZip packs the store at dir into a zip file with Python's zipfile
// (compression "STORED" or "DEFLATED"), as zarr-python's ZipStore does.
func pythonZip(t *testing.T, dir, compression string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "store.zip")
	script := `
import os, sys, zipfile
src, dst, method = sys.argv[1], sys.argv[2], getattr(zipfile, "ZIP_" + sys.argv[3])
with zipfile.ZipFile(dst, "w", method) as z:
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            z.write(p, os.path.relpath(p, src))
`
	if b, err := exec.Command("/usr/bin/python3", "-c", script, dir, out, compression).CombinedOutput(); err != nil {
		t.Fatalf("zipping %s: %v\n%s", dir, err, b)
	}
	return out
}

// TestZipStores: the generated stores packed in zip files by Python's
// zipfile, stored and deflated, mount read-only; the independent readers
// print the original digests through both views, and zarrfs check passes.
// A zip whose central directory is cut off is refused with a reason; a
// member whose data runs past the end of the zip gives EIO on its files
// only, with one log line naming it.
func TestZipStores(t *testing.T) {
	zarrtest.RequirePython(t)
	o := zarrtest.NewOracle(t)
	v3, v3Arrays, v2, v2Arrays := generated(t)
	for _, c := range []struct {
		name, dir   string
		compression string
		want        map[string]string
	}{
		{"v3 stored", v3, "STORED", generatedDigests(v3Arrays)},
		{"v3 deflated", v3, "DEFLATED", generatedDigests(v3Arrays)},
		{"v2 stored", v2, "STORED", generatedDigests(v2Arrays)},
	} {
		t.Run(c.name, func(t *testing.T) {
			zipped := pythonZip(t, c.dir, c.compression)
			m := mount(t, zipped)
			checkOracles(t, o, m.Dir, m.Log(), c.want)
			checkStore(t, zipped)
		})
	}

	t.Run("damaged", func(t *testing.T) {
		zipped := pythonZip(t, v3, "STORED")
		b, err := os.ReadFile(zipped)
		if err != nil {
			t.Fatal(err)
		}
		cut := filepath.Join(t.TempDir(), "cut.zip")
		if err := os.WriteFile(cut, b[:len(b)-30], 0o644); err != nil {
			t.Fatal(err)
		}
		if m, err := integration.Start(zarrfsBin, cut, t.TempDir()); err == nil {
			m.Kill()
			t.Error("a zip without its end of central directory mounted")
		} else if !strings.Contains(err.Error(), "central directory") {
			t.Errorf("mounting a zip without its end of central directory: %v, want the reason", err)
		}
		// Point the central directory entry of one shard past the end.
		a := storeArray(t, v3, "uint16_zstd_end")
		shard := a.ChunkKey([]int{1, 0})
		i := strings.LastIndex(string(b), shard) - 46
		if string(b[i:i+4]) != "PK\x01\x02" {
			t.Fatalf("no central directory entry for %s", shard)
		}
		copy(b[i+42:i+46], []byte{0xf0, 0xff, 0xff, 0x7f}) // the member's local header offset
		if err := os.WriteFile(zipped, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m := mount(t, zipped)
		var eio, read int
		for _, view := range views {
			for _, c := range [][]int{{4, 0}, {4, 1}, {1, 1}, {1, 2}} { // shard (1, 0), then (0, 0)
				_, err := os.ReadFile(chunkPath(m.Dir, view, ".", a, c))
				switch {
				case c[0] >= 4 && errors.Is(err, syscall.EIO):
					eio++
				case c[0] < 4 && err == nil:
					read++
				default:
					t.Errorf("%s %v: %v", view, c, err)
				}
			}
		}
		if n := strings.Count(m.Log(), "key="+shard+" "); n != 1 || !strings.Contains(m.Log(), "local header") {
			t.Errorf("%d log lines name %s, want one saying why:\n%s", n, shard, m.Log())
		}
		t.Logf("the damaged member's chunks: %d reads gave EIO; the others' %d reads their bytes", eio, read)
	})
}
