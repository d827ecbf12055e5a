package integration_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// warmOps are the FUSE requests a read of a cached chunk file could cost.
var warmOps = []string{"LOOKUP", "GETATTR", "OPEN", "READ", "FLUSH", "RELEASE"}

// fuseRequests counts the FUSE requests of each of warmOps the mount
// serving metrics at addr has answered.
func fuseRequests(t testing.TB, addr string) map[string]int {
	t.Helper()
	families := scrape(t, addr)
	n := map[string]int{}
	for _, op := range warmOps {
		v, _ := metricValue(families, "zarrfs_fuse_request_duration_seconds", "op", op)
		n[op] = int(v)
	}
	return n
}

// readAllFiles reads every file of paths whole.
func readAllFiles(t testing.TB, paths []string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWarmReadsKeepPages reads every chunk file of the generated v3
// store's sharded arrays through a read-only mount again and again. Within
// --revalidate a warm pass costs no FUSE request at all: the kernel serves
// names, attributes and pages. Past it, the kernel asks again (a LOOKUP per
// file: the price of seeing a changed shard within --revalidate), but an
// unchanged shard keeps the pages: no READ, so the pass costs one round
// trip per file and no bytes.
func TestWarmReadsKeepPages(t *testing.T) {
	dir := t.TempDir()
	var arrays []string
	for _, g := range zarrtest.WriteV3Store(t, dir) {
		if g.Sharded {
			arrays = append(arrays, g.Path)
		}
	}
	chunkFiles := func(mnt string) []string {
		var files []string
		for _, a := range arrays {
			files = append(files, chunkFilesOf(t, filepath.Join(mnt, a))...)
		}
		if len(files) < 2 {
			t.Fatal("the generated store's sharded arrays have fewer than two chunk files")
		}
		return files
	}

	t.Run("within revalidate", func(t *testing.T) {
		addr := freeAddr(t)
		m := mount(t, dir, "--ro", "--view", "v3", "--revalidate", "1h", "--metrics-listen", addr)
		files := chunkFiles(m.Dir)
		readAllFiles(t, files)
		readAllFiles(t, files)
		before := fuseRequests(t, addr)
		readAllFiles(t, files)
		after := fuseRequests(t, addr)
		for _, op := range warmOps {
			if d := after[op] - before[op]; d != 0 {
				t.Errorf("a warm pass over %d chunk files within --revalidate sent %d %s requests, want none", len(files), d, op)
			}
		}
	})

	t.Run("past revalidate", func(t *testing.T) {
		const revalidate = 500 * time.Millisecond
		addr := freeAddr(t)
		m := mount(t, dir, "--ro", "--view", "v3", "--revalidate", revalidate.String(), "--metrics-listen", addr)
		files := chunkFiles(m.Dir)
		readAllFiles(t, files)
		readAllFiles(t, files)
		time.Sleep(revalidate + 200*time.Millisecond)
		before := fuseRequests(t, addr)
		readAllFiles(t, files)
		after := fuseRequests(t, addr)
		if d := after["READ"] - before["READ"]; d != 0 {
			t.Errorf("a pass over %d unchanged chunk files past --revalidate read %d times: the kernel dropped their pages", len(files), d)
		}
		if d := after["LOOKUP"] + after["GETATTR"] - before["LOOKUP"] - before["GETATTR"]; d < len(files) {
			t.Errorf("a pass over %d chunk files past --revalidate sent %d LOOKUP and GETATTR requests, want one a file at least: the kernel no longer asks", len(files), d)
		}
	})
}

// BenchmarkWarmChunkFiles reads every chunk file of an 8 MiB array (128
// files of 64 KiB raw, 32 shards) through a read-only mount whose page
// cache holds them all: "kernel" within --revalidate (no FUSE request),
// "revalidated" with every name's entry expired, as a reader coming back
// past --revalidate finds them (one LOOKUP a file). The daemon is built
// without the race detector. requests/file counts the FUSE requests a
// pass sent.
func BenchmarkWarmChunkFiles(b *testing.B) {
	wd, _ := os.Getwd()
	bin, err := integration.Build(filepath.Dir(wd), b.TempDir(), false)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	ctx := context.Background()
	s := zarrtest.OpenStore(b, dir)
	defer s.Close()
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		b.Fatal(err)
	}
	bytesLE := meta.Codec{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)}
	a, err := zarr.CreateArrayV3(ctx, s, "raw", &meta.ArrayV3{
		Shape: []int{128, 128, 256}, DataType: dtype.TypeUint16, ChunkShape: []int{64, 64, 32},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
		FillValue:   make([]byte, 2),
		Codecs:      zarr.ShardedCodecs([]int{32, 32, 32}, []meta.Codec{bytesLE}),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Write(ctx, zarrtest.Pattern(a, 1)); err != nil {
		b.Fatal(err)
	}

	for _, c := range []struct {
		name       string
		revalidate time.Duration
	}{{"kernel", time.Hour}, {"revalidated", 50 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			mnt := filepath.Join(b.TempDir(), "mnt")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				b.Fatal(err)
			}
			addr := freeAddr(b)
			m, err := integration.Start(bin, dir, mnt, "--ro", "--view", "v3", "--revalidate", c.revalidate.String(), "--metrics-listen", addr)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if mounted, _ := zfs.Mounted(mnt); mounted {
					if err := m.Stop(); err != nil {
						b.Errorf("unmount: %v", err)
					}
				}
				m.Kill()
			})
			files := chunkFilesOf(b, filepath.Join(mnt, "raw"))
			readAllFiles(b, files)
			count := func() (n int) {
				for _, v := range fuseRequests(b, addr) {
					n += v
				}
				return n
			}
			before := count()
			b.SetBytes(int64(len(files)) * 64 << 10)
			b.ResetTimer()
			for range b.N {
				if c.revalidate < time.Second {
					b.StopTimer()
					time.Sleep(c.revalidate + 10*time.Millisecond)
					b.StartTimer()
				}
				readAllFiles(b, files)
			}
			b.StopTimer()
			b.ReportMetric(float64(count()-before)/float64(b.N*len(files)), "requests/file")
		})
	}
}
