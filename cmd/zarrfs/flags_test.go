package main

import (
	"slices"
	"strings"
	"testing"
)

// TestParseFlagsAnywhere: flags are read before and after the arguments,
// -- ends them, -o options set the flags of their names, and a mistake
// is one line with the hint.
func TestParseFlagsAnywhere(t *testing.T) {
	var stderr strings.Builder
	fs := newFlags("mount", "STORE MOUNTPOINT", &stderr)
	ro := fs.Bool("ro", false, "read-only")
	size := fs.String("cache-size", "256MiB", "cache")
	addMountOptions(fs)
	if code, ok := parse(fs, []string{"store", "--ro", "mnt", "-o", "cache_size=1GiB,noauto", "--", "-x"}, 2, 3); !ok {
		t.Fatalf("parse: exit %d, %q", code, stderr.String())
	}
	if !*ro || *size != "1GiB" || !slices.Equal(fs.Args(), []string{"store", "mnt", "-x"}) {
		t.Errorf("parse: ro %v, cache-size %q, args %q; want true, 1GiB and store mnt -x", *ro, *size, fs.Args())
	}
	for _, args := range [][]string{{"store", "mnt", "--rox"}, {"store"}, {"-o", "cache_sise=1", "s", "m"}, {"-o", "cache_size", "s", "m"}} {
		stderr.Reset()
		fs := newFlags("mount", "STORE MOUNTPOINT", &stderr)
		fs.Bool("ro", false, "read-only")
		fs.String("cache-size", "256MiB", "cache")
		addMountOptions(fs)
		code, ok := parse(fs, args, 2, 2)
		if ok || code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "zarrfs mount -h") {
			t.Errorf("parse %q: exit %d, %q; want 2 and one line with the hint", args, code, stderr.String())
		}
	}
}
