package integration_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// stallProxy forwards TCP connections to a backend until it is stalled:
// then it accepts and keeps connections but forwards no byte either way,
// as a server that hangs does.
type stallProxy struct {
	ln      net.Listener
	backend string
	stalled atomic.Bool
	done    chan struct{}
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newStallProxy(t *testing.T, backend string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, backend: backend, done: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) Addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(b, c) })
		p.wg.Go(func() { p.pipe(c, b) })
	}
}

// pipe copies from src to dst, holding what it read while stalled.
func (p *stallProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.stalled.Load() {
			select {
			case <-p.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) close() {
	close(p.done)
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestInterruptStalledStore stalls the web server behind an http:// mount
// (a proxy that stops forwarding) after one chunk was read: a reader of
// another shard's chunk killed after 5 s (timeout -s KILL 5 cat) ends at
// once, its FUSE request interrupted, leaving no process in uninterruptible
// sleep; the chunk read before reads meanwhile, past the revalidation
// interval, from what zarrfs holds; the mount unmounts with the server
// still stalled.
func TestInterruptStalledStore(t *testing.T) {
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	consolidate(t, dir)
	a, cached, others := chunksInTwoShards(t, dir, arrays)
	stalled := others[0]
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	proxy := newStallProxy(t, srv.Listener.Addr().String())
	m := mount(t, "http://"+proxy.Addr()+"/", "--ro", "--revalidate", "1s")
	cachedPath := filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", cached))
	stalledPath := filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", stalled))
	want, err := os.ReadFile(cachedPath)
	if err != nil {
		t.Fatal(err)
	}

	proxy.stalled.Store(true)
	start := time.Now()
	cat := exec.Command("timeout", "-s", "KILL", "5", "cat", stalledPath)
	cat.Stdout = io.Discard
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cat.Wait() }()
	// The chunk read before, once the kernel and zarrfs would both check
	// it again, reads while the other reader waits for the store.
	time.Sleep(1500 * time.Millisecond)
	read := make(chan error, 1)
	readStart := time.Now()
	go func() {
		got, err := os.ReadFile(cachedPath)
		if err == nil && !bytes.Equal(got, want) {
			err = fmt.Errorf("read %d bytes, not the %d read before the stall", len(got), len(want))
		}
		read <- err
	}()
	readBound := 5 * time.Second
	select {
	case err := <-read:
		if err != nil {
			t.Errorf("the cached chunk during the stall: %v", err)
		}
		t.Logf("the cached chunk read in %v during the stall", time.Since(readStart).Round(time.Millisecond))
	case <-time.After(readBound):
		t.Errorf("the cached chunk did not read within %v of the stall", readBound)
	}
	select {
	case err := <-exited:
		took := time.Since(start)
		t.Logf("timeout -s KILL 5 cat of the stalled chunk ended after %v: %v", took.Round(time.Millisecond), err)
		if took > 10*time.Second {
			t.Errorf("the killed reader took %v to end, want about 5 s", took)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the killed reader did not end within 60 s: its request was not interrupted\n%s", dState(m.Dir))
	}
	if d := dState(m.Dir); d != "" {
		t.Errorf("processes left in uninterruptible sleep:\n%s", d)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- m.Stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("unmount with the store stalled: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Errorf("unmount with the store stalled did not end within 60 s")
	}
}

// chunksInTwoShards returns a sharded array of the store at dir with stored
// chunks in two shards or more: its first stored chunk, and the stored
// chunks of its other shards.
func chunksInTwoShards(t *testing.T, dir string, arrays []zarrtest.Generated) (a *zarr.Array, first []int, others [][]int) {
	t.Helper()
	h := openView(t, dir)
	for _, g := range arrays {
		n, _ := h.Node(g.Path)
		if !g.Sharded || n.Array == nil || n.Array.Sharding() == nil {
			continue
		}
		first, others = nil, nil
		grid := n.Array.InnerGrid()
		for c := make([]int, len(grid)); ; {
			if _, ok := storedInner(t, dir, n.Array, c); ok {
				shard, _ := n.Array.InnerChunk(c)
				if first == nil {
					first = slices.Clone(c)
				} else if firstShard, _ := n.Array.InnerChunk(first); !slices.Equal(firstShard, shard) {
					others = append(others, slices.Clone(c))
				}
			}
			if !nd.Next(c, grid) {
				break
			}
		}
		if others != nil {
			return n.Array, first, others
		}
	}
	t.Fatal("no array with stored chunks in two shards")
	return nil, nil, nil
}

// dState lists the processes in uninterruptible sleep (D) whose command
// line names dir.
func dState(dir string) string {
	var out strings.Builder
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		stat, err := os.ReadFile(filepath.Join(p, "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || s[i+2] != 'D' {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		if strings.Contains(string(cmdline), dir) {
			wchan, _ := os.ReadFile(filepath.Join(p, "wchan"))
			out.WriteString(filepath.Base(p) + " " + strings.ReplaceAll(string(cmdline), "\x00", " ") + " in " + string(wchan) + "\n")
		}
	}
	return out.String()
}
