package integration_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestCrashZarrPythonKilled: zarr-python 2.13 writes whole chunks of an
// array (int32 with a crc32c the v2 view drops) through MNT/v2 of a
// read-write mount, and zarrfs is killed with SIGKILL at a random moment,
// crashIterations times. After each kill, before anything replays the
// journal: a read-only mount shows every write whose assignment returned,
// and `zarrfs check` finds every shard whole and names the unpublished
// journal (exit 1). Then `zarrfs recover` publishes it, after which the
// store itself, read by zarrfs's reader and by zarrita without any mount,
// holds every acknowledged write and `zarrfs check` exits 0.
func TestCrashZarrPythonKilled(t *testing.T) {
	zarrtest.RequirePython(t)
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	layout := crashLayouts[2] // crc: int32 [24 24], shards [12 12], inner chunks [4 4]
	createLayoutStore(t, dir, []writeLayout{layout})
	manifest := filepath.Join(t.TempDir(), "manifest")
	script, _ := filepath.Abs(filepath.Join("testdata", "zarr_crash_writer.py"))
	rng := rand.New(rand.NewPCG(7, 8))
	pending := 0
	for i := range crashIterations(t) {
		m := mount(t, dir)
		var out bytes.Buffer
		cmd := exec.Command("/usr/bin/python3", script, filepath.Join(m.Dir, "v2", layout.path), manifest, strconv.Itoa(i+1))
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Fatalf("round %d: zarr-python stopped before zarrfs was killed: %v\n%s\nzarrfs log:\n%s", i, err, out.String(), m.Log())
		case <-time.After(time.Duration(300+rng.IntN(1500)) * time.Millisecond):
		}
		syscall.Kill(m.Pid(), syscall.SIGKILL)
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("round %d: zarr-python was still blocked on the mount 10s after zarrfs was killed; aborting the connection", i)
			integration.Abort(m.Dir)
			err = <-done
		}
		if !isExit(err, 3) {
			t.Fatalf("round %d: zarr-python did not fail as a dead mount makes it fail (exit status 3): %v\n%s", i, err, out.String())
		}
		m.Kill()
		want := readWriteManifest(t, manifest)
		if checkAfterCrash(t, dir) {
			pending++
		}
		ro := mount(t, dir, "--ro")
		// The view's store is closed before unmounting: it holds the mount busy.
		rs, err := store.OpenDir(filepath.Join(ro.Dir, "v3"), true)
		if err != nil {
			t.Fatal(err)
		}
		if h, err := zarr.Open(context.Background(), rs); err != nil {
			t.Errorf("round %d: opening the read-only mount's v3 view: %v", i, err)
		} else {
			want.check(t, fmt.Sprintf("round %d, read-only mount before recovery", i), h, layout.path)
		}
		rs.Close()
		if err := ro.Stop(); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(zarrfsBin, "recover", dir).CombinedOutput(); err != nil {
			t.Fatalf("round %d: zarrfs recover: %v\n%s", i, err, out)
		}
		if out, err := exec.Command(zarrfsBin, "check", dir).CombinedOutput(); err != nil {
			t.Fatalf("round %d: zarrfs check after recover: %v\n%s", i, err, out)
		}
		h := openView(t, dir)
		want.check(t, fmt.Sprintf("round %d, the store after recovery", i), h, layout.path)
		if r := o.ZarritaAll(t, dir)[layout.path]; r.Error != "" || r.SHA256 != ownDigest(t, h, layout.path) {
			t.Errorf("round %d: zarrita reads %s: %q, digest %s; zarrfs's reader: %s", i, layout.path, r.Error, r.SHA256, ownDigest(t, h, layout.path))
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	w := readWriteManifest(t, manifest)
	t.Logf("%d kills: %d writes begun, %d acknowledged; %d kills left a journal to recover", crashIterations(t), w.begun, w.done, pending)
	if pending == 0 {
		t.Errorf("no kill left an unpublished journal: the test did not test recovery")
	}
}

// writeManifest is what zarr_crash_writer.py recorded: for each chunk, the
// value of its last acknowledged write (0, the fill value, if none) and the
// values of writes begun after it and never acknowledged, which a kill may
// or may not have let through.
type writeManifest struct {
	acked    map[[2]int]int32
	inflight map[[2]int][]int32
	begun    int // writes begun
	done     int // writes acknowledged
}

func readWriteManifest(t *testing.T, path string) *writeManifest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w := &writeManifest{acked: map[[2]int]int32{}, inflight: map[[2]int][]int32{}}
	chunkOf := map[int32][2]int{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		seq, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "B":
			i, _ := strconv.Atoi(f[2])
			j, _ := strconv.Atoi(f[3])
			chunkOf[int32(seq)] = [2]int{i, j}
			w.inflight[[2]int{i, j}] = append(w.inflight[[2]int{i, j}], int32(seq))
			w.begun++
		case "D":
			c := chunkOf[int32(seq)]
			w.acked[c] = int32(seq)
			w.inflight[c] = nil // one writer: everything before it on this chunk is settled
			w.done++
		}
	}
	return w
}

// check reads the array at path of h and compares each chunk with what the
// manifest allows: every element of a chunk holds one value, the last
// acknowledged one or a later unacknowledged one.
func (w *writeManifest) check(t *testing.T, what string, h *zarr.Hierarchy, path string) {
	t.Helper()
	n, ok := h.Node(path)
	if !ok || n.Array == nil {
		t.Fatalf("%s: %s is not an array (%v)", what, path, n.Err)
	}
	a := n.Array
	c, err := a.Read(context.Background())
	if err != nil {
		t.Fatalf("%s: reading %s: %v", what, path, err)
	}
	inner := a.ChunkShape // the mount's v3 view has no shards
	if sh := a.Sharding(); sh != nil {
		inner = sh.ChunkShape()
	}
	grid := []int{a.Shape[0] / inner[0], a.Shape[1] / inner[1]}
	for ci := range grid[0] {
		for cj := range grid[1] {
			key := [2]int{ci, cj}
			allowed := append([]int32{w.acked[key]}, w.inflight[key]...)
			var got int32
			for r := ci * inner[0]; r < (ci+1)*inner[0]; r++ {
				for col := cj * inner[1]; col < (cj+1)*inner[1]; col++ {
					v := int32(binary.LittleEndian.Uint32(c.Data[4*(r*a.Shape[1]+col):]))
					if r == ci*inner[0] && col == cj*inner[1] {
						got = v
					} else if v != got {
						t.Errorf("%s: chunk %d.%d is torn: holds %d and %d", what, ci, cj, got, v)
						return
					}
				}
			}
			if !slices.Contains(allowed, got) {
				t.Errorf("%s: chunk %d.%d holds %d; the manifest allows %v (last acknowledged first)", what, ci, cj, got, allowed)
			}
		}
	}
}
