package main

import (
	"fmt"

	"github.com/zarrfs/zarrfs/fs"
)

// zarrfsType is the type of zarrfs mounts in the mount table.
const zarrfsType = "fuse.zarrfs"

// checkZarrfsMount refuses a mount point that is not a zarrfs mount's,
// saying what is mounted there instead: zarrfs umount is no umount(8).
func checkZarrfsMount(mnt string) error {
	m, err := fs.MountAt(mnt)
	switch {
	case err != nil:
		return nil // no mount table to read: the mount process or the kernel answers
	case m == nil:
		return fmt.Errorf("%s is not a mount point", mnt)
	case m.FSType != zarrfsType:
		return fmt.Errorf("%s is a %s mount (of %s), not a zarrfs mount: zarrfs umount leaves it alone (umount(8) unmounts it)", mnt, m.FSType, m.Source)
	}
	return nil
}
