package main

import (
	"slices"
	"strings"
	"testing"
)

// TestOptionFlags maps fstab options to the flags of zarrfs mount:
// fstab-only options go, the others become flags, which refuse unknown
// names.
func TestOptionFlags(t *testing.T) {
	got, err := optionFlags("defaults,ro,allow_other,cache_size=1GiB,noauto,nofail,_netdev,user,x-systemd.automount,x-systemd.idle-timeout=60,comment=x,log_file=/var/log/z.log,s3_path_style,,rw")
	want := []string{"--ro", "--allow-other", "--cache-size=1GiB", "--log-file=/var/log/z.log", "--s3-path-style"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("optionFlags: %q, %v; want %q", got, err, want)
	}
	if _, err := optionFlags("ro,=x"); err == nil {
		t.Errorf("optionFlags accepted an option without a name")
	}
	// An option zarrfs mount does not know fails there, named.
	code, _, stderr := runCLI(t, "mount", "--no-such-option", "a", "b")
	if code != 2 || !strings.Contains(stderr, "no-such-option") {
		t.Errorf("mount with an unknown option: exit %d, %q", code, stderr)
	}
}

// TestMountHelperArgs: the helper refuses what mount(8) never passes, and
// -f (fake) mounts nothing.
func TestMountHelperArgs(t *testing.T) {
	for _, args := range [][]string{{"store"}, {"store", "mnt", "extra"}, {"store", "mnt", "-x"}, {"store", "mnt", "-o", "=bad"}} {
		if code := runMountHelper(t.Context(), args, nil, &strings.Builder{}); code != 1 {
			t.Errorf("mount.fuse.zarrfs %q: exit %d, want 1", args, code)
		}
	}
	if code := runMountHelper(t.Context(), []string{"store", "mnt", "-f", "-o", "ro"}, nil, &strings.Builder{}); code != 0 {
		t.Errorf("mount.fuse.zarrfs -f: exit %d, want 0 (nothing to do)", code)
	}
}
