package integration_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/codec"
	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/fs/fuseuring"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"golang.org/x/sys/unix"
)

// The array of the memory test, shaped as issue 30's: 256 MiB of uint16 in
// 16 shards of 64 uncompressed inner chunks of 256 KiB.
var (
	rssShape = []int{512, 512, 512}
	rssShard = []int{128, 256, 256}
	rssInner = []int{32, 64, 64}
)

// rssValue is the element at x, y, z of the memory test's array: never the
// fill value, and different in every chunk.
func rssValue(x, y, z int) uint16 { return uint16(1 + (x*7+y*13+z*31)%65000) }

// rssChunk returns the bytes of the inner chunk at coords.
func rssChunk(coords []int) []byte {
	b := make([]byte, 0, nd.Size(rssInner)*2)
	x0, y0, z0 := coords[0]*rssInner[0], coords[1]*rssInner[1], coords[2]*rssInner[2]
	for x := x0; x < x0+rssInner[0]; x++ {
		for y := y0; y < y0+rssInner[1]; y++ {
			for z := z0; z < z0+rssInner[2]; z++ {
				b = binary.LittleEndian.AppendUint16(b, rssValue(x, y, z))
			}
		}
	}
	return b
}

// writeRSSStore writes the memory test's array, a shard at a time.
func writeRSSStore(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	s, err := store.OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	m := &meta.ArrayV3{
		Shape: rssShape, DataType: dtype.TypeUint16, ChunkShape: rssShard,
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
		FillValue:   []byte{0, 0},
		Codecs:      zarr.ShardedCodecs(rssInner, []meta.Codec{{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)}}),
	}
	a, err := zarr.CreateArrayV3(ctx, s, "big", m)
	if err != nil {
		t.Fatal(err)
	}
	grid := nd.Grid(rssShape, rssShard)
	pos := make([]int, len(grid))
	for {
		start := make([]int, 3)
		for d := range start {
			start[d] = pos[d] * rssShard[d]
		}
		data := codec.NewChunk(codec.Spec{Shape: rssShard, Type: a.Type, Fill: a.Fill()})
		i := 0
		for x := start[0]; x < start[0]+rssShard[0]; x++ {
			for y := start[1]; y < start[1]+rssShard[1]; y++ {
				for z := start[2]; z < start[2]+rssShard[2]; z++ {
					binary.LittleEndian.PutUint16(data.Data[i:], rssValue(x, y, z))
					i += 2
				}
			}
		}
		if err := a.WriteRegion(ctx, start, data); err != nil {
			t.Fatal(err)
		}
		if !nd.Next(pos, grid) {
			return
		}
	}
}

// TestPeakRSSWithinCacheSize reads, as issue 30's whole-array rows do, a
// 256 MiB array from S3 (versitygw behind 20 ms a request, so that fetches
// overlap as they do from a remote store) through a mount with
// --cache-size 64MiB over each transport: 32 readers a CPU read every
// chunk file through v3/ and v2/ at once, in no order. Every file has its
// bytes, the daemon's peak RSS (VmHWM) stays within the cache plus 64 MiB,
// and over io_uring within its peak over /dev/fuse plus the io_uring
// buffers (TransportBufferBytes). It runs the daemon built without the
// race detector, whose shadow memory would measure the detector, not
// zarrfs.
func TestPeakRSSWithinCacheSize(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: -short: writes and reads a 256 MiB array")
	}
	const cacheBytes, bound = 64 << 20, 64<<20 + 64<<20
	srv := s3test.Start(t)
	srv.Bucket(t, "rss")
	dir := t.TempDir()
	writeRSSStore(t, dir)
	srv.Upload(t, dir, "rss", "store")
	useS3(t, srv, delayedProxy(t, srv.Endpoint, 20*time.Millisecond))
	wd, _ := os.Getwd()
	bin, err := integration.Build(filepath.Dir(wd), t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	a := storeArray(t, dir, "big")
	chunks := nd.Grid(rssShape, rssInner)
	var coords [][]int
	pos := make([]int, len(chunks))
	for {
		coords = append(coords, append([]int(nil), pos...))
		if !nd.Next(pos, chunks) {
			break
		}
	}
	transports := []string{zfs.TransportDevFuse}
	if fuseuring.Enable() == nil && fuseuring.Available() == nil {
		transports = append(transports, zfs.TransportIOURing)
	} else {
		t.Log("SKIP io_uring: not available here; /dev/fuse only")
	}
	peak := map[string]int64{}
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			mnt := filepath.Join(t.TempDir(), "mnt")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			m, err := integration.Start(bin, "s3://rss/store", mnt, "--ro", "--s3-path-style", "--cache-size", fmt.Sprint(cacheBytes), "--fuse-transport", transport)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if mounted, _ := zfs.Mounted(mnt); mounted {
					if err := m.Stop(); err != nil {
						t.Errorf("unmount: %v", err)
					}
				}
				m.Kill()
			})
			type file struct {
				path   string
				coords []int
			}
			var files []file
			for _, view := range []string{"v3", "v2"} {
				for _, c := range coords {
					files = append(files, file{chunkPath(mnt, view, ".", a, c), c})
				}
			}
			// In no order, as zarrita's concurrent reads reach the mount.
			rand.New(rand.NewPCG(30, 1)).Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
			const readersPerCPU = 32
			readers := readersPerCPU * runtime.NumCPU()
			work := make(chan file)
			errs := make(chan error, readers)
			var wg sync.WaitGroup
			for r := range readers {
				wg.Go(func() {
					// On its CPU, so its requests go to that CPU's queue.
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					var cpu unix.CPUSet
					cpu.Set(r % runtime.NumCPU())
					unix.SchedSetaffinity(0, &cpu)
					for f := range work {
						got, err := os.ReadFile(f.path)
						if err == nil && !bytes.Equal(got, rssChunk(f.coords)) {
							err = fmt.Errorf("%s: %d bytes, not the chunk's", f.path, len(got))
						}
						if err != nil {
							errs <- err
							for range work {
							}
							return
						}
					}
				})
			}
			for _, f := range files {
				work <- f
			}
			close(work)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			peak[transport] = daemonRSS(t, m.Pid())
			t.Logf("peak RSS over %s: %.1f MiB", transport, mib(peak[transport]))
		})
	}
	for transport, rss := range peak {
		if rss > bound {
			t.Errorf("peak RSS %.1f MiB over %s: more than --cache-size 64MiB + 64 MiB", mib(rss), transport)
		}
	}
	dev, uring := peak[zfs.TransportDevFuse], peak[zfs.TransportIOURing]
	if buffers := zfs.TransportBufferBytes(zfs.TransportIOURing); dev > 0 && uring > dev+buffers+rssNoise {
		t.Errorf("peak RSS %.1f MiB over io_uring, %.1f MiB over /dev/fuse: io_uring takes more than its %.1f MiB of buffers (+ %d MiB of noise)",
			mib(uring), mib(dev), mib(buffers), rssNoise>>20)
	}
}

// delayedProxy starts a proxy that holds every request for delay before
// passing it to the server at endpoint (http://HOST:PORT), as a remote
// store's round trip does, and returns its URL.
func delayedProxy(t *testing.T, endpoint string, delay time.Duration) string {
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p.URL
}

// rssNoise is how much the peak RSS of two mounts making the same reads
// differs.
const rssNoise = 8 << 20

func mib(n int64) float64 { return float64(n) / (1 << 20) }
