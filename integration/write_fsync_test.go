package integration_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteAfterFsyncMounted: a chunk file of a real mount written,
// fsync'd, then overwritten on the same descriptor with bytes close
// refuses (EINVAL) keeps what fsync acknowledged: the file shows it, and
// after unmounting `zarrfs check` finds every shard whole and a new mount
// shows the fsync'd bytes (the mount used to publish the refused ones).
func TestWriteAfterFsyncMounted(t *testing.T) {
	dir, _ := writeStore(t)
	h := openView(t, dir)
	arrays := []string{"complex64_crc", "uint16_zstd_end"} // crc32c, zstd
	m := mount(t, dir)
	files := map[string][]byte{} // chunk file in the mount -> the fsync'd bytes
	for _, path := range arrays {
		n, _ := h.Node(path)
		file := chunkPath("", "v3", "", n.Array, firstStoredInner(t, n.Array))
		good, err := os.ReadFile(filepath.Join(m.Dir, file))
		if err != nil {
			t.Fatal(err)
		}
		files[file] = good
		fd, err := os.OpenFile(filepath.Join(m.Dir, file), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fd.Write(good); err != nil {
			t.Fatal(err)
		}
		if err := fd.Sync(); err != nil {
			t.Fatalf("%s: fsync: %v", file, err)
		}
		if _, err := fd.WriteAt(bytes.Repeat([]byte{0xde}, len(good)), 0); err != nil {
			t.Fatal(err)
		}
		if err := fd.Close(); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: close after writing garbage = %v, want EINVAL", file, err)
		}
		if got, _ := os.ReadFile(filepath.Join(m.Dir, file)); !bytes.Equal(got, good) {
			t.Errorf("%s: after the refused close the file holds %x, want what was fsync'd, %x", file, got, good)
		}
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(zarrfsBin, "check", dir).CombinedOutput(); err != nil {
		t.Errorf("zarrfs check after the mount published: %v\n%s", err, out)
	}
	ro := mount(t, dir, "--ro")
	for file, good := range files {
		if got, err := os.ReadFile(filepath.Join(ro.Dir, file)); err != nil || !bytes.Equal(got, good) {
			t.Errorf("%s in the store: %x (%v), want what was fsync'd, %x", file, got, err, good)
		}
	}
}
