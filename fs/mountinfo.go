package fs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Mounted reports whether something is mounted at dir, from
// /proc/self/mountinfo.
func Mounted(dir string) (bool, error) {
	fields, err := mountEntry(dir)
	return fields != nil, err
}

// MountEntry is what the mount table says of a mount.
type MountEntry struct {
	FSType string // fuse.zarrfs, tmpfs, ...
	Source string // zarrfs:STORE for a zarrfs mount
}

// MountAt returns the entry of the mount on top at dir, nil when nothing
// is mounted there.
func MountAt(dir string) (*MountEntry, error) {
	fields, err := mountEntry(dir)
	if fields == nil {
		return nil, err
	}
	// The optional fields end with "-"; the file system type and the
	// source follow.
	for i, f := range fields {
		if f == "-" && i+2 < len(fields) {
			return &MountEntry{FSType: unescapeMountinfo(fields[i+1]), Source: unescapeMountinfo(fields[i+2])}, nil
		}
	}
	return nil, fmt.Errorf("/proc/self/mountinfo: no file system type for %s", dir)
}

// Connection returns the FUSE connection of the mount at dir: its name
// under /sys/fs/fuse/connections (the minor device number).
func Connection(dir string) (string, error) {
	fields, err := mountEntry(dir)
	if err != nil {
		return "", err
	}
	if fields == nil {
		return "", fmt.Errorf("%s is not a mount point", dir)
	}
	_, minor, _ := strings.Cut(fields[2], ":")
	return minor, nil
}

// setReadAhead lets the kernel read up to maxReadAhead bytes of a file
// of the mount at dir (resolved, see ResolveDir) ahead in one READ
// request. A FUSE INIT reply can only lower a mount's read-ahead below the
// kernel's default of 128 KiB, so that every chunk file larger than that
// took several requests to read. The setting belongs to the mount's own
// backing device info (named by its device number) and goes away with it.
// Only root may change it. It reads no file of the mount, so a request
// handler may call it.
func setReadAhead(dir string, maxReadAhead int) error {
	fields, err := mountEntryAt(dir)
	if err != nil {
		return err
	}
	if fields == nil {
		return fmt.Errorf("%s is not a mount point", dir)
	}
	return os.WriteFile(filepath.Join("/sys/class/bdi", fields[2], "read_ahead_kb"), []byte(strconv.Itoa(maxReadAhead>>10)), 0)
}

// mountEntry returns the fields of the last /proc/self/mountinfo line of
// the mount at dir (the one on top), nil when nothing is mounted there.
func mountEntry(dir string) ([]string, error) {
	abs, err := ResolveDir(dir)
	if err != nil {
		return nil, err
	}
	return mountEntryAt(abs)
}

// ResolveDir returns dir as /proc/self/mountinfo names it: absolute, with
// symbolic links resolved.
func ResolveDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return abs, nil
}

// mountEntryAt is mountEntry of a resolved directory.
func mountEntryAt(abs string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountinfo(fields[4]) == abs {
			found = fields
		}
	}
	return found, sc.Err()
}

// unescapeMountinfo decodes the octal escapes of mountinfo paths (\040 for
// a space, \011 tab, \012 newline, \134 backslash).
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if c, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
