package integration_test

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestS3BodiesThatStallOrBreak: through a proxy in front of the S3 server
// that stalls every chunk body after its headers, a read of a chunk file
// gives EIO within the deadline instead of hanging, the log says what was
// retried and why; a body cut after its first bytes is retried and read;
// the mount stays up and unmounts.
func TestS3BodiesThatStallOrBreak(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	srv.Upload(t, dir, "zarr", "faults")
	p := faultproxy.Start(t, srv.Endpoint)
	useS3(t, srv, p.URL)
	m := mount(t, "s3://zarr/faults", "--ro", "--s3-path-style", "--remote-timeout", "500ms", "--remote-deadline", "2s")
	h := openView(t, dir)
	var files []string
	var want [][]byte
	for _, g := range arrays {
		n, _ := h.Node(g.Path)
		a := n.Array
		if !g.Sharded || a.Sharding() == nil || len(a.Shape) != 2 || len(files) == 2 {
			continue
		}
		c := firstStoredInner(t, a)
		b, _ := storedInner(t, dir, a, c)
		files = append(files, filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", c)))
		want = append(want, b)
	}
	if len(files) < 2 {
		t.Fatal("the generated store has fewer than two 2-D sharded arrays")
	}
	ranged := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasPrefix(r.Header.Get("Range"), "bytes=") && !strings.HasPrefix(r.Header.Get("Range"), "bytes=-")
	}
	p.SetRule(func(r *http.Request) faultproxy.Fault {
		if ranged(r) {
			return faultproxy.Fault{StallBody: true, After: 1}
		}
		return faultproxy.Fault{}
	})
	start := time.Now()
	_, err := os.ReadFile(files[0])
	took := time.Since(start)
	// The kernel tries a failed page again once: two reads, two deadlines.
	t.Logf("a chunk file whose body stalls: %v after %s", err, took.Round(time.Millisecond))
	if !errors.Is(err, syscall.EIO) || took > 2*2*time.Second+10*time.Second {
		t.Errorf("read of %s with its body stalled: %v after %s; want EIO within the 2s deadline", files[0], err, took)
	}
	if log := m.Log(); !strings.Contains(log, "retrying a request to the store") || !strings.Contains(log, "no data within") {
		t.Errorf("the log does not say what was retried and why:\n%s", log)
	}
	p.SetRule(faultproxy.Once(1, ranged, faultproxy.Fault{Cut: true, After: 3}))
	for i, f := range files {
		if got, err := os.ReadFile(f); err != nil || !bytes.Equal(got, want[i]) {
			t.Errorf("read of %s after the fault: %d bytes, %v; want the %d stored", f, len(got), err, len(want[i]))
		}
	}
	p.SetRule(nil)
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
}
