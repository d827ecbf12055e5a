package integration_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// linkStore writes a store of two arrays, a and b, of fixed-size
// uncompressed inner chunks (rewrites of the same size are patched in
// place), one shard each, and returns it with the arrays.
func linkStore(t *testing.T) (dir string, a, b *zarr.Array) {
	t.Helper()
	dir = t.TempDir()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	if err := zarr.CreateGroup(t.Context(), s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	arrays := make([]*zarr.Array, 2)
	for i, path := range []string{"a", "b"} {
		arr, err := zarr.CreateArrayV3(t.Context(), s, path, &meta.ArrayV3{
			Shape: []int{4, 4}, DataType: dtype.TypeUint8, ChunkShape: []int{4, 4}, FillValue: []byte{0},
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
			Codecs:      []meta.Codec{zarrtest.Sharding([]int{2, 2}, []meta.Codec{zarrtest.BytesLE}, []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}, "end")},
		})
		if err == nil {
			err = arr.Write(t.Context(), zarrtest.Pattern(arr, 3+i))
		}
		if err != nil {
			t.Fatal(err)
		}
		arrays[i] = arr
	}
	return dir, arrays[0], arrays[1]
}

// shardPath is the file of a's only shard.
func shardPath(dir string, a *zarr.Array) string {
	return filepath.Join(dir, filepath.FromSlash(a.ChunkKey([]int{0, 0})))
}

// linkShard makes a's shard a link: a hard link shared with a snapshot
// outside the store (cp -al, rsync --link-dest), or a symbolic link to
// b's shard. It returns the file the link shares, which no write of a
// may change, and its content.
func linkShard(t *testing.T, dir string, a, b *zarr.Array, hard bool) (shared string, content []byte) {
	t.Helper()
	if hard {
		shared = filepath.Join(t.TempDir(), "snapshot-shard")
		if err := os.Link(shardPath(dir, a), shared); err != nil {
			t.Fatal(err)
		}
	} else {
		shared = shardPath(dir, b)
		if err := os.Remove(shardPath(dir, a)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../../b/c/0/0", shardPath(dir, a)); err != nil {
			t.Fatal(err)
		}
	}
	return shared, readOrMissing(t, shared)
}

// checkLinkedWrite: the write of chunk (1, 1) of a reached a's own shard,
// a plain file now, and the file the link shared is unchanged.
func checkLinkedWrite(t *testing.T, dir string, a *zarr.Array, chunk []byte, shared string, content []byte) {
	t.Helper()
	if got := readOrMissing(t, shared); !bytes.Equal(got, content) {
		t.Errorf("writing a's chunk changed the file its shard was linked to (%s)", shared)
	}
	var st unix.Stat_t
	if err := unix.Lstat(shardPath(dir, a), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		t.Errorf("a's shard after the write: mode %o, %d links, %v; want a file of its own", st.Mode, st.Nlink, err)
	}
	if got, _ := storedInner(t, dir, a, []int{1, 1}); !bytes.Equal(got, chunk) {
		t.Errorf("a's chunk (1, 1) holds %v, want the %v written", got, chunk)
	}
}

// TestAttackWritesThroughLinks: a rewrite of the same size (patched in
// place) of a stored inner chunk whose shard is a hard link shared with a
// snapshot outside the store, or a symbolic link to another array's
// shard, changes neither, whether a mount publishes it or zarrfs recover
// replays it after the mount was killed; zarrfs compact and publishing
// refuse a lock file planted as a hard link to another array's shard,
// naming it, and change nothing.
func TestAttackWritesThroughLinks(t *testing.T) {
	chunk := []byte{0xde, 0xad, 0xbe, 0xef}
	for _, hard := range []bool{true, false} {
		name := map[bool]string{true: "hard link", false: "symbolic link"}[hard]
		t.Run("publish through a "+name, func(t *testing.T) {
			dir, a, b := linkStore(t)
			shared, content := linkShard(t, dir, a, b, hard)
			m := mount(t, dir)
			if err := writeTrunc(chunkPath(m.Dir, "v3", ".", a, []int{1, 1}), chunk); err != nil {
				t.Fatal(err)
			}
			if err := m.Stop(); err != nil {
				t.Fatal(err)
			}
			checkLinkedWrite(t, dir, a, chunk, shared, content)
		})
		t.Run("recover through a "+name, func(t *testing.T) {
			dir, a, b := linkStore(t)
			m := mount(t, dir)
			// Holding the shard's lock keeps the mount from publishing
			// the write before it is killed (TestUnmountUnpublished).
			lock, err := os.OpenFile(shardPath(dir, a)+".__lock", os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Close()
			if err := unix.FcntlFlock(lock.Fd(), unix.F_OFD_SETLKW, &unix.Flock_t{Type: unix.F_WRLCK}); err != nil {
				t.Fatal(err)
			}
			if err := writeTrunc(chunkPath(m.Dir, "v3", ".", a, []int{1, 1}), chunk); err != nil {
				t.Fatal(err)
			}
			syscall.Kill(m.Pid(), syscall.SIGKILL)
			m.Kill()
			lock.Close()
			shared, content := linkShard(t, dir, a, b, hard)
			if out, err := exec.Command(zarrfsBin, "recover", dir).CombinedOutput(); err != nil || !strings.Contains(string(out), "published 1 update") {
				t.Fatalf("zarrfs recover: %v\n%s", err, out)
			}
			checkLinkedWrite(t, dir, a, chunk, shared, content)
		})
	}
	t.Run("planted lock file", func(t *testing.T) {
		dir, a, b := linkStore(t)
		// Dead space in a's shard, for compact to reclaim.
		ix, body := shardIndex(t, dir, a, []int{0, 0})
		rewriteShard(t, dir, a, []int{0, 0}, body, ix, body+64+int64(a.Sharding().IndexSize()))
		lockName := a.ChunkKey([]int{0, 0}) + ".__lock"
		if err := os.Link(shardPath(dir, b), filepath.Join(dir, lockName)); err != nil {
			t.Fatal(err)
		}
		before := storeFiles(t, dir)
		out, err := exec.Command(zarrfsBin, "compact", dir).CombinedOutput()
		if !isExit(err, 1) || !strings.Contains(string(out), lockName) || !strings.Contains(string(out), "2 links") {
			t.Errorf("zarrfs compact with a lock file linked to another shard: %v, want exit 1 naming it\n%s", err, out)
		}
		requireSameFiles(t, before, storeFiles(t, dir))

		m := mount(t, dir)
		if err := writeTrunc(chunkPath(m.Dir, "v3", ".", a, []int{1, 1}), chunk); err != nil {
			t.Fatal(err)
		}
		err = m.Stop()
		if err == nil || !strings.Contains(err.Error(), lockName) {
			t.Errorf("unmounting with a write whose lock file is linked to another shard: %v, want a failure naming the lock file", err)
		}
		requireSameFiles(t, before, storeFiles(t, dir))
	})
}
