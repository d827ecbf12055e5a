package integration_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// crashLayouts are the arrays the crash and concurrency tests write: 2x2
// shards of compressed chunks (rewritten on publish), of uncompressed ones
// (patched in place) and of chunks ending with a crc32c (which the v2 view
// drops and writes add back).
var crashLayouts = []writeLayout{
	{"zstd", dtype.TypeUint16, []int{32, 32}, []int{16, 16}, []int{4, 4}, []meta.Codec{zarrtest.BytesLE, zarrtest.Zstd}},
	{"raw", dtype.TypeUint16, []int{32, 32}, []int{16, 16}, []int{4, 8}, []meta.Codec{zarrtest.BytesLE}},
	{"crc", dtype.TypeInt32, []int{24, 24}, []int{12, 12}, []int{4, 4}, []meta.Codec{zarrtest.BytesLE, zarrtest.CRC32C}},
}

// crashIterations is how many kills a crash test survives:
// ZARRFS_CRASH_ITERATIONS, 20 by default.
func crashIterations(t *testing.T) int {
	t.Helper()
	n := 20
	if s := os.Getenv("ZARRFS_CRASH_ITERATIONS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("ZARRFS_CRASH_ITERATIONS=%q: want a positive number", s)
		}
	}
	return n
}

// createLayoutStore writes a store at dir: a root group and an array per
// layout.
func createLayoutStore(t *testing.T, dir string, layouts []writeLayout) {
	t.Helper()
	s := zarrtest.OpenStore(t, dir)
	err := zarr.CreateGroup(context.Background(), s, "", 3, nil)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	addLayouts(t, dir, layouts)
}

// workload is a store written by testdata/chunk_writer.py processes, the
// contents they write and the manifest in which they record each write.
type workload struct {
	dir      string // the store
	work     string
	manifest string
	arrays   []*workloadArray
	// initial is the hash of each chunk's stored content before any
	// write ("-": empty), by chunk id.
	initial map[string]string
	writers int
}

type workloadArray struct {
	a        *zarr.Array
	contents map[string][]string // files of valid inner chunks, by view
}

// newWorkload writes a store of the crash layouts and, for each array,
// eight inner chunks of random values encoded as the v3 view and the v2
// view show them.
func newWorkload(t *testing.T) *workload {
	t.Helper()
	w := &workload{dir: t.TempDir(), work: t.TempDir(), initial: map[string]string{}}
	w.manifest = filepath.Join(w.work, "manifest")
	createLayoutStore(t, w.dir, crashLayouts)
	h := openView(t, w.dir)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, l := range crashLayouts {
		n, _ := h.Node(l.path)
		wa := &workloadArray{a: n.Array, contents: map[string][]string{}}
		sh := n.Array.Sharding()
		for k := range 8 {
			c := codec.NewChunk(codec.Spec{Shape: sh.ChunkShape(), Type: n.Array.Type, Fill: n.Array.Fill()})
			for i := range c.Data {
				c.Data[i] = byte(rng.IntN(16)) // compressible by a random amount
			}
			v3, err := sh.Inner().Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			v2 := v3
			if l.codecs[len(l.codecs)-1].Name == "crc32c" {
				v2 = v3[:len(v3)-4]
			}
			for view, b := range map[string][]byte{"v3": v3, "v2": v2} {
				file := filepath.Join(w.work, fmt.Sprintf("%s-%d.%s", l.path, k, view))
				if err := os.WriteFile(file, b, 0o644); err != nil {
					t.Fatal(err)
				}
				wa.contents[view] = append(wa.contents[view], file)
			}
		}
		for _, c := range w.chunks(wa) {
			w.initial[chunkID(wa.a, c)] = contentHash(storedInner(t, w.dir, wa.a, c))
		}
		w.arrays = append(w.arrays, wa)
	}
	return w
}

// chunks lists the inner chunk coordinates of an array.
func (w *workload) chunks(wa *workloadArray) [][]int {
	var out [][]int
	grid := wa.a.InnerGrid()
	for c := make([]int, len(grid)); ; {
		out = append(out, slices.Clone(c))
		if !nd.Next(c, grid) {
			return out
		}
	}
}

// chunkID names an inner chunk in the manifest.
func chunkID(a *zarr.Array, c []int) string {
	return a.Path + "/" + strings.Trim(strings.ReplaceAll(fmt.Sprint(c), " ", ","), "[]")
}

// contentHash names a stored inner chunk as the manifest does.
func contentHash(b []byte, stored bool) string {
	if !stored {
		return "-"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// writerOptions shape one writer process.
type writerOptions struct {
	ops   int // writes before it exits; 0: until killed
	pace  time.Duration
	share func(linear int) bool // the chunks it writes, by index in the array's inner grid
	seed  uint64
}

// writer is a running testdata/chunk_writer.py.
type writer struct {
	cmd  *exec.Cmd
	done chan error
	out  strings.Builder
}

// start runs a writer of the workload through the mount at mnt.
func (w *workload) start(t *testing.T, mnt string, opts writerOptions) *writer {
	t.Helper()
	w.writers++
	type chunkFiles struct {
		ID    string `json:"id"`
		Shard string `json:"shard"`
		V3    string `json:"v3"`
		V2    string `json:"v2"`
	}
	type arrayCfg struct {
		Contents map[string][]string `json:"contents"`
		Chunks   []chunkFiles        `json:"chunks"`
	}
	var arrays []arrayCfg
	for _, wa := range w.arrays {
		ac := arrayCfg{Contents: wa.contents}
		for i, c := range w.chunks(wa) {
			if opts.share == nil || opts.share(i) {
				shard, _ := wa.a.InnerChunk(c)
				ac.Chunks = append(ac.Chunks, chunkFiles{chunkID(wa.a, c), wa.a.ChunkKey(shard), chunkPath(mnt, "v3", ".", wa.a, c), chunkPath(mnt, "v2", ".", wa.a, c)})
			}
		}
		arrays = append(arrays, ac)
	}
	cfg, _ := json.Marshal(map[string]any{
		"manifest": w.manifest, "seed": opts.seed, "tag": fmt.Sprintf("w%d", w.writers), "ops": opts.ops,
		"delete": 0.05, "fsync": 0.05, "modes": []string{"trunc", "rename"},
		"pace": opts.pace.Seconds(), "arrays": arrays,
	})
	cfgFile := filepath.Join(w.work, fmt.Sprintf("writer-%d.json", w.writers))
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "chunk_writer.py"))
	wr := &writer{cmd: exec.Command("/usr/bin/python3", script, cfgFile), done: make(chan error, 1)}
	wr.cmd.Stdout, wr.cmd.Stderr = &wr.out, &wr.out
	if err := wr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { wr.done <- wr.cmd.Wait() }()
	t.Cleanup(func() { wr.kill() })
	return wr
}

// wait waits up to timeout for the writer to exit and returns whether it
// did, and how.
func (wr *writer) wait(timeout time.Duration) (exited bool, err error) {
	select {
	case err := <-wr.done:
		wr.done <- err
		return true, err
	case <-time.After(timeout):
		return false, nil
	}
}

// kill kills the writer with SIGKILL and reaps it, unless it is stuck in
// the kernel on a dead mount.
func (wr *writer) kill() {
	wr.cmd.Process.Kill()
	wr.wait(time.Minute)
}

// manifestStats counts the writes begun and acknowledged, and the errors
// (errno values) writers recorded.
func (w *workload) manifestStats(t *testing.T) (begun, done int, errnos []int) {
	t.Helper()
	for _, line := range readLines(t, w.manifest) {
		f := strings.Fields(line)
		switch f[0] {
		case "B":
			begun++
		case "D":
			done++
		case "E":
			e, _ := strconv.Atoi(f[2])
			errnos = append(errnos, e)
		}
	}
	return begun, done, errnos
}

// verify checks the store against the manifest: every inner chunk holds
// the content of its last acknowledged write, or of a write begun after
// that one whose writer or zarrfs was killed before it was acknowledged
// (before any write: its initial content) - a whole content, never a mix.
func (w *workload) verify(t *testing.T) {
	t.Helper()
	w.verifyWith(t, func(wa *workloadArray, c []int) ([]byte, bool) { return storedInner(t, w.dir, wa.a, c) })
}

// verifyThrough checks what the v3 view of the mount at mnt shows against
// the manifest, as verify checks the store.
func (w *workload) verifyThrough(t *testing.T, mnt string) {
	t.Helper()
	w.verifyWith(t, func(wa *workloadArray, c []int) ([]byte, bool) {
		b, err := os.ReadFile(filepath.Join(mnt, "v3", wa.a.Path, keyIn(wa.a, "v3", c)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return b, true
	})
}

// verifyWith checks the inner chunks read reads against the manifest.
func (w *workload) verifyWith(t *testing.T, read func(*workloadArray, []int) ([]byte, bool)) {
	t.Helper()
	allowed := map[string]map[string]bool{}
	for id, h := range w.initial {
		allowed[id] = map[string]bool{h: true}
	}
	type write struct{ id, hash string }
	begun := map[string]write{}
	for _, line := range readLines(t, w.manifest) {
		f := strings.Fields(line)
		switch {
		case f[0] == "B" && len(f) == 4:
			begun[f[1]] = write{f[2], f[3]}
			allowed[f[2]][f[3]] = true
		case f[0] == "D":
			b := begun[f[1]]
			allowed[b.id] = map[string]bool{b.hash: true}
		}
	}
	bad := 0
	for _, wa := range w.arrays {
		for _, c := range w.chunks(wa) {
			id := chunkID(wa.a, c)
			got := contentHash(read(wa, c))
			if !allowed[id][got] {
				bad++
				if bad <= 10 {
					var want []string
					for h := range allowed[id] {
						want = append(want, h[:min(12, len(h))])
					}
					t.Errorf("inner chunk %s holds %.12s, want one of %v", id, got, want)
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d inner chunks in all hold content the manifest does not allow", bad)
	}
}

// checkReaders checks the store after the test: every shard whole, and
// zarrita reading every array with the digest zarrfs's own reader sees.
func (w *workload) checkReaders(t *testing.T) {
	t.Helper()
	checkStore(t, w.dir)
	got := zarrtest.NewOracle(t).ZarritaAll(t, w.dir)
	h := openView(t, w.dir)
	for _, wa := range w.arrays {
		r := got[wa.a.Path]
		if r.Error != "" || r.SHA256 != ownDigest(t, h, wa.a.Path) {
			t.Errorf("zarrita reads %s: %q, digest %s; zarrfs reads digest %s", wa.a.Path, r.Error, r.SHA256, ownDigest(t, h, wa.a.Path))
		}
	}
}

// checkAfterCrash runs `zarrfs check` on a store whose writer was killed:
// every shard must be whole; journals the writer left unpublished must be
// reported with exit status 1. It reports whether there were any.
func checkAfterCrash(t *testing.T, dir string) (unpublished bool) {
	t.Helper()
	out, err := exec.Command(zarrfsBin, "check", dir).CombinedOutput()
	unpublished = strings.Contains(string(out), "UNPUBLISHED ")
	switch {
	case strings.Contains(string(out), "BROKEN "):
		t.Errorf("zarrfs check %s found broken shards:\n%s", dir, out)
	case unpublished && !isExit(err, 1):
		t.Errorf("zarrfs check %s reported unpublished journals but exited with %v", dir, err)
	case !unpublished && err != nil:
		t.Errorf("zarrfs check %s: %v\n%s", dir, err, out)
	}
	return unpublished
}

// TestCrashZarrfsKilled kills zarrfs with SIGKILL, again and again, while
// a writer writes chunk files through it (O_TRUNC and rename, both views,
// unlinks, some fsyncs) - sometimes in the middle of heavy writes,
// sometimes once the writer has stopped and shards are being published.
// After each kill, before anything replays the journal, `zarrfs check`
// must find every shard whole and name the unpublished journal (exit 1),
// and a read-only mount must show every acknowledged write. Then `zarrfs
// recover` (every other kill) or the next read-write mount replays the
// journal, after which every chunk in the store must hold what the
// manifest allows (every acknowledged write, nothing torn). At the end
// zarrita reads every array.
func TestCrashZarrfsKilled(t *testing.T) {
	zarrtest.RequirePython(t)
	w := newWorkload(t)
	iterations := crashIterations(t)
	rng := rand.New(rand.NewPCG(3, 4))
	m := mount(t, w.dir)
	replays, idle, judged := 0, 0, 0
	for i := range iterations {
		pace := time.Duration(rng.IntN(2)) * 5 * time.Millisecond
		wr := w.start(t, m.Dir, writerOptions{pace: pace, seed: uint64(i)})
		time.Sleep(time.Duration(100+rng.IntN(1500)) * time.Millisecond)
		if rng.IntN(3) == 0 { // idle: the writer stopped, publishing goes on
			idle++
			wr.kill()
			time.Sleep(time.Duration(rng.IntN(600)) * time.Millisecond)
		}
		syscall.Kill(m.Pid(), syscall.SIGKILL)
		// The writer fails (ENOTCONN) once the kernel has dropped the dead
		// connection.
		exited, err := wr.wait(10 * time.Second)
		if !exited {
			t.Errorf("iteration %d: the writer was still blocked on the mount 10s after zarrfs was killed; aborting the connection", i)
			integration.Abort(m.Dir)
			exited, err = wr.wait(time.Minute)
		}
		if !exited || err != nil && !isExit(err, 3) && !isKilled(err) {
			t.Fatalf("iteration %d: the writer failed: %v (exited: %v)\n%s", i, err, exited, wr.out.String())
		}
		m.Kill() // reap zarrfs and detach its dead mount
		_, _, errnos := w.manifestStats(t)
		for _, e := range errnos[judged:] {
			if !deadZarrfs(syscall.Errno(e), m.Log()) {
				lines := readLines(t, w.manifest)
				t.Fatalf("iteration %d: the writer failed with %v; only a dead zarrfs may fail it (ENOTCONN, ECONNABORTED, ECANCELED, or EIO zarrfs did not answer)\nlast manifest lines:\n%s\nzarrfs log:\n%s",
					i, syscall.Errno(e), strings.Join(lines[max(0, len(lines)-6):], "\n"), m.Log())
			}
		}
		judged = len(errnos)
		unpublished := checkAfterCrash(t, w.dir)
		// A read-only mount shows every acknowledged write, published or not.
		ro := mount(t, w.dir, "--ro")
		w.verifyThrough(t, ro.Dir)
		if unpublished && !strings.Contains(ro.Log(), "showing updates a writer that died left unpublished") {
			t.Errorf("iteration %d: a read-only mount of a store with unpublished journals did not say so:\n%s", i, ro.Log())
		}
		if err := ro.Stop(); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 { // published without mounting
			if out, err := exec.Command(zarrfsBin, "recover", w.dir).CombinedOutput(); err != nil {
				t.Fatalf("zarrfs recover: %v\n%s", err, out)
			}
			checkStore(t, w.dir)
			w.verify(t)
		}
		m = mount(t, w.dir)
		if strings.Contains(m.Log(), "replayed a journal") {
			replays++
		}
		w.verify(t)
		if t.Failed() {
			t.Fatalf("iteration %d (pace %v): the store does not match the manifest\nzarrfs log:\n%s", i, pace, m.Log())
		}
	}
	stop(t, m, w.dir)
	w.verify(t)
	w.checkReaders(t)
	begun, done, _ := w.manifestStats(t)
	t.Logf("%d kills of zarrfs (%d with the writer stopped), %d journal replays, %d writes begun, %d acknowledged",
		iterations, idle, replays, begun, done)
}

// TestCrashWriterKilled kills the writer (not zarrfs) with SIGKILL at
// random moments, then unmounts: every chunk must hold what the manifest
// allows, and the writer must never have seen an error.
func TestCrashWriterKilled(t *testing.T) {
	zarrtest.RequirePython(t)
	w := newWorkload(t)
	rng := rand.New(rand.NewPCG(5, 6))
	iterations := crashIterations(t)
	for i := range iterations {
		m := mount(t, w.dir)
		wr := w.start(t, m.Dir, writerOptions{seed: uint64(100 + i)})
		time.Sleep(time.Duration(50+rng.IntN(800)) * time.Millisecond)
		wr.kill()
		stop(t, m, w.dir)
		w.verify(t)
		if t.Failed() {
			t.Fatalf("iteration %d: the store does not match the manifest\nzarrfs log:\n%s", i, m.Log())
		}
	}
	w.checkReaders(t)
	begun, done, errnos := w.manifestStats(t)
	if len(errnos) > 0 {
		t.Errorf("writers failed with errno %v", errnos)
	}
	t.Logf("%d kills of the writer, %d writes begun, %d acknowledged", iterations, begun, done)
}

// TestConcurrentWriters runs two writer processes on disjoint inner chunks
// of the same shards, first through one mount, then through two mounts of
// the same store: after unmounting, every write of both is in the store.
func TestConcurrentWriters(t *testing.T) {
	zarrtest.RequirePython(t)
	even := func(i int) bool { return i%2 == 0 }
	odd := func(i int) bool { return i%2 == 1 }
	for _, mounts := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d mounts", mounts), func(t *testing.T) {
			w := newWorkload(t)
			ms := []*integration.Mount{mount(t, w.dir)}
			if mounts == 2 {
				ms = append(ms, mount(t, w.dir))
			}
			var writers []*writer
			for i, share := range []func(int) bool{even, odd} {
				writers = append(writers, w.start(t, ms[i%len(ms)].Dir, writerOptions{ops: 400, pace: time.Millisecond, share: share, seed: uint64(i)}))
			}
			for _, wr := range writers {
				if exited, err := wr.wait(time.Minute); err != nil || !exited {
					t.Fatalf("a writer failed: %v (exited: %v)\n%s", err, exited, wr.out.String())
				}
			}
			stopMounts(t, w.dir, ms)
			begun, done, errnos := w.manifestStats(t)
			if begun != 800 || done != 800 || len(errnos) > 0 {
				t.Fatalf("the writers began %d writes and finished %d, errors %v; want 800 each and none", begun, done, errnos)
			}
			w.verify(t)
			w.checkReaders(t)
		})
	}
}

// TestTwoMountsOneMinute runs a writer process on each of two mounts of
// one store for ZARRFS_WRITERS_SECONDS (60 by default), on disjoint inner
// chunks of the same shards, so that the two processes keep contending for
// the shards' locks; the writers are then killed. After unmounting, the
// store holds every acknowledged write and no error was returned.
func TestTwoMountsOneMinute(t *testing.T) {
	zarrtest.RequirePython(t)
	seconds := 60
	if s := os.Getenv("ZARRFS_WRITERS_SECONDS"); s != "" {
		var err error
		if seconds, err = strconv.Atoi(s); err != nil || seconds < 1 {
			t.Fatalf("ZARRFS_WRITERS_SECONDS=%q: want a positive number", s)
		}
	}
	w := newWorkload(t)
	ms := []*integration.Mount{mount(t, w.dir), mount(t, w.dir)}
	var writers []*writer
	for i, share := range []func(int) bool{func(i int) bool { return i%2 == 0 }, func(i int) bool { return i%2 == 1 }} {
		writers = append(writers, w.start(t, ms[i].Dir, writerOptions{pace: time.Millisecond, share: share, seed: uint64(i)}))
	}
	wait := time.Duration(seconds) * time.Second
	for _, wr := range writers {
		if exited, err := wr.wait(wait); exited {
			t.Fatalf("a writer stopped: %v\n%s", err, wr.out.String())
		}
		wait = 0 // the other has run as long
	}
	for _, wr := range writers {
		wr.kill()
	}
	stopMounts(t, w.dir, ms)
	begun, done, errnos := w.manifestStats(t)
	if len(errnos) > 0 || done < 100 {
		t.Fatalf("the writers began %d writes, finished %d, errors %v; want many and none", begun, done, errnos)
	}
	t.Logf("%d writes begun, %d acknowledged in %d s on two mounts", begun, done, seconds)
	w.verify(t)
	w.checkReaders(t)
}

// stopMounts unmounts mounts of the store at dir cleanly: then no journal
// may be left.
func stopMounts(t *testing.T, dir string, ms []*integration.Mount) {
	t.Helper()
	for _, m := range ms {
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if left := journalRecords(t, dir); len(left) > 0 {
		t.Errorf("clean unmounts left journal files: %v", left)
	}
}

func isExit(err error, code int) bool {
	var exit *exec.ExitError
	return errors.As(err, &exit) && exit.ExitCode() == code
}

func isKilled(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// TestCrashReplayKeepsLaterWrites: when a mount is killed after its writes
// were published, replaying its journal must not undo what another writer
// (here a second mount) wrote to the same chunks since.
func TestCrashReplayKeepsLaterWrites(t *testing.T) {
	w := newWorkload(t)
	first, second := mount(t, w.dir), mount(t, w.dir)
	c := []int{1, 1}
	write := func(m *integration.Mount, k int) {
		for _, wa := range w.arrays {
			content := readOrMissing(t, wa.contents["v3"][k])
			if err := writeTrunc(chunkPath(m.Dir, "v3", ".", wa.a, c), content); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the write is published", func() bool {
				got, _ := storedInner(t, w.dir, wa.a, c)
				return string(got) == string(content)
			})
		}
	}
	write(first, 0)
	write(second, 1)
	syscall.Kill(first.Pid(), syscall.SIGKILL)
	first.Kill()
	replayed := mount(t, w.dir)
	for _, wa := range w.arrays {
		if got, _ := storedInner(t, w.dir, wa.a, c); string(got) != string(readOrMissing(t, wa.contents["v3"][1])) {
			t.Errorf("%s: replaying the killed mount's journal put back its write over the later one\n%s", wa.a.Path, replayed.Log())
		}
	}
	for _, m := range []*integration.Mount{second, replayed} {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	}
}

// TestUnmountUnpublished: when a write cannot be published (its shard's
// index turned corrupt under the mount), unmounting says so and exits
// non-zero, the write stays journaled, and the next read-write mount
// refuses to start rather than serve a store missing it; read-only mounts
// still work.
func TestUnmountUnpublished(t *testing.T) {
	w := newWorkload(t)
	a := w.arrays[0].a
	m := mount(t, w.dir)
	shard := filepath.Join(w.dir, filepath.FromSlash(a.ChunkKey([]int{0, 0})))
	// Holding the shard's lock file (the update protocol zarrfs shares
	// with tensorstore) keeps zarrfs from publishing until it is corrupt.
	lock, err := os.OpenFile(shard+".__lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.FcntlFlock(lock.Fd(), unix.F_OFD_SETLKW, &unix.Flock_t{Type: unix.F_WRLCK}); err != nil {
		t.Fatal(err)
	}
	if err := writeTrunc(chunkPath(m.Dir, "v3", ".", a, []int{1, 1}), readOrMissing(t, w.arrays[0].contents["v3"][0])); err != nil {
		t.Fatal(err)
	}
	b := readOrMissing(t, shard)
	b[len(b)-6] ^= 1 // inside the index
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	err = m.Stop()
	if err == nil || !strings.Contains(err.Error(), "not published") || !strings.Contains(err.Error(), a.ChunkKey([]int{0, 0})) {
		t.Fatalf("unmounting with a write that cannot be published: %v; want a failure naming the shard and the unpublished record", err)
	}
	if !slices.Equal(readOrMissing(t, shard), b) {
		t.Error("the corrupt shard was changed")
	}
	if again, err := integration.Start(zarrfsBin, w.dir, t.TempDir()); err == nil {
		again.Kill()
		t.Error("a read-write mount replaying an unpublishable journal started")
	} else if !strings.Contains(err.Error(), "replaying journals") {
		t.Errorf("a read-write mount with an unpublishable journal failed without saying why: %v", err)
	}
	ro := mount(t, w.dir, "--ro")
	if _, err := os.ReadFile(filepath.Join(ro.Dir, "v2", zarr.ZMetadata)); err != nil {
		t.Errorf("the read-only mount does not work: %v", err)
	}
}

// readLines reads a file of lines.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "" })
}

// deadZarrfs reports whether e is what a request in flight gets when
// zarrfs dies: ENOTCONN or ECONNABORTED over /dev/fuse, ECANCELED over
// io_uring (the kernel cancels the ring's commands with the process), and
// EIO for the request the kernel was copying to or from zarrfs as SIGKILL
// hit (fs/fuse/dev.c ends a request whose copy fails with EIO). zarrfs logs
// every EIO it answers (a warning or an error), so an EIO counts as the
// kernel's only when zarrfsLog has neither.
func deadZarrfs(e syscall.Errno, zarrfsLog string) bool {
	switch e {
	case syscall.ENOTCONN, syscall.ECONNABORTED, syscall.ECANCELED:
		return true
	case syscall.EIO:
		return !strings.Contains(zarrfsLog, "level=WARN") && !strings.Contains(zarrfsLog, "level=ERROR")
	}
	return false
}
