package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestConsolidateCommand: consolidate exits 0 naming the document it
// wrote, 1 naming each node it left out, and refuses a root that is an
// array and a store it cannot write, changing nothing.
func TestConsolidateCommand(t *testing.T) {
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	code, out, errs := runCLI(t, "consolidate", dir)
	if code != 0 || !strings.Contains(out, filepath.Join(dir, zarr.ZarrJSON)) {
		t.Fatalf("consolidate of a healthy store exited %d:\n%s%s", code, out, errs)
	}

	os.Mkdir(filepath.Join(dir, "broken"), 0o755)
	os.WriteFile(filepath.Join(dir, "broken", zarr.ZarrJSON), []byte(`{"zarr_format":3,"node_type":"array"}`), 0o644)
	if code, out, errs := runCLI(t, "consolidate", dir); code != 1 || !strings.Contains(out, "LEFT OUT /broken: ") {
		t.Errorf("consolidate with a broken node exited %d, want 1 naming it:\n%s%s", code, out, errs)
	}

	array := filepath.Join(dir, arrays[0].Path)
	before, _ := os.ReadFile(filepath.Join(array, zarr.ZarrJSON))
	if code, _, errs := runCLI(t, "consolidate", array); code != 1 || !strings.Contains(errs, "the root is an array") {
		t.Errorf("consolidate of an array exited %d, want 1 saying the root is an array:\n%s", code, errs)
	}
	if after, _ := os.ReadFile(filepath.Join(array, zarr.ZarrJSON)); string(after) != string(before) {
		t.Errorf("consolidate of an array changed its zarr.json")
	}
	if code, _, errs := runCLI(t, "consolidate", "https://127.0.0.1:1/store"); code != 1 || !strings.Contains(errs, "not writable") {
		t.Errorf("consolidate of a web server's URL exited %d, want 1 saying it is not writable:\n%s", code, errs)
	}
}
