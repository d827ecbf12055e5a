// Package zarrtest helps tests across zarrfs: it finds the shared fixtures
// and the independent oracle readers, computes the oracles' content digest,
// and generates stores with layouts no fixture has.
package zarrtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/zarrtest/missing"
)

// RepoRoot is the directory holding go.mod, found from the working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Missing skips the test, visibly, or fails it under CI=true: see
// missing.Report.
var Missing = missing.Report

// Shared returns ../shared beside the repository, or skips the test with a
// visible message when it is absent (Missing).
func Shared(t testing.TB) string {
	t.Helper()
	shared := filepath.Join(filepath.Dir(RepoRoot(t)), "shared")
	if _, err := os.Stat(filepath.Join(shared, "fixtures", "EXPECTED.jsonl")); err != nil {
		Missing(t, "%s/fixtures is absent; this test needs the shared fixtures", shared)
	}
	return shared
}

// Fixtures returns ../shared/fixtures, or skips the test.
func Fixtures(t testing.TB) string { return filepath.Join(Shared(t), "fixtures") }
