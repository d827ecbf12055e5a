package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// fuseRequests counts the FUSE requests of each of warmOps, and the
// FORGETs (the kernel dropped inodes), the mount serving metrics at addr
// has answered.
func fuseRequests(t testing.TB, addr string) map[string]int {
	t.Helper()
	families := scrape(t, addr)
	n := map[string]int{}
	for _, op := range append(warmOps, "FORGET") {
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

// TestWarmReadsKeepPages reads every chunk file of an array of 128 raw
// chunks in 32 shards through the v2 view of a read-only mount of a
// directory, again and again. Warm passes send no FUSE request for any
// chunk file, within --revalidate and past it: zarrfs checks the shards of
// a local store itself and lets the kernel keep the files' names,
// attributes and pages (a changed shard still shows within --revalidate:
// TestReadOnlySeesReplacedShard). Only the directories are asked again.
func TestWarmReadsKeepPages(t *testing.T) {
	dir := t.TempDir()
	writeRawArray(t, dir)
	for _, c := range []struct {
		name  string
		sleep time.Duration // past --revalidate 1s, or not
	}{{"within revalidate", 0}, {"past revalidate", 1500 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			addr := freeAddr(t)
			m := mount(t, dir, "--ro", "--view", "v2", "--revalidate", "1s", "--metrics-listen", addr)
			files := rawChunkFiles(t, m.Dir)
			if len(files) < 100 { // some are empty (zarrtest.Pattern)
				t.Fatalf("%d chunk files, want 100 at least", len(files))
			}
			readAllFiles(t, files)
			readAllFiles(t, files)
			// The kernel forgets the files' inodes, and their pages with
			// them, when any process writes /proc/sys/vm/drop_caches (the
			// mount benchmark does, before each cold read) or its shrinkers
			// prune dentries and inodes: nothing a mount can keep. A warm
			// pass after such a FORGET, or one that asked for a single
			// file (a pruned dentry sends a LOOKUP and no FORGET while the
			// inode stays cached), is tried again, at most 3 tries; any
			// other pass that asks for the files fails at once.
			var problems []string
			for try := 1; ; try++ {
				start := fuseRequests(t, addr)
				time.Sleep(c.sleep)
				before := fuseRequests(t, addr)
				readAllFiles(t, files)
				after := fuseRequests(t, addr)
				problems = problems[:0]
				asked := 0
				for _, op := range warmOps {
					d := after[op] - before[op]
					if op != "LOOKUP" && op != "GETATTR" && d != 0 {
						problems = append(problems, fmt.Sprintf("a warm pass over %d chunk files sent %d %s requests, want none", len(files), d, op))
					}
					asked += d
				}
				// The directory raw, once, or twice if the pass outlasted
				// --revalidate on a loaded machine.
				if asked > 2 {
					problems = append(problems, fmt.Sprintf("a warm pass over %d chunk files sent %d LOOKUP and GETATTR requests, want at most 2 (of the directory): the kernel asks for the files", len(files), asked))
				}
				forgot := after["FORGET"] - start["FORGET"]
				oneFile := asked <= 2+2 && after["READ"]-before["READ"] <= 1
				if len(problems) == 0 || forgot == 0 && !oneFile || try == 3 {
					break
				}
				t.Logf("the kernel forgot %d inodes before or during this pass (drop_caches by another process?), trying again: %v", forgot, problems)
				readAllFiles(t, files) // warm again
			}
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
}

// rawChunkFiles returns the paths of the chunk files of writeRawArray's
// array in the v2 view mounted at mnt (v2 only: its .zarray and .zattrs
// left out).
func rawChunkFiles(t testing.TB, mnt string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(mnt, "raw"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			files = append(files, filepath.Join(mnt, "raw", e.Name()))
		}
	}
	return files
}

// writeRawArray writes the array raw, of 128 inner chunks of 64 KiB raw
// in 32 shards, to a new v3 store in dir.
func writeRawArray(t testing.TB, dir string) {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	bytesLE := meta.Codec{Name: "bytes", Configuration: json.RawMessage(`{"endian":"little"}`)}
	a, err := zarr.CreateArrayV3(ctx, s, "raw", &meta.ArrayV3{
		Shape: []int{128, 128, 256}, DataType: dtype.TypeUint16, ChunkShape: []int{64, 64, 32},
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"},
		FillValue:   make([]byte, 2),
		Codecs:      zarr.ShardedCodecs([]int{32, 32, 32}, []meta.Codec{bytesLE}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(ctx, zarrtest.Pattern(a, 1)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkWarmChunkFiles reads every chunk file of an 8 MiB array (128
// files of 64 KiB raw, 32 shards, writeRawArray) through a read-only mount
// of a directory whose page cache holds them all: "kernel" within
// --revalidate, "revalidated" past it, as a reader coming back after
// --revalidate finds them (zarrfs checks the shards itself: the kernel
// asks only for the directories). The daemon is built without the race
// detector. requests/file counts the FUSE requests a pass sent.
func BenchmarkWarmChunkFiles(b *testing.B) {
	wd, _ := os.Getwd()
	bin, err := integration.Build(filepath.Dir(wd), b.TempDir(), false)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	writeRawArray(b, dir)

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
