package integration_test

import (
	"path/filepath"
	"testing"

	"github.com/zarrfs/zarrfs/fs/fuseuring"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestIOURingTransport serves mounts over FUSE-over-io_uring: both
// independent readers through a read-only mount, and zarr-python's writes
// through a writable one, checked against the copies it wrote alongside.
// The stats file must show that the requests came over the rings. (make
// test-io-uring runs every other test over io_uring too.)
func TestIOURingTransport(t *testing.T) {
	if err := fuseuring.Enable(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	if err := fuseuring.Available(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	o := zarrtest.NewOracle(t)
	v3, v3Arrays, _, _ := generated(t)
	t.Run("read", func(t *testing.T) {
		m := mount(t, v3, "--ro", "--fuse-transport", "io_uring")
		checkOracles(t, o, m.Dir, m.Log(), generatedDigests(v3Arrays))
		if s := readStats(t, m.Dir); s.URing < uint64(len(v3Arrays)) {
			t.Errorf("%d requests came over io_uring, fewer than the arrays read", s.URing)
		}
	})
	t.Run("write", func(t *testing.T) {
		zarrtest.RequirePython(t, "zarr")
		script, err := filepath.Abs(filepath.Join("testdata", "zarr_write.py"))
		if err != nil {
			t.Fatal(err)
		}
		dir, arrays := writeStore(t)
		m := mount(t, dir, "--fuse-transport", "io_uring")
		w := zarrPythonWrites(t, script, m, openView(t, dir), arrays, 3)
		if s := readStats(t, m.Dir); s.URing == 0 {
			t.Error("no request came over io_uring")
		}
		stop(t, m, dir)
		checkStore(t, dir)
		w.check(t, o, dir)
	})
}
