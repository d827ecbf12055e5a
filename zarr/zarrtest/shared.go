// Package zarrtest helps tests across zarrfs: it finds the shared fixtures
// and the independent oracle readers, computes the oracles' content digest,
// and generates stores with layouts no fixture has.
package zarrtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
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

// Missing skips the test with a visible message saying what it needs, or
// fails it when CI is set: CI installs every client and fixture the tests
// use (.ci/run), so there a missing one is a broken setup, not a pass.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set and " + msg)
	}
	t.Skip("SKIP: " + msg)
}

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
