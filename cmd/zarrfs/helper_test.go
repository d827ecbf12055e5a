package main

import (
	"strings"
	"testing"
)

// TestMountHelperArgs: the helper refuses what mount(8) never passes, and
// -f (fake) mounts nothing.
func TestMountHelperArgs(t *testing.T) {
	for _, args := range [][]string{{"store"}, {"store", "mnt", "extra"}, {"store", "mnt", "-x"}, {"store", "mnt", "-o", "=bad"}} {
		if code := runMountHelper(t.Context(), args, nil, &strings.Builder{}); code == 0 {
			t.Errorf("mount.fuse.zarrfs %q: exit 0, want a failure", args)
		}
	}
	if code := runMountHelper(t.Context(), []string{"store", "mnt", "-f", "-o", "ro"}, nil, &strings.Builder{}); code != 0 {
		t.Errorf("mount.fuse.zarrfs -f: exit %d, want 0 (nothing to do)", code)
	}
	// A bad option is named as the fstab line writes it.
	var stderr strings.Builder
	if code := runMountHelper(t.Context(), []string{"store", "mnt", "-o", "ro,cache_sise=1GiB"}, nil, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), `unknown mount option "cache_sise=1GiB"; did you mean cache_size?`) {
		t.Errorf("mount.fuse.zarrfs -o cache_sise=1GiB: exit %d, %q; want the option named", code, stderr.String())
	}
	stderr.Reset()
	if code := runMountHelper(t.Context(), []string{"store", "mnt", "-o", "ro,cache_size=lots"}, nil, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "mount option cache_size") || strings.Contains(stderr.String(), "--cache-size") {
		t.Errorf("mount.fuse.zarrfs -o cache_size=lots: exit %d, %q; want the option named, not the flag", code, stderr.String())
	}
}
