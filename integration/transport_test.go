package integration_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/fs/fuseuring"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestIOURingTransport serves mounts over FUSE-over-io_uring: both
// independent readers through a read-only mount, and zarr-python's writes
// through a writable one, checked against the copies it wrote alongside.
// The stats file must show that the requests came over the rings. (make
// test-io-uring runs every other test over io_uring too.)
func TestIOURingTransport(t *testing.T) {
	if err := fuseuring.Enable(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	if err := fuseuring.Available(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	o := zarrtest.NewOracle(t)
	v3, v3Arrays, _, _ := generated(t)
	t.Run("read", func(t *testing.T) {
		m := mount(t, v3, "--ro", "--fuse-transport", "io_uring")
		checkOracles(t, o, m.Dir, m.Log(), generatedDigests(v3Arrays))
		if s := readStats(t, m.Dir); s.URing < uint64(len(v3Arrays)) {
			t.Errorf("%d requests came over io_uring, fewer than the arrays read", s.URing)
		}
	})
	t.Run("write", func(t *testing.T) {
		zarrtest.RequirePython(t, "zarr")
		script, err := filepath.Abs(filepath.Join("testdata", "zarr_write.py"))
		if err != nil {
			t.Fatal(err)
		}
		dir, arrays := writeStore(t)
		m := mount(t, dir, "--fuse-transport", "io_uring")
		w := zarrPythonWrites(t, script, m, openView(t, dir), arrays, 3)
		if s := readStats(t, m.Dir); s.URing == 0 {
			t.Error("no request came over io_uring")
		}
		stop(t, m, dir)
		checkStore(t, dir)
		w.check(t, o, dir)
	})
}

// TestIOURingStalledStore stalls the web server behind an http:// mount
// served over io_uring, with readers of uncached chunks waiting on it from
// every CPU (several a CPU, so several a queue): a chunk read before
// reads, from every CPU, while they wait, and killed, they end at once,
// their requests interrupted. On a transport whose queue serves one
// request at a time, the reader from a stalled reader's CPU waits until
// the stalled one ends.
func TestIOURingStalledStore(t *testing.T) {
	if err := fuseuring.Enable(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	if err := fuseuring.Available(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	consolidate(t, dir)
	a, cached, others := chunksInTwoShards(t, dir, arrays)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	proxy := newStallProxy(t, srv.Listener.Addr().String())
	m := mount(t, "http://"+proxy.Addr()+"/", "--ro", "--fuse-transport", "io_uring")
	cachedPath := filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", cached))
	want, err := os.ReadFile(cachedPath)
	if err != nil {
		t.Fatal(err)
	}

	proxy.stalled.Store(true)
	const stalledPerCPU = 3
	var stalled []*exec.Cmd
	exited := make(chan error, stalledPerCPU*runtime.NumCPU())
	t.Cleanup(func() {
		for _, c := range stalled {
			c.Process.Kill()
		}
	})
	for cpu := range runtime.NumCPU() {
		for range stalledPerCPU {
			c := others[len(stalled)%len(others)]
			cat := exec.Command("taskset", "-c", fmt.Sprint(cpu), "cat", filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", c)))
			cat.Stdout = io.Discard
			if err := cat.Start(); err != nil {
				t.Fatal(err)
			}
			stalled = append(stalled, cat)
			go func() { exited <- cat.Wait() }()
		}
	}
	// Let the stalled readers' requests reach zarrfs.
	time.Sleep(time.Second)
	for cpu := range runtime.NumCPU() {
		var out bytes.Buffer
		cat := exec.Command("taskset", "-c", fmt.Sprint(cpu), "cat", cachedPath)
		cat.Stdout = &out
		if err := cat.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cat.Wait() }()
		select {
		case err := <-done:
			if err != nil || !bytes.Equal(out.Bytes(), want) {
				t.Errorf("CPU %d: the cached chunk during the stall: read %d bytes, %v; want the %d read before", cpu, out.Len(), err, len(want))
			}
		case <-time.After(10 * time.Second):
			cat.Process.Kill()
			t.Errorf("CPU %d: the cached chunk did not read within 10 s while readers of the stalled store waited", cpu)
		}
	}
	select {
	case err := <-exited:
		t.Fatalf("a reader of the stalled store ended before it was killed: %v", err)
	default:
	}

	for _, c := range stalled {
		c.Process.Kill()
	}
	for range stalled {
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("killed readers of the stalled store did not end within 30 s: their requests were not interrupted\n%s", dState(m.Dir))
		}
	}
	if d := dState(m.Dir); d != "" {
		t.Errorf("processes left in uninterruptible sleep:\n%s", d)
	}
}

// TestIOURingMemoryLimitFollowsBuffers: the soft memory limit of a mount
// over io_uring (--cache-size plus 40 MiB, less the queues' buffers, which
// are outside the Go heap) takes only the buffers requests have filled.
// Taking all of them at mount, as it did, made the garbage collector run
// about 4 times as often as over /dev/fuse in a cold read, for buffers one
// reader never fills. As readers fill more, the limit comes down.
func TestIOURingMemoryLimitFollowsBuffers(t *testing.T) {
	if err := fuseuring.Enable(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	if err := fuseuring.Available(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	const cacheBytes = 64 << 20
	dir := t.TempDir()
	writeRawArray(t, dir)
	addr := freeAddr(t)
	m := mount(t, dir, "--ro", "--view", "v2", "--fuse-transport", "io_uring", "--cache-size", fmt.Sprint(cacheBytes), "--metrics-listen", addr)
	limit := func() float64 {
		v, ok := metricValue(scrape(t, addr), "go_gc_gomemlimit_bytes")
		if !ok {
			t.Fatal("no go_gc_gomemlimit_bytes in the metrics")
		}
		return v
	}
	buffers := float64(zfs.TransportBufferBytes(zfs.TransportIOURing))
	full := float64(cacheBytes + 40<<20)
	atMount := limit()
	if atMount < full-buffers/2 {
		t.Errorf("memory limit at mount %.1f MiB, want above %.1f MiB: the %.1f MiB of io_uring buffers are taken before any request filled them", atMount/(1<<20), (full-buffers/2)/(1<<20), buffers/(1<<20))
	}
	files := rawChunkFiles(t, m.Dir)
	// Readers on every CPU at once, so that several entries of each queue
	// serve READs of 64 KiB chunks.
	var readers sync.WaitGroup
	for r := range 4 * runtime.NumCPU() {
		readers.Go(func() {
			for i := r; i < len(files); i += 4 * runtime.NumCPU() {
				os.ReadFile(files[i])
			}
		})
	}
	readers.Wait()
	after := limit()
	t.Logf("memory limit %.1f MiB at mount, %.1f MiB after %d files read (io_uring buffers %.1f MiB)", atMount/(1<<20), after/(1<<20), len(files), buffers/(1<<20))
	if after >= atMount || after < full-buffers {
		t.Errorf("memory limit %.1f MiB after reads filled buffers, want below %.1f MiB (at mount) and at least %.1f MiB (every buffer taken)", after/(1<<20), atMount/(1<<20), (full-buffers)/(1<<20))
	}
}
