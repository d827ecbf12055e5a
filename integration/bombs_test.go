package integration_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
)

// The bomb tests measure the memory zarrfs takes for hostile input with
// the binary built without the race detector (plainZarrfs), whose shadow
// memory would measure the detector.

var plainBuild struct {
	once sync.Once
	bin  string
	err  error
}

// plainZarrfs builds zarrfs without the race detector once, beside the
// binary under test (TestMain removes both).
func plainZarrfs(t *testing.T) string {
	t.Helper()
	plainBuild.once.Do(func() {
		dir := filepath.Join(filepath.Dir(zarrfsBin), "plain")
		if plainBuild.err = os.MkdirAll(dir, 0o755); plainBuild.err == nil {
			wd, _ := os.Getwd()
			plainBuild.bin, plainBuild.err = integration.Build(filepath.Dir(wd), dir, false)
		}
	})
	if plainBuild.err != nil {
		t.Fatal(plainBuild.err)
	}
	return plainBuild.bin
}

// runMeasured runs a zarrfs command (killed after limit) and returns its
// output, its error and its peak RSS.
func runMeasured(t *testing.T, limit time.Duration, bin string, args ...string) (out string, err error, rss int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Errorf("zarrfs %s: still running after %v", strings.Join(args, " "), limit)
	}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = ru.Maxrss << 10
		}
	}
	return buf.String(), err, rss
}

// writeBigAttribute writes a group at path of the store at dir whose
// zarr.json holds an attribute of n bytes, without holding it in memory.
func writeBigAttribute(t *testing.T, dir, path string, n int64) {
	t.Helper()
	p := filepath.Join(dir, path, zarr.ZarrJSON)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	io.WriteString(f, `{"zarr_format": 3, "node_type": "group", "attributes": {"big": "`)
	if _, err := io.CopyN(f, repeated('a'), n); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(f, `"}}`); err != nil {
		t.Fatal(err)
	}
}

// repeated reads c forever.
type repeated byte

func (r repeated) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestAttackMetadataBombs: a zarr.json holding a 200 MB attribute is
// refused naming its key, by info, check and a mount (which leaves the
// node out and serves the rest), each within 150 MiB (it took 1.1-2 GB);
// --max-metadata-size lets a larger document in and keeps out a
// smaller one.
func TestAttackMetadataBombs(t *testing.T) {
	bin := plainZarrfs(t)
	dir, a, _ := linkStore(t)
	writeBigAttribute(t, dir, "bomb", 200<<20)
	const bound = 150 << 20
	for _, cmd := range []string{"info", "check"} {
		out, err, rss := runMeasured(t, 5*time.Minute, bin, cmd, dir)
		if cmd == "info" && err != nil || cmd == "check" && !isExit(err, 1) {
			t.Errorf("zarrfs %s: %v\n%s", cmd, err, out)
		}
		if !strings.Contains(out, "bomb/zarr.json is larger than") {
			t.Errorf("zarrfs %s does not name the large document:\n%s", cmd, out)
		}
		t.Logf("zarrfs %s: peak RSS %d MiB", cmd, rss>>20)
		if rss > bound {
			t.Errorf("zarrfs %s: peak RSS %d MiB, want at most %d", cmd, rss>>20, bound>>20)
		}
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	m, err := integration.Start(bin, dir, mnt, "--ro", "--cache-size", "64MiB")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill()
	if _, err := os.Stat(filepath.Join(mnt, "v3", "bomb")); err == nil {
		t.Error("the group of the large document is shown")
	}
	if _, err := os.ReadFile(chunkPath(mnt, "v3", ".", a, []int{1, 1})); err != nil {
		t.Errorf("the other nodes: %v", err)
	}
	rss := daemonRSS(t, m.Pid())
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Log(), "bomb/zarr.json is larger than") {
		t.Errorf("the mount's log does not name the large document:\n%s", m.Log())
	}
	t.Logf("mount: peak RSS %d MiB", rss>>20)
	if rss > 64<<20+64<<20 {
		t.Errorf("mount: peak RSS %d MiB, want within --cache-size + 64 MiB", rss>>20)
	}

	// The flag: 300MiB lets the document in, 256B keeps out a's.
	out, err, _ := runMeasured(t, 5*time.Minute, bin, "info", "--max-metadata-size", "300MiB", dir, "bomb")
	if err != nil || strings.Contains(out, "larger than") {
		t.Errorf("zarrfs info --max-metadata-size 300MiB: %v\n%s", err, out)
	}
	out, _, _ = runMeasured(t, time.Minute, bin, "info", "--max-metadata-size", "256B", dir)
	if !strings.Contains(out, "a/zarr.json is larger than 256 bytes") {
		t.Errorf("zarrfs info --max-metadata-size 256B does not refuse a/zarr.json:\n%s", out)
	}
}

// hostileServer serves the store at dir over HTTP, except that it
// answers a GET of key with answer.
func hostileServer(t *testing.T, dir, key string, answer http.HandlerFunc) string {
	t.Helper()
	files := http.FileServer(http.Dir(dir))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.TrimPrefix(r.URL.Path, "/") == key {
			answer(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// gzipBomb returns a gzip stream (members one after another, as gzip
// allows) of 4 MB that inflates to 4 GiB of spaces.
func gzipBomb(t *testing.T) []byte {
	t.Helper()
	var member bytes.Buffer
	w, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	if _, err := io.CopyN(w, repeated(' '), 64<<20); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return bytes.Repeat(member.Bytes(), 64)
}

// TestAttackHTTPMetadataBombs: a web server answering the root zarr.json
// (or .zmetadata) with 4 MB of gzip (Content-Encoding) that inflate to 4
// GiB, or with an endless chunked body, fails info and mount naming the
// document, well before the request deadline, within 150 MiB (info took
// 1.2-1.8 GB until the 20 s deadline).
func TestAttackHTTPMetadataBombs(t *testing.T) {
	bin := plainZarrfs(t)
	dir, _, _ := linkStore(t)
	bomb := gzipBomb(t)
	t.Logf("gzip bomb: %d bytes", len(bomb))
	answers := map[string]http.HandlerFunc{
		"gzip": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "application/json")
			w.Write(bomb)
		},
		"endless": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"zarr_format": 3, "node_type": "group", "attributes": {"x": "`)
			buf := bytes.Repeat([]byte("a"), 64<<10)
			for r.Context().Err() == nil {
				if _, err := w.Write(buf); err != nil {
					return
				}
			}
		},
	}
	for name, answer := range answers {
		for _, key := range []string{zarr.ZarrJSON, zarr.ZMetadata} {
			t.Run(name+" "+key, func(t *testing.T) {
				d := dir
				if key == zarr.ZMetadata { // a v2 root: only .zmetadata names its children
					d = t.TempDir()
					os.WriteFile(filepath.Join(d, zarr.ZGroup), []byte(`{"zarr_format": 2}`), 0o644)
				}
				url := hostileServer(t, d, key, answer)
				for _, cmd := range [][]string{{"info", url}, {"mount", "--ro", url, t.TempDir()}} {
					out, err, rss := runMeasured(t, 2*time.Minute, bin, cmd...)
					if mnt := cmd[len(cmd)-1]; cmd[0] == "mount" {
						integration.ForceUnmount(mnt)
					}
					if err == nil || !strings.Contains(out, key+" is larger than") {
						t.Errorf("zarrfs %s: %v, want a failure naming %s\n%s", cmd[0], err, key, out)
					}
					t.Logf("zarrfs %s: peak RSS %d MiB", cmd[0], rss>>20)
					if rss > 150<<20 {
						t.Errorf("zarrfs %s: peak RSS %d MiB, want at most 150", cmd[0], rss>>20)
					}
				}
			})
		}
	}
}
