package integration_test

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
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

	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
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

// running is a zarrfs command started by startZarrfs.
type running struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error // its exit
}

// startZarrfs starts bin with args.
func startZarrfs(t *testing.T, bin string, args ...string) *running {
	t.Helper()
	r := &running{cmd: exec.Command(bin, args...), done: make(chan error, 1)}
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	return r
}

// wait waits for the command's exit; after limit it fails the test and
// kills it.
func (r *running) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(limit):
		r.cmd.Process.Kill()
		err := <-r.done
		t.Errorf("zarrfs %s: still running after %v\n%s", strings.Join(r.cmd.Args[1:], " "), limit, r.out.String())
		return err
	}
}

// runMeasured runs a zarrfs command (killed after limit) and returns its
// output, its peak RSS and its error. The peak is VmHWM of
// /proc/PID/status, read every few milliseconds while it runs: the
// rusage of a child counts the memory of the process that started it.
func runMeasured(t *testing.T, limit time.Duration, bin string, args ...string) (out string, rss int64, err error) {
	t.Helper()
	r := startZarrfs(t, bin, args...)
	status := fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid)
	stop := make(chan struct{})
	measured := make(chan int64)
	go func() {
		peak := int64(0)
		for tick := time.NewTicker(2 * time.Millisecond); ; {
			select {
			case <-stop:
				tick.Stop()
				measured <- peak
				return
			case <-tick.C:
				peak = max(peak, vmHWM(status))
			}
		}
	}()
	err = r.wait(t, limit)
	close(stop)
	return r.out.String(), <-measured, err
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
		out, rss, err := runMeasured(t, 5*time.Minute, bin, cmd, dir)
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
	m := mountWith(t, bin, dir, "--ro", "--cache-size", "64MiB")
	mnt := m.Dir
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
	out, _, err := runMeasured(t, 5*time.Minute, bin, "info", "--max-metadata-size", "300MiB", dir, "bomb")
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
					out, rss, err := runMeasured(t, 2*time.Minute, bin, cmd...)
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

// zipWriter writes a zip file entry by entry, keeping only what its
// central directory needs (archive/zip keeps every header whole), with a
// zip64 end record: for zips of millions of entries.
type zipWriter struct {
	w       *bufio.Writer
	off     int64
	central bytes.Buffer
	entries int
}

// add writes a member: stored (deflated nil), or deflated bytes that
// inflate to size bytes of crc32 crc.
func (z *zipWriter) add(name string, data []byte, deflated bool, crc uint32, size int64) {
	method := uint16(0)
	if deflated {
		method = 8
	}
	// The fields both headers share, in the same order.
	common := func(b []byte) {
		binary.LittleEndian.PutUint16(b[0:], method)
		binary.LittleEndian.PutUint32(b[6:], crc)
		binary.LittleEndian.PutUint32(b[10:], uint32(len(data)))
		binary.LittleEndian.PutUint32(b[14:], uint32(size))
		binary.LittleEndian.PutUint16(b[18:], uint16(len(name)))
	}
	var h [30]byte // local file header
	binary.LittleEndian.PutUint32(h[0:], 0x04034b50)
	binary.LittleEndian.PutUint16(h[4:], 20)
	common(h[8:])
	var c [46]byte // central directory header
	binary.LittleEndian.PutUint32(c[0:], 0x02014b50)
	binary.LittleEndian.PutUint16(c[4:], 20)
	binary.LittleEndian.PutUint16(c[6:], 20)
	common(c[10:])
	binary.LittleEndian.PutUint32(c[42:], uint32(z.off))
	z.central.Write(c[:])
	z.central.WriteString(name)
	z.w.Write(h[:])
	z.w.WriteString(name)
	z.w.Write(data)
	z.off += int64(len(h) + len(name) + len(data))
	z.entries++
}

// close writes the central directory and the end records.
func (z *zipWriter) close() error {
	dirOff, dirLen := z.off, int64(z.central.Len())
	z.w.Write(z.central.Bytes())
	var e64 [56 + 20]byte
	binary.LittleEndian.PutUint32(e64[0:], 0x06064b50)
	binary.LittleEndian.PutUint64(e64[4:], 44)
	binary.LittleEndian.PutUint16(e64[12:], 45)
	binary.LittleEndian.PutUint16(e64[14:], 45)
	binary.LittleEndian.PutUint64(e64[24:], uint64(z.entries))
	binary.LittleEndian.PutUint64(e64[32:], uint64(z.entries))
	binary.LittleEndian.PutUint64(e64[40:], uint64(dirLen))
	binary.LittleEndian.PutUint64(e64[48:], uint64(dirOff))
	binary.LittleEndian.PutUint32(e64[56:], 0x07064b50)
	binary.LittleEndian.PutUint64(e64[64:], uint64(dirOff+dirLen))
	binary.LittleEndian.PutUint32(e64[72:], 1)
	z.w.Write(e64[:])
	var end [22]byte
	binary.LittleEndian.PutUint32(end[0:], 0x06054b50)
	binary.LittleEndian.PutUint16(end[8:], 0xffff)
	binary.LittleEndian.PutUint16(end[10:], 0xffff)
	binary.LittleEndian.PutUint32(end[12:], uint32(dirLen))
	binary.LittleEndian.PutUint32(end[16:], uint32(dirOff))
	z.w.Write(end[:])
	return z.w.Flush()
}

// writeZipFile writes a zip at path with fill, which adds its members.
func writeZipFile(t *testing.T, path string, fill func(z *zipWriter)) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z := &zipWriter{w: bufio.NewWriterSize(f, 1<<20)}
	fill(z)
	if err := z.close(); err != nil {
		t.Fatal(err)
	}
}

// arrayDocOf is the zarr.json of an array of uint8 of shape elements in
// chunks (shards) of chunk elements, with codecs.
func arrayDocOf(t *testing.T, shape, chunk int64, codecs []meta.Codec) ([]byte, *zarr.Array) {
	t.Helper()
	dir := t.TempDir()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	a, err := zarr.CreateArrayV3(t.Context(), s, "a", &meta.ArrayV3{
		Shape: []int{int(shape)}, DataType: dtype.TypeUint8, ChunkShape: []int{int(chunk)}, FillValue: []byte{0},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}, Codecs: codecs,
	})
	if err != nil {
		t.Fatal(err)
	}
	return readOrMissing(t, filepath.Join(dir, "a", zarr.ZarrJSON)), a
}

const rootGroup = `{"zarr_format": 3, "node_type": "group"}`

// TestAttackZipMillionEntries: a zip of 1,000,000 entries (the chunks of
// one unsharded array) opens in info and mount within minutes, in far
// less memory than archive/zip's index (more than 10 minutes and 494 MB
// before), and SIGTERM ends either while it opens.
func TestAttackZipMillionEntries(t *testing.T) {
	const n = 1_000_000
	bin := plainZarrfs(t)
	doc, _ := arrayDocOf(t, n, 1, []meta.Codec{zarrtest.BytesLE})
	p := filepath.Join(t.TempDir(), "million.zip")
	writeZipFile(t, p, func(z *zipWriter) {
		z.add(zarr.ZarrJSON, []byte(rootGroup), false, crc32.ChecksumIEEE([]byte(rootGroup)), int64(len(rootGroup)))
		z.add("a/"+zarr.ZarrJSON, doc, false, crc32.ChecksumIEEE(doc), int64(len(doc)))
		for i := range n {
			v := []byte{byte(i%255 + 1)}
			z.add(fmt.Sprintf("a/c/%d", i), v, false, crc32.ChecksumIEEE(v), 1)
		}
	})
	fi, _ := os.Stat(p)
	t.Logf("%s: %d MB", p, fi.Size()>>20)

	out, rss, err := runMeasured(t, 5*time.Minute, bin, "info", p)
	if err != nil || !strings.Contains(out, "a  (v3 array") {
		t.Fatalf("zarrfs info: %v\n%s", err, out)
	}
	t.Logf("zarrfs info: peak RSS %d MiB\n%s", rss>>20, out)
	if rss > 512<<20 { // the zip's index is 62 MiB of it; the rest inspects a million chunks
		t.Errorf("zarrfs info: peak RSS %d MiB, want at most 512", rss>>20)
	}
	m := mountWith(t, bin, p, "--ro")
	mnt := m.Dir
	b, err := os.ReadFile(filepath.Join(mnt, "v3", "a", "c", "999999"))
	if err != nil || !bytes.Equal(b, []byte{999999%255 + 1}) {
		t.Errorf("the last chunk through the mount: %v, %v", b, err)
	}
	rss = daemonRSS(t, m.Pid())
	t.Logf("mount: peak RSS %d MiB", rss>>20)
	if rss > 256<<20 {
		t.Errorf("mount: peak RSS %d MiB, want at most 256", rss>>20)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}

	// SIGTERM while the zip opens ends info and mount.
	for _, args := range [][]string{{"info", p}, {"mount", "--ro", p, mnt}} {
		r := startZarrfs(t, bin, args...)
		time.Sleep(200 * time.Millisecond)
		r.cmd.Process.Signal(syscall.SIGTERM)
		err := r.wait(t, time.Minute)
		t.Logf("zarrfs %s, SIGTERM after 200 ms: %v\n%s", args[0], err, r.out.String())
		integration.ForceUnmount(mnt)
	}
}

// deflatedMiBs returns a deflate stream of n MiB of byte c followed by
// tail (n copies of one flushed MiB: a stream's blocks need nothing
// before them), with the crc32 and size of what it inflates to.
func deflatedMiBs(n int, c byte, tail []byte) (stream []byte, crc uint32, size int64) {
	mib := bytes.Repeat([]byte{c}, 1<<20)
	var block, last bytes.Buffer
	fw, _ := flate.NewWriter(&block, flate.BestCompression)
	fw.Write(mib)
	fw.Flush()
	fw, _ = flate.NewWriter(&last, flate.BestCompression)
	fw.Write(tail)
	fw.Close()
	stream = append(bytes.Repeat(block.Bytes(), n), last.Bytes()...)
	sum := crc32.NewIEEE()
	for range n {
		sum.Write(mib)
	}
	sum.Write(tail)
	return stream, sum.Sum32(), int64(n)<<20 + int64(len(tail))
}

// TestAttackZipDeflateBombs: a zip of 4 MB holding two deflated shards
// of 1900 MiB each: readers of chunks of both at once through a mount
// with --cache-size 64MiB get their bytes, and the mount stays within
// --cache-size + 64 MiB (6.9 GB before, which inflated each shard
// whole); info and check stay within 128 MiB too.
func TestAttackZipDeflateBombs(t *testing.T) {
	const mibs = 1900
	bin := plainZarrfs(t)
	doc, a := arrayDocOf(t, 2*mibs<<20, mibs<<20, zarr.ShardedCodecs([]int{1 << 20}, []meta.Codec{zarrtest.BytesLE}))
	ix := sharding.NewIndex(mibs)
	for i := range mibs {
		ix.Set(i, int64(i)<<20, 1<<20)
	}
	index, err := a.Sharding().EncodeIndex(ix)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "bombs.zip")
	writeZipFile(t, p, func(z *zipWriter) {
		z.add(zarr.ZarrJSON, []byte(rootGroup), false, crc32.ChecksumIEEE([]byte(rootGroup)), int64(len(rootGroup)))
		z.add("a/"+zarr.ZarrJSON, doc, false, crc32.ChecksumIEEE(doc), int64(len(doc)))
		for shard, c := range []byte{1, 2} {
			stream, crc, size := deflatedMiBs(mibs, c, index)
			z.add(fmt.Sprintf("a/c/%d", shard), stream, true, crc, size)
		}
	})
	fi, _ := os.Stat(p)
	t.Logf("%s: %d KB", p, fi.Size()>>10)

	m := mountWith(t, bin, p, "--ro", "--cache-size", "64MiB")
	mnt := m.Dir
	var wg sync.WaitGroup
	for _, k := range []int{mibs - 1, 7, 2*mibs - 1, mibs + 3} {
		wg.Go(func() {
			b, err := os.ReadFile(filepath.Join(mnt, "v3", "a", "c", fmt.Sprint(k)))
			want := bytes.Repeat([]byte{byte(1 + k/mibs)}, 1<<20)
			if err != nil || !bytes.Equal(b, want) {
				t.Errorf("chunk %d: %d bytes, %v; want 1 MiB of %d", k, len(b), err, want[0])
			}
		})
	}
	wg.Wait()
	rss := daemonRSS(t, m.Pid())
	t.Logf("mount: peak RSS %d MiB", rss>>20)
	if rss > 64<<20+64<<20 {
		t.Errorf("mount: peak RSS %d MiB, want within --cache-size + 64 MiB", rss>>20)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"info", "check"} {
		out, rss, err := runMeasured(t, 10*time.Minute, bin, cmd, p)
		if err != nil {
			t.Errorf("zarrfs %s: %v\n%s", cmd, err, out)
		}
		t.Logf("zarrfs %s: peak RSS %d MiB", cmd, rss>>20)
		if rss > 128<<20 {
			t.Errorf("zarrfs %s: peak RSS %d MiB, want at most 128", cmd, rss>>20)
		}
	}
}
