package integration_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

var chunkXattrs = []string{"user.zarr.shard", "user.zarr.offset", "user.zarr.nbytes", "user.zarr.codecs"}

// TestXattrs reads the extended attributes of every chunk file of both
// views with getxattr(2) and listxattr(2): they name the shard, offset and
// size the shard index gives and the codecs; metadata documents have none.
func TestXattrs(t *testing.T) {
	v3, _, v2, _ := generated(t)
	for name, dir := range map[string]string{"generated-v3": v3, "generated-v2": v2} {
		t.Run(name, func(t *testing.T) { checkXattrs(t, dir) })
	}
}

func checkXattrs(t *testing.T, dir string) {
	h := scanStore(t, dir)
	m := mount(t, dir, "--ro")
	var checked int
	for _, sa := range h.arrays {
		stored := sa.node.Array.Codecs
		if sc := sa.node.Array.Sharding(); sc != nil {
			stored = sc.Config().Codecs
		}
		for _, c := range sa.chunks {
			for _, v := range views {
				path := filepath.Join(m.Dir, v, sa.path(), sa.keys(v, ".").Key(c.coords))
				if names := listXattrs(t, path); !slices.Equal(names, chunkXattrs) {
					t.Errorf("listxattr %s: %q, want %q", path, names, chunkXattrs)
				}
				want := map[string]string{
					"user.zarr.shard":  c.shard,
					"user.zarr.offset": strconv.FormatInt(c.off, 10),
					"user.zarr.nbytes": strconv.FormatInt(c.n, 10),
				}
				for name, value := range want {
					if got := getXattr(t, path, name); got != value {
						t.Errorf("getxattr %s %s: %q, want %q", path, name, got, value)
					}
				}
				codecs := getXattr(t, path, "user.zarr.codecs")
				for _, s := range stored {
					if v == "v3" && !strings.Contains(codecs, s.Name) {
						t.Errorf("getxattr %s user.zarr.codecs: %q does not name %s", path, codecs, s.Name)
					}
				}
				if codecs == "" {
					t.Errorf("getxattr %s user.zarr.codecs is empty", path)
				}
				checked++
			}
		}
	}
	t.Logf("the xattrs of %d chunk files match the shard indexes", checked)

	doc := filepath.Join(m.Dir, "v2", ".zmetadata")
	if names := listXattrs(t, doc); len(names) != 0 {
		t.Errorf("listxattr %s: %q, want none", doc, names)
	}
	if _, err := retryEINTR(func() (int, error) { return syscall.Getxattr(doc, "user.zarr.shard", nil) }); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("getxattr %s user.zarr.shard: %v, want ENODATA", doc, err)
	}
	sa := h.arrays[0]
	chunk := filepath.Join(m.Dir, "v3", sa.path(), sa.keys("v3", ".").Key(sa.chunks[0].coords))
	if _, err := retryEINTR(func() (int, error) { return syscall.Getxattr(chunk, "user.zarr.nothing", nil) }); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("getxattr %s user.zarr.nothing: %v, want ENODATA", chunk, err)
	}
	if _, err := retryEINTR(func() (int, error) { return syscall.Getxattr(chunk, "user.zarr.shard", make([]byte, 1)) }); !errors.Is(err, syscall.ERANGE) {
		t.Errorf("getxattr %s user.zarr.shard into 1 byte: %v, want ERANGE", chunk, err)
	}
	if getfattr, err := exec.LookPath("getfattr"); err == nil {
		out, err := exec.Command(getfattr, "-d", "-m", "^user\\.zarr\\.", chunk).CombinedOutput()
		if want := `user.zarr.shard="` + sa.chunks[0].shard + `"`; err != nil || !strings.Contains(string(out), want) {
			t.Errorf("getfattr -d %s: %v, printed %q, want a line %s", chunk, err, out, want)
		}
	}
}

// listXattrs returns the names listxattr(2) gives, asking for the size first.
func listXattrs(t *testing.T, path string) []string {
	t.Helper()
	n, err := retryEINTR(func() (int, error) { return syscall.Listxattr(path, nil) })
	if err != nil {
		t.Fatalf("listxattr %s: %v", path, err)
	}
	buf := make([]byte, n)
	if n, err = retryEINTR(func() (int, error) { return syscall.Listxattr(path, buf) }); err != nil {
		t.Fatalf("listxattr %s: %v", path, err)
	}
	var names []string
	for _, name := range bytes.Split(buf[:n], []byte{0}) {
		if len(name) > 0 {
			names = append(names, string(name))
		}
	}
	return names
}

// getXattr returns an attribute getxattr(2) gives, asking for the size first.
func getXattr(t *testing.T, path, name string) string {
	t.Helper()
	n, err := retryEINTR(func() (int, error) { return syscall.Getxattr(path, name, nil) })
	if err != nil {
		t.Fatalf("getxattr %s %s: %v", path, name, err)
	}
	buf := make([]byte, n)
	if n, err = retryEINTR(func() (int, error) { return syscall.Getxattr(path, name, buf) }); err != nil {
		t.Fatalf("getxattr %s %s: %v", path, name, err)
	}
	return string(buf[:n])
}

// entry is a file or directory of a mount, as stat(2) and its directory's
// getdents(2) describe it.
type entry struct {
	stat   syscall.Stat_t
	direct uint64 // the inode number in the parent's listing
	data   []byte // what reading a file gives
}

// walkMount lstats, lists and reads everything below root, by path
// relative to it.
func walkMount(t *testing.T, root string) map[string]*entry {
	t.Helper()
	tree := map[string]*entry{}
	var walk func(rel string)
	walk = func(rel string) {
		dir := filepath.Join(root, rel)
		for _, de := range dirents(t, dir) {
			if de.Name == "." || de.Name == ".." {
				continue
			}
			p := filepath.Join(rel, de.Name)
			e := &entry{direct: de.Ino}
			tree[p] = e
			_, err := retryEINTR(func() (struct{}, error) { return struct{}{}, syscall.Lstat(filepath.Join(root, p), &e.stat) })
			if err == nil && de.Mode&syscall.S_IFDIR != 0 {
				walk(p)
				continue
			}
			if err == nil {
				e.data, err = os.ReadFile(filepath.Join(root, p))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	walk("")
	return tree
}

// dirents lists a directory with getdents(2) as go-fuse's posixtest does.
func dirents(t *testing.T, dir string) []fuse.DirEntry {
	t.Helper()
	fd, err := retryEINTR(func() (int, error) { return syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0) })
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	return readDirents(t, fd)
}

func readDirents(t *testing.T, fd int) []fuse.DirEntry {
	t.Helper()
	var out []fuse.DirEntry
	buf := make([]byte, 4096)
	for {
		n, err := retryEINTR(func() (int, error) { return unix.ReadDirent(fd, buf) })
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
		for todo := buf[:n]; len(todo) > 0; {
			var de fuse.DirEntry
			todo = todo[de.Parse(todo):]
			out = append(out, de)
		}
	}
}

// TestStat checks what stat(2) says about every file and directory of both
// views: st_size is the number of bytes read (for pass-through, checksum-
// dropping and transcoded chunk files alike), chunk files have their
// shard's mtime, modes are read-only, inode numbers are unique, equal to
// the listing's and the same after a remount; and writes fail with EROFS.
func TestStat(t *testing.T) {
	dir, _, _, _ := generated(t)
	h := scanStore(t, dir)
	m := mount(t, dir, "--ro")
	tree := walkMount(t, m.Dir)

	// Sizes, and which kind of v2 file each chunk is.
	var passThrough, dropped, transcoded int
	for p, e := range tree {
		if e.stat.Mode&syscall.S_IFMT == syscall.S_IFREG && int64(len(e.data)) != e.stat.Size {
			t.Errorf("%s: st_size %d, read %d bytes", p, e.stat.Size, len(e.data))
		}
	}
	for _, sa := range h.arrays {
		for _, c := range sa.chunks {
			stored := h.shardBytes(t, c)
			for _, v := range views {
				p := filepath.Join(v, sa.path(), sa.keys(v, ".").Key(c.coords))
				e, ok := tree[p]
				if !ok {
					t.Errorf("%s: not found by the walk", p)
					continue
				}
				if mtime := time.Unix(e.stat.Mtim.Unix()); !mtime.Equal(c.mtime) {
					t.Errorf("%s: mtime %v, its shard's %v", p, mtime, c.mtime)
				}
				switch {
				case v == "v3":
				case bytes.Equal(e.data, stored):
					passThrough++
				case bytes.Equal(e.data, stored[:max(0, len(stored)-4)]):
					dropped++
				default:
					transcoded++
				}
			}
		}
	}
	if passThrough == 0 || dropped == 0 || transcoded == 0 {
		t.Errorf("v2 chunk files: %d pass-through, %d without checksum, %d transcoded; want each kind", passThrough, dropped, transcoded)
	}
	t.Logf("%d entries; exact st_size of %d v2 pass-through, %d checksum-dropping and %d transcoded chunk files", len(tree), passThrough, dropped, transcoded)

	// Modes and inode numbers.
	inodes := map[uint64]string{}
	for p, e := range tree {
		want := uint32(syscall.S_IFREG | 0o444)
		if e.stat.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			want = syscall.S_IFDIR | 0o555
		}
		if e.stat.Mode != want {
			t.Errorf("%s: mode %o, want %o", p, e.stat.Mode, want)
		}
		if e.direct != e.stat.Ino {
			t.Errorf("%s: inode %d in its directory's listing, %d from stat", p, e.direct, e.stat.Ino)
		}
		if other, dup := inodes[e.stat.Ino]; dup {
			t.Errorf("%s and %s share inode %d", p, other, e.stat.Ino)
		}
		inodes[e.stat.Ino] = p
	}
	checkReadOnly(t, m.Dir, h)

	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	again := walkMount(t, mount(t, dir, "--ro").Dir)
	if len(again) != len(tree) {
		t.Errorf("%d entries after a remount, %d before", len(again), len(tree))
	}
	for p, e := range tree {
		if a, ok := again[p]; !ok || a.stat.Ino != e.stat.Ino {
			t.Errorf("%s: inode %d, after a remount %v", p, e.stat.Ino, a)
		}
	}
}

// checkReadOnly tries every kind of change on a chunk file, a metadata
// document and a directory of both views: each fails with EROFS.
func checkReadOnly(t *testing.T, root string, h *storedHierarchy) {
	t.Helper()
	sa := h.arrays[0]
	targets := []string{
		filepath.Join(root, "v3", sa.path(), sa.keys("v3", ".").Key(sa.chunks[0].coords)),
		filepath.Join(root, "v2", sa.path(), sa.keys("v2", ".").Key(sa.chunks[0].coords)),
		filepath.Join(root, "v2", sa.path(), ".zattrs"),
		filepath.Join(root, "v3", sa.path(), "zarr.json"),
	}
	for _, p := range targets {
		dir := filepath.Dir(p)
		changes := map[string]func() error{
			"write":    func() error { return os.WriteFile(p, []byte("x"), 0o644) },
			"open rw":  func() error { f, err := os.OpenFile(p, os.O_RDWR, 0); f.Close(); return err },
			"truncate": func() error { return os.Truncate(p, 0) },
			"create":   func() error { return os.WriteFile(filepath.Join(dir, "new"), nil, 0o644) },
			"mkdir":    func() error { return os.Mkdir(filepath.Join(dir, "new"), 0o755) },
			"unlink":   func() error { return os.Remove(p) },
			"rename":   func() error { return os.Rename(p, p+".moved") },
			"chmod":    func() error { return os.Chmod(p, 0o644) },
			"utimes":   func() error { return os.Chtimes(p, time.Now(), time.Now()) },
			"setxattr": func() error {
				_, err := retryEINTR(func() (struct{}, error) { return struct{}{}, syscall.Setxattr(p, "user.zarr.shard", []byte("x"), 0) })
				return err
			},
			"symlink": func() error { return os.Symlink(p, filepath.Join(dir, "link")) },
		}
		for name, change := range changes {
			if err := change(); !errors.Is(err, syscall.EROFS) {
				t.Errorf("%s %s: %v, want EROFS", name, p, err)
			}
		}
	}
	if _, err := os.Stat(targets[0]); err != nil {
		t.Errorf("after the refused changes: %v", err)
	}
}
