package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// helperNames are the names mount(8) runs zarrfs by, through a link:
// `mount -t fuse.zarrfs STORE MNT` (and an fstab line of that type) runs
// /sbin/mount.fuse.zarrfs STORE MNT -o OPTIONS.
var helperNames = []string{"mount.fuse.zarrfs", "mount.zarrfs"}

// fstabOnly are the options of fstab lines that mount(8), systemd or the
// kernel act on, not zarrfs (FUSE mounts are nosuid and nodev anyway).
var fstabOnly = map[string]bool{
	"defaults": true, "auto": true, "noauto": true, "_netdev": true, "nofail": true,
	"user": true, "users": true, "nouser": true, "owner": true, "group": true,
	"dev": true, "nodev": true, "suid": true, "nosuid": true, "exec": true, "noexec": true,
	"async": true, "atime": true, "noatime": true, "diratime": true, "nodiratime": true,
	"relatime": true, "norelatime": true, "strictatime": true, "lazytime": true, "rw": true,
}

// runMountHelper is `zarrfs mount --daemon` called the way mount(8) calls
// helpers: STORE MOUNTPOINT [-o OPTIONS] [-n] [-s] [-v] [-f] [-t TYPE].
// It returns once the mount is ready.
func runMountHelper(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var positional, options []string
	fake := false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-o" && i+1 < len(args):
			i++
			options = append(options, args[i])
		case strings.HasPrefix(a, "-o") && len(a) > 2:
			options = append(options, a[2:])
		case a == "-t" && i+1 < len(args):
			i++ // the type: fuse.zarrfs
		case a == "-f":
			fake = true
		case a == "-n" || a == "-s" || a == "-v":
			// no mtab to write, sloppy and verbose: nothing to do
		case strings.HasPrefix(a, "-"):
			return fail(stderr, fmt.Errorf("mount helper: unknown argument %q", a))
		default:
			positional = append(positional, a)
		}
	}
	if len(positional) != 2 {
		return fail(stderr, fmt.Errorf("usage: mount.fuse.zarrfs STORE MOUNTPOINT [-o OPTIONS]"))
	}
	flags, err := optionFlags(strings.Join(options, ","))
	if err != nil {
		return fail(stderr, err)
	}
	if fake {
		return 0
	}
	return runMount(ctx, append(append(flags, "--daemon"), positional...), stdout, stderr)
}

// optionFlags maps mount options to the flags of zarrfs mount: ro to --ro,
// NAME to --NAME, NAME=VALUE to --NAME=VALUE, with _ in NAME read as -
// (allow_other is --allow-other, cache_size=1GiB --cache-size=1GiB).
// Options for mount(8), systemd and the kernel are left out; the flags
// of zarrfs mount refuse any other.
func optionFlags(options string) ([]string, error) {
	var flags []string
	for o := range strings.SplitSeq(options, ",") {
		name, value, hasValue := strings.Cut(o, "=")
		if o == "" || fstabOnly[name] || strings.HasPrefix(name, "x-") || name == "comment" {
			continue
		}
		if name == "" || strings.HasPrefix(name, "-") {
			return nil, fmt.Errorf("mount option %q is not NAME or NAME=VALUE", o)
		}
		flag := "--" + strings.ReplaceAll(name, "_", "-")
		if hasValue {
			flag += "=" + value
		}
		flags = append(flags, flag)
	}
	return flags, nil
}
