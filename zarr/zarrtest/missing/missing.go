// Package missing says that a test cannot run because something it needs
// (a client, a fixture, an emulator, root) is absent. It imports nothing of
// zarrfs, so the tests of every package can use it, those that zarrtest
// imports too.
package missing

import (
	"fmt"
	"os"
	"testing"
)

// Report skips the test with a visible message saying what it needs, or
// fails it when CI is set: CI installs every client and fixture the tests
// use (.ci/run), so there a missing one is a broken setup, not a pass.
func Report(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set and " + msg)
	}
	t.Skip("SKIP: " + msg)
}
