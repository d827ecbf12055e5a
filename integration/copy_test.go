package integration_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCopyOneWritePerChunk copies a native v2 array of 512 KiB chunks into
// the mount with cp -r: cp sizes its buffer by the destination's
// st_blksize (at least 128 KiB), so each chunk file must reach zarrfs as
// one WRITE request, one round trip, not one per 128 KiB. The copy reads
// back as written.
func TestCopyOneWritePerChunk(t *testing.T) {
	native := filepath.Join(t.TempDir(), "native")
	if err := os.Mkdir(native, 0o755); err != nil {
		t.Fatal(err)
	}
	// uint16, 512 KiB raw chunks, 2x1x2 of them.
	zarray := `{"zarr_format":2,"shape":[32,128,256],"chunks":[16,128,128],"dtype":"<u2","compressor":null,"fill_value":0,"order":"C","filters":null}`
	files := map[string][]byte{".zarray": []byte(zarray)}
	for _, key := range []string{"0.0.0", "0.0.1", "1.0.0", "1.0.1"} {
		files[key] = bytes.Repeat([]byte(key+"-data"), 512<<10/len(key+"-data")+1)[:512<<10]
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(native, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	v3Root(t, dir)
	addr := freeAddr(t)
	m := mount(t, dir, "--metrics-listen", addr)
	before, _ := metricValue(scrape(t, addr), "zarrfs_fuse_request_duration_seconds", "op", "WRITE")
	copied := filepath.Join(m.Dir, "v2", "copied")
	if out, err := exec.Command("cp", "-r", native, copied).CombinedOutput(); err != nil {
		t.Fatalf("cp -r: %v\n%s\nzarrfs log:\n%s", err, out, m.Log())
	}
	writes, _ := metricValue(scrape(t, addr), "zarrfs_fuse_request_duration_seconds", "op", "WRITE")
	if got := writes - before; got != float64(len(files)) {
		var st syscall.Stat_t
		syscall.Stat(filepath.Join(copied, "0.0.0"), &st)
		t.Errorf("cp -r of %d files sent %v WRITE requests; want one a file (st_blksize of a chunk file: %d)", len(files), got, st.Blksize)
	}
	for name, want := range files {
		if name == ".zarray" {
			continue
		}
		if got, err := os.ReadFile(filepath.Join(copied, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s reads back %d bytes (%v); %d were copied", name, len(got), err, len(want))
		}
	}
}
