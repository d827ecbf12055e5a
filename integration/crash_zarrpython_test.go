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
// read-write mount, and zarrfs is killed with SIGKILL at a random moment
// after the round's first acknowledged write, crashIterations times. After each kill, before anything replays the
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
	initial := readInitial(t, dir, layout.path)
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
		t.Cleanup(func() { cmd.Process.Kill() }) // should the test stop before it exits
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// zarr-python starts slowly on a loaded machine: a kill before it
		// opened the array would test nothing (and fail it otherwise).
		stopped := func(err error) {
			t.Fatalf("round %d: zarr-python stopped before zarrfs was killed: %v\n%s\nzarrfs log:\n%s", i, err, out.String(), m.Log())
		}
		if exited, err := waitAcknowledged(t, manifest, i+1, done); exited {
			stopped(err)
		}
		select {
		case err := <-done:
			stopped(err)
		case <-time.After(time.Duration(rng.IntN(1500)) * time.Millisecond):
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
			want.check(t, fmt.Sprintf("round %d, read-only mount before recovery", i), h, layout.path, initial)
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
		want.check(t, fmt.Sprintf("round %d, the store after recovery", i), h, layout.path, initial)
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

// waitAcknowledged waits until the manifest records an acknowledged write
// of the round, or the writer exits (exited, with its error).
func waitAcknowledged(t *testing.T, manifest string, round int, done <-chan error) (exited bool, err error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(manifest)
		for line := range strings.Lines(string(b)) {
			var seq int
			if _, err := fmt.Sscanf(line, "D %d", &seq); err == nil && seq/100000 == round {
				return false, nil
			}
		}
		select {
		case err := <-done:
			return true, err
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("round %d: zarr-python acknowledged no write in 2 minutes", round)
	return false, nil
}

// readInitial reads the chunks of the array at path of the store at dir
// before any write, by inner chunk.
func readInitial(t *testing.T, dir, path string) map[[2]int][]byte {
	t.Helper()
	a := storeArray(t, dir, path)
	c, err := a.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]int][]byte{}
	forEachChunk(a, c.Data, func(key [2]int, chunk []byte) { out[key] = chunk })
	return out
}

// forEachChunk calls fn with the bytes (C order) of each inner chunk of
// the 2-D array a whose decoded content is data.
func forEachChunk(a *zarr.Array, data []byte, fn func(key [2]int, chunk []byte)) {
	inner := a.ChunkShape // the mount's v3 view has no shards
	if sh := a.Sharding(); sh != nil {
		inner = sh.ChunkShape()
	}
	size := a.Type.Size
	for ci := range a.Shape[0] / inner[0] {
		for cj := range a.Shape[1] / inner[1] {
			var chunk []byte
			for r := ci * inner[0]; r < (ci+1)*inner[0]; r++ {
				row := size * (r*a.Shape[1] + cj*inner[1])
				chunk = append(chunk, data[row:row+size*inner[1]]...)
			}
			fn([2]int{ci, cj}, chunk)
		}
	}
}

// writeManifest is what zarr_crash_writer.py recorded: for each chunk, the
// value of its last acknowledged write (none: the chunk holds its initial
// content) and the values of writes begun after it and never acknowledged,
// which a kill may or may not have let through.
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
// manifest allows: its initial content while no write to it was
// acknowledged, or one value in every element, the last acknowledged one
// or a later unacknowledged one.
func (w *writeManifest) check(t *testing.T, what string, h *zarr.Hierarchy, path string, initial map[[2]int][]byte) {
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
	forEachChunk(a, c.Data, func(key [2]int, chunk []byte) {
		acked, written := w.acked[key]
		if !written && bytes.Equal(chunk, initial[key]) {
			return
		}
		got := int32(binary.LittleEndian.Uint32(chunk))
		if !bytes.Equal(chunk, bytes.Repeat(chunk[:4], len(chunk)/4)) {
			t.Errorf("%s: chunk %d.%d is torn: holds neither its initial content nor one value (%d, ...)", what, key[0], key[1], got)
			return
		}
		allowed := w.inflight[key]
		if written {
			allowed = append([]int32{acked}, allowed...)
		}
		if !slices.Contains(allowed, got) {
			t.Errorf("%s: chunk %d.%d holds %d; the manifest allows %v (last acknowledged first; written: %v)", what, key[0], key[1], got, allowed, written)
		}
	})
}
