package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// writeManyShards writes, at dir/arr, a uint8 array of n shards of two
// one-byte inner chunks each.
func writeManyShards(t *testing.T, dir string, n int) {
	t.Helper()
	s, err := store.OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bytesCodec := meta.Codec{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)}
	a, err := zarr.CreateArrayV3(t.Context(), s, "arr", &meta.ArrayV3{
		Shape: []int{2 * n}, DataType: dtype.TypeUint8, ChunkShape: []int{2},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
		FillValue:   []byte{0},
		Codecs:      zarr.ShardedCodecs([]int{1}, []meta.Codec{bytesCodec}),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := codec.NewChunk(codec.Spec{Shape: []int{2 * n}, Type: dtype.TypeUint8, Fill: []byte{0}})
	for i := range c.Data {
		c.Data[i] = byte(i%255 + 1)
	}
	if err := a.WriteRegion(t.Context(), []int{0}, c); err != nil {
		t.Fatal(err)
	}
}

// slowServer serves dir over HTTP, each answer delay late (a store far
// away), until the test ends.
func slowServer(t *testing.T, dir string, delay time.Duration) string {
	t.Helper()
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestCheckProgressAndCtrlC: check of a store that takes a while prints
// progress lines when its stderr is no terminal (shards done/total, rate,
// ETA), and Ctrl-C ends it with exit 130 and a summary of what it
// checked, not "context canceled" and exit 1 as when shards are broken.
func TestCheckProgressAndCtrlC(t *testing.T) {
	dir := t.TempDir()
	const shards = 400
	writeManyShards(t, dir, shards)
	// 400 shards, each a request answered 100 ms late, 4 at a time (2
	// CPUs): 10 s at least, beyond the first progress line (at 5 s).
	url := slowServer(t, dir, 100*time.Millisecond) + "/arr"

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, zarrfsBin, "check", url)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2") // 4 requests at once, however many CPUs run the test
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var progress string
	for line := range lines {
		if strings.HasPrefix(line, "zarrfs check: ") && strings.Contains(line, "/400 shards") {
			progress = line
			break
		}
		t.Logf("stderr: %s", line)
	}
	if progress == "" {
		cmd.Wait()
		t.Fatalf("check printed no progress line before it ended:\n%s", stdout.String())
	}
	if !strings.Contains(progress, "B/s") || !strings.Contains(progress, "ETA") {
		t.Errorf("progress line %q lacks the rate or the ETA", progress)
	}
	cmd.Process.Signal(syscall.SIGINT)
	go io.Copy(io.Discard, stderr)
	err = cmd.Wait()
	if code := exitCode(err); code != 130 {
		t.Errorf("check after Ctrl-C: exit %d (%v), want 130\n%s", code, err, stdout.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "INTERRUPTED: checked ") || !strings.Contains(out, "of 400 stored chunks/shards") || !strings.Contains(out, "0 broken so far") {
		t.Errorf("check after Ctrl-C printed:\n%s\nwant a summary of what it checked", out)
	}
}

// TestProgressOnATerminal: on a terminal (a pseudo-terminal, by script),
// check and info draw a progress bar counting the shards.
func TestProgressOnATerminal(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		zarrtest.Missing(t, "TestProgressOnATerminal needs script (util-linux): %v", err)
	}
	dir := t.TempDir()
	writeManyShards(t, dir, 40)
	for _, command := range []string{"check", "info"} {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, "script", "-qec", zarrfsBin+" "+command+" "+dir, "/dev/null").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("script -c 'zarrfs %s': %v\n%s", command, err, out)
		}
		if !bytes.Contains(out, []byte("zarrfs "+command)) || !bytes.Contains(out, []byte("/40, ")) || !bytes.Contains(out, []byte("shards/s")) {
			t.Errorf("zarrfs %s on a terminal drew no progress bar counting 40 shards:\n%q", command, out)
		}
	}
}

// TestPublishLogged: a mount's log says, at the default level, what its
// publishes did: shards, chunk updates, bytes, time.
func TestPublishLogged(t *testing.T) {
	dir := t.TempDir()
	writeManyShards(t, dir, 4)
	m := mount(t, dir)
	chunk := filepath.Join(m.Dir, "v3", "arr", "c", "0")
	if err := os.WriteFile(chunk, []byte{42}, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if log := m.Log(); strings.Contains(log, `msg="published into the store" shards=1 chunk_updates=1 bytes=1 `) {
			return
		}
	}
	t.Errorf("a minute after a write, the mount's log does not say what was published:\n%s", m.Log())
}
