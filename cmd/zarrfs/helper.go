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
	if fake {
		return 0
	}
	// Options come first: flags after them win (--daemon, the arguments).
	args = append([]string{"--daemon", "--"}, positional...)
	if len(options) > 0 {
		args = append([]string{"-o", strings.Join(options, ",")}, args...)
	}
	return runMount(ctx, args, stdout, stderr)
}
