package integration_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// slowPutProxy starts a proxy to the S3 server that holds every PUT for
// delay before passing it on, and returns its endpoint: publishing takes
// a while, as on a distant bucket.
func slowPutProxy(t *testing.T, srv *s3test.Server, delay time.Duration) string {
	t.Helper()
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			time.Sleep(delay)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p.URL
}

// TestUmountWaits: zarr-python 2.13 fills arrays through the v2 view of a
// read-write s3:// mount whose PUTs are slow; `zarrfs umount` returns only
// once everything is published and the mount process is gone, says so,
// and the bucket holds every write, read at once by zarrita (an
// independent reader) in the S3 server's backend directory, where
// versitygw keeps each object as a plain file, and by zarrfs's own reader
// through S3.
func TestUmountWaits(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	script, err := filepath.Abs(filepath.Join("testdata", "zarr_write.py"))
	if err != nil {
		t.Fatal(err)
	}
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir, arrays := writeStore(t)
	srv.Upload(t, dir, "zarr", "w")
	useS3(t, srv, slowPutProxy(t, srv, 300*time.Millisecond))
	m := mount(t, "s3://zarr/w", "--s3-path-style", "--journal-dir", t.TempDir())
	w := zarrPythonWrites(t, script, m, openView(t, dir), arrays, 3)
	out, err := exec.Command(zarrfsBin, "umount", m.Dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "every acknowledged write is in the store") {
		t.Fatalf("zarrfs umount: %v, printed %q; want it to say every write is published\n%s", err, out, m.Log())
	}
	// At once, before the mount process is waited for: zarrita on the
	// bucket's directory in the S3 server's backend, then zarrfs's reader.
	w.check(t, o, filepath.Join(srv.Dir, "zarr", "w"))
	h, err := zarr.Open(t.Context(), srv.Open(t, "zarr", "w", true))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, spec := range w.specs {
		got[spec.Path] = ownDigest(t, h, spec.Path)
	}
	t.Logf("zarrfs umount printed %q", out)
	want := o.ZarrPythonAll(t, w.copies)
	for _, spec := range w.specs {
		if wa := want[spec.Path]; wa.Error != "" || got[spec.Path] != wa.SHA256 {
			t.Errorf("%s: right after zarrfs umount the bucket holds content with digest %s, zarr-python wrote %s (%s)", spec.Path, got[spec.Path], wa.SHA256, wa.Error)
		}
	}
	if err := m.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestSIGTERMWhileWriting signals a read-write mount while a writer holds
// a chunk file open and keeps writing others as zarr-python 2 does
// (makedirs, a temporary file, a rename). The mount keeps serving until
// the held file is closed, then unmounts and exits 0: every write
// acknowledged after the signal is in the store, and nothing landed on
// the disk under the mount point (a lazy detach let such writers recreate
// the paths there).
func TestSIGTERMWhileWriting(t *testing.T) {
	dir, _ := writeStore(t)
	a := storeArray(t, dir, "int32_raw_3d") // any 120 bytes are a chunk
	content := func(round int, c []int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("%03d%v", round, c)), 120)[:120]
	}
	m := mount(t, dir)
	held := []int{0, 0, 0}
	f, err := os.OpenFile(chunkPath(m.Dir, "v3", ".", a, held), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(content(0, held)); err != nil {
		t.Fatal(err)
	}
	last := map[string][]byte{} // the last acknowledged content of each chunk
	afterSignal := 0
	write := func(round int, signalled bool) {
		grid := a.InnerGrid()
		for c := make([]int, len(grid)); nd.Next(c, grid); {
			p := chunkPath(m.Dir, "v3", ".", a, c)
			b := content(round, c)
			err := os.MkdirAll(filepath.Dir(p), 0o755)
			if err == nil {
				err = writeRename(p, b)
			}
			if err != nil {
				t.Errorf("round %d: writing %s: %v", round, p, err)
				continue
			}
			last[fmt.Sprint(c)] = b
			if signalled {
				afterSignal++
			}
		}
	}
	write(1, false)
	if err := m.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Writes go on for a while after the signal: a mount that detached
	// within that time sends the later ones to the disk.
	start := time.Now()
	for round := 2; round < 50 && (round < 5 || time.Since(start) < 2*time.Second); round++ {
		write(round, true)
	}
	waitLog(t, m, "mount point busy: serving")
	if err := f.Close(); err != nil {
		t.Errorf("closing the held chunk file: %v", err)
	}
	last[fmt.Sprint(held)] = content(0, held)
	if err := m.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes acknowledged after SIGTERM", afterSignal)
	if entries, _ := os.ReadDir(m.Dir); len(entries) > 0 {
		t.Errorf("the writes after SIGTERM left %d entries on the disk under the mount point: %v", len(entries), entries)
	}
	grid := a.InnerGrid()
	for c := make([]int, len(grid)); ; {
		if want, ok := last[fmt.Sprint(c)]; ok {
			if got, _ := storedInner(t, dir, a, c); !bytes.Equal(got, want) {
				t.Errorf("chunk %v in the store: %q, want the last acknowledged write %q", c, got, want)
			}
		}
		if !nd.Next(c, grid) {
			break
		}
	}
	checkStore(t, dir)
}

// zarrPythonLoop is a zarr-python 2.13 writer: it fills each chunk of the
// array ARGV[2] in the v2 view ARGV[1] with one value in turn, round after
// round, until the file ARGV[3] exists, and prints each write once
// zarr-python has returned from it.
const zarrPythonLoop = `
import json, os, sys
import numpy as np
import zarr
view, path, stop = sys.argv[1:4]
z = zarr.open_array(zarr.DirectoryStore(view), path=path, mode="r+")
grid = [-(-s // c) for s, c in zip(z.shape, z.chunks)]
for r in range(1, 1000):
    for i, c in enumerate(np.ndindex(*grid)):
        if os.path.exists(stop):
            sys.exit(0)
        v = r * 1000 + i
        z[tuple(slice(k * n, (k + 1) * n) for k, n in zip(c, z.chunks))] = v
        print(json.dumps({"chunk": list(c), "value": v}), flush=True)
`

// TestSIGTERMWhileWritingZarrPython signals a read-write mount while
// zarr-python 2.13 writes chunks through the v2 view in a loop, and lets
// it write on for a while: every write zarr-python acknowledged, after the
// signal too, is in the store once the mount exits, and nothing landed on
// the disk under the mount point. zarr-python holds its files open only
// briefly, so an open file keeps the mount busy across the signal.
func TestSIGTERMWhileWritingZarrPython(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	dir, _ := writeStore(t)
	a := storeArray(t, dir, "int32_raw_3d") // full raw inner chunks of little-endian int32
	m := mount(t, dir)
	held, err := os.Open(filepath.Join(m.Dir, "v3", a.Path, "zarr.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	stop := filepath.Join(t.TempDir(), "stop")
	cmd := exec.Command("/usr/bin/python3", "-c", zarrPythonLoop, filepath.Join(m.Dir, "v2"), a.Path, stop)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type write struct {
		Chunk []int
		Value int32
	}
	acks := make(chan write)
	var exitErr error
	exited := make(chan struct{}) // closed once the writer is waited for
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var w write
			if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
				t.Errorf("zarr-python printed %q: %v", sc.Text(), err)
				continue
			}
			acks <- w
		}
		close(acks)
		exitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() { // on failure: stop the writer, then wait for it
		cmd.Process.Kill()
		for range acks {
		}
		<-exited
		if t.Failed() {
			t.Logf("zarr-python's stderr:\n%s", &stderr)
		}
	})

	last := map[string]int32{} // the last acknowledged value of each chunk
	chunks := 1
	for _, n := range a.InnerGrid() {
		chunks *= n
	}
	afterSignal := 0
	var signalled time.Time
	deadline := time.After(2 * time.Minute)
	for done := false; !done; {
		select {
		case w, ok := <-acks:
			if !ok {
				<-exited
				t.Fatalf("zarr-python stopped writing after %d writes: %v\nzarrfs log:\n%s", len(last), exitErr, m.Log())
			}
			last[fmt.Sprint(w.Chunk)] = w.Value
			if !signalled.IsZero() {
				afterSignal++
			}
		case <-deadline:
			t.Fatalf("zarr-python made %d writes after the signal within 2 minutes\nzarrfs log:\n%s", afterSignal, m.Log())
		}
		switch {
		case signalled.IsZero() && len(last) == chunks: // a first round written
			if err := m.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			signalled = time.Now()
		// Writes go on for a while after the signal: a mount that detached
		// within that time sends the later ones to the disk.
		case !signalled.IsZero() && afterSignal >= chunks && time.Since(signalled) > 2*time.Second:
			done = true
		}
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for stopBy := time.After(time.Minute); ; { // the writes under way when told to stop
		var w write
		var ok bool
		select {
		case w, ok = <-acks:
		case <-stopBy:
			t.Fatalf("zarr-python did not stop within a minute of being told to")
		}
		if !ok {
			break
		}
		last[fmt.Sprint(w.Chunk)] = w.Value
		afterSignal++
	}
	<-exited
	if exitErr != nil {
		t.Errorf("zarr-python: %v", exitErr)
	}
	waitLog(t, m, "mount point busy: serving")
	if err := held.Close(); err != nil {
		t.Errorf("closing the held file: %v", err)
	}
	if err := m.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("zarr-python acknowledged %d writes after SIGTERM", afterSignal)
	if entries, _ := os.ReadDir(m.Dir); len(entries) > 0 {
		t.Errorf("the writes after SIGTERM left %d entries on the disk under the mount point: %v", len(entries), entries)
	}
	grid := a.InnerGrid()
	for c := make([]int, len(grid)); ; {
		v := last[fmt.Sprint(c)]
		want := bytes.Repeat(binary.LittleEndian.AppendUint32(nil, uint32(v)), 30)
		if got, _ := storedInner(t, dir, a, c); !bytes.Equal(got, want) {
			t.Errorf("chunk %v in the store: % x, want the last value zarr-python acknowledged, %d, in each of its %d elements", c, got[:min(len(got), 8)], v, len(want)/4)
		}
		if !nd.Next(c, grid) {
			break
		}
	}
	checkStore(t, dir)
}

// TestUmountSaysWhatWasDropped: a directory made in the mount whose
// metadata never arrives is dropped at unmount with the file written into
// it. `zarrfs umount` must not say every acknowledged write is in the
// store: it names what it dropped and exits 1.
func TestUmountSaysWhatWasDropped(t *testing.T) {
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	orphan := filepath.Join(m.Dir, "v2", "orphan")
	if err := os.Mkdir(orphan, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeTrunc(filepath.Join(orphan, "0"), []byte("a chunk, acknowledged")); err != nil {
		t.Fatal(err)
	}
	waitControl(t, m)
	out, err := exec.Command(zarrfsBin, "umount", m.Dir).CombinedOutput()
	if exitCode(err) != 1 || strings.Contains(string(out), "every acknowledged write is in the store") ||
		!strings.Contains(string(out), "dropped 1 directories made in the mount, holding 1 file(s)") {
		t.Errorf("zarrfs umount with a directory whose metadata never arrived: %v, printed %q; want exit 1 naming what it dropped\n%s", err, out, m.Log())
	}
	m.Wait(30 * time.Second) // exits 1, as the umount said
	if mounted, _ := zfs.Mounted(m.Dir); mounted {
		t.Errorf("%s is still mounted", m.Dir)
	}
}

// waitControl waits (10 s at most) for the control socket through which
// `zarrfs umount` reaches the mount process, which it opens once mounted:
// /run/zarrfs (root) or $TMPDIR/zarrfs-UID, named by the mount point.
func waitControl(t *testing.T, m *integration.Mount) {
	t.Helper()
	abs, err := filepath.EvalSymlinks(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(os.TempDir(), "zarrfs-"+strconv.Itoa(os.Geteuid()))
	if os.Geteuid() == 0 {
		dir = "/run/zarrfs"
	}
	sum := sha256.Sum256([]byte(abs))
	sock := filepath.Join(dir, hex.EncodeToString(sum[:8])+".sock")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no control socket %s within 10s:\n%s", sock, m.Log())
		}
	}
}
