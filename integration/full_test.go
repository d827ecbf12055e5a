package integration_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestDiskFull writes random inner chunks through a mount of a store on an
// 8 MiB tmpfs until a write fails: it must fail with ENOSPC, every shard
// must stay whole, and once space is freed and the store remounted, every
// write whose close returned must be in the store.
func TestDiskFull(t *testing.T) {
	fsDir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", fsDir).CombinedOutput(); err != nil {
		t.Skipf("SKIP: cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", fsDir).Run() })
	dir := filepath.Join(fsDir, "store")
	filler := filepath.Join(fsDir, "filler")
	if err := os.WriteFile(filler, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := zarrtest.OpenStore(t, dir)
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	m3 := &meta.ArrayV3{Shape: []int{1024, 1024}, DataType: dtype.TypeUint16, ChunkShape: []int{256, 256}, FillValue: make([]byte, 2),
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
		Codecs:      []meta.Codec{zarrtest.Sharding([]int{64, 64}, []meta.Codec{zarrtest.BytesLE}, []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}, "end")}}
	a, err := zarr.CreateArrayV3(ctx, s, "vol", m3)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	size := 64 * 64 * 2
	grid := a.InnerGrid()
	m := mount(t, dir)
	rng := rand.New(rand.NewPCG(1, 2))
	acked := map[string][]byte{} // by chunk file path, relative to v3/
	var full error
	for i := 0; i < 3000 && full == nil; i++ {
		c := []int{rng.IntN(grid[0]), rng.IntN(grid[1])}
		rel := filepath.Join("vol", filepath.FromSlash(a.Keys.Key(c)))
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		if err := writeTrunc(filepath.Join(m.Dir, "v3", rel), data); err != nil {
			full = err
			break
		}
		acked[rel] = data
	}
	t.Logf("%d chunks acknowledged before: %v", len(acked), full)
	if !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("writing until the disk is full ended with %v, want ENOSPC\n%s", full, m.Log())
	}
	m.Stop() // may fail to publish: what it could not stays journaled
	out, _ := exec.Command(zarrfsBin, "check", dir).CombinedOutput()
	if strings.Contains(string(out), "BROKEN ") {
		t.Errorf("a full disk left broken shards:\n%s", out)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	m = mount(t, dir)
	if err := m.Stop(); err != nil {
		t.Fatalf("remount after freeing space: %v\n%s", err, m.Log())
	}
	checkStore(t, dir)
	lost := 0
	for rel, want := range acked {
		c, ok := a.Keys.Parse(filepath.ToSlash(strings.TrimPrefix(rel, "vol/")), 2)
		if !ok {
			t.Fatalf("%s is no chunk key", rel)
		}
		if got, ok := storedInner(t, dir, a, c); !ok || string(got) != string(want) {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged writes are not in the store", lost, len(acked))
	}
}
