package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr/store/gcsstore/gcstest"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
)

// remoteLatency is added to every request between a reader and the
// servers: the order of an S3 first byte.
const remoteLatency = 20 * time.Millisecond

//go:embed zarrita_read.mjs
var zarritaReadJS []byte

// delayProxy is a reverse proxy that delays every request and counts them
// by kind.
type delayProxy struct {
	srv    *httptest.Server
	mu     sync.Mutex
	counts map[string]int
}

func newDelayProxy(target string) (*delayProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := &delayProxy{counts: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.counts[requests.Kind(r)]++
		p.mu.Unlock()
		time.Sleep(remoteLatency)
		rp.ServeHTTP(w, r)
	}))
	return p, nil
}

// take returns the counts since the last take.
func (p *delayProxy) take() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.counts
	p.counts = map[string]int{}
	return out
}

func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// remote is workload 8: a sharded array in a real S3 server (versitygw)
// behind a proxy that adds remoteLatency to every request, read cold by
// zarr-python 2 through MNT/v2 of an s3:// mount and by cat of every chunk
// file in key order, against zarrita.js reading the same store directly
// over HTTP through the same latency (its own suffix and range requests).
func (b *bench) remote() error {
	var spec *arraySpec
	for i := range b.specs {
		if b.specs[i].name == "raw" {
			spec = &b.specs[i]
		}
	}
	title := fmt.Sprintf("8. remote, cold: the %s array (%s) in S3 (versitygw) and on a web server, %s added to every request",
		spec.name, formatBytes(float64(spec.elementBytes())), remoteLatency)
	b.section(title)
	script, srv, stop, err := b.startZarritaAndS3("s3")
	if srv == nil {
		return err
	}
	defer stop()
	ctx := context.Background()
	progress("uploading the " + spec.name + " array to S3")
	if err := srv.CreateBucket(ctx, "bench"); err != nil && !strings.Contains(err.Error(), "BucketAlready") {
		return err
	}
	if err := srv.UploadDir(ctx, filepath.Join(b.storeDir, spec.name), "bench", "store/"+spec.name); err != nil {
		return err
	}
	root, err := os.ReadFile(filepath.Join(b.storeDir, "zarr.json"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.work, "s3-root"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.work, "s3-root", "zarr.json"), root, 0o644); err != nil {
		return err
	}
	if err := srv.UploadDir(ctx, filepath.Join(b.work, "s3-root"), "bench", "store"); err != nil {
		return err
	}
	s3Proxy, err := newDelayProxy(srv.Endpoint)
	if err != nil {
		return err
	}
	defer s3Proxy.srv.Close()
	web := httptest.NewServer(http.FileServer(http.Dir(b.storeDir)))
	defer web.Close()
	webProxy, err := newDelayProxy(web.URL)
	if err != nil {
		return err
	}
	defer webProxy.srv.Close()
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	os.Setenv("AWS_ENDPOINT_URL", s3Proxy.srv.URL)

	mnt := filepath.Join(b.work, "remote-mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	var cold *integration.Mount
	mountCold := func() error {
		if err := b.ms.stopZarrfs(mnt); err != nil {
			return err
		}
		if err := dropCaches(); err != nil {
			return err
		}
		var err error
		cold, err = b.ms.startZarrfs(b.bin, "s3://bench/store", mnt, append([]string{"--ro", "--s3-path-style"}, b.cfg.mountArgs...)...)
		return err
	}
	peak := func(r *peakRSSOf) { r.add(cold) }
	defer b.ms.stopZarrfs(mnt)
	arrayV2 := filepath.Join(mnt, "v2", spec.name)
	var viaMount, catFiles, direct sample
	var mountReqs, catReqs, directReqs map[string]int
	var mountBytes, catBytes fetchedServed
	var mountRSS, catRSS peakRSSOf
	var nbytes int64
	// Request counts include the mount's discovery of the hierarchy, as
	// zarrita's include its metadata reads.
	for range b.cfg.runs {
		s3Proxy.take()
		if err := mountCold(); err != nil {
			return err
		}
		times, n, err := b.python("zarr", 0, 1, arrayV2)
		if err != nil {
			return err
		}
		viaMount, nbytes, mountReqs, mountBytes = append(viaMount, times[arrayV2]...), n, s3Proxy.take(), readFetchedServed(mnt)
		peak(&mountRSS)

		s3Proxy.take()
		if err := mountCold(); err != nil {
			return err
		}
		times, _, err = b.python("files-unbuffered", 0, 1, arrayV2)
		if err != nil {
			return err
		}
		catFiles, catReqs, catBytes = append(catFiles, times[arrayV2]...), s3Proxy.take(), readFetchedServed(mnt)
		peak(&catRSS)

		webProxy.take()
		d, err := zarritaRead(script, webProxy.srv.URL, spec.name)
		if err != nil {
			return err
		}
		direct, directReqs = append(direct, d), webProxy.take()
	}
	if err := b.remoteAccessPatterns(spec, mountCold, peak, mnt, direct, nbytes); err != nil {
		return err
	}
	b.add(row{
		name:   "zarr-python via MNT/v2 of s3:// vs zarrita direct over HTTP" + mountRSS.String(),
		zarrfs: rate(nbytes, viaMount.median()), ref: rate(nbytes, direct.median()),
		ratio: ratio(direct, viaMount), atLeast: 1.0, spread: max(direct.spread(), viaMount.spread()),
	})
	b.add(row{
		name:   "open+read every chunk file of v2/ in key order vs zarrita direct" + catRSS.String(),
		zarrfs: rate(nbytes, catFiles.median()), ref: rate(nbytes, direct.median()),
		ratio: ratio(direct, catFiles), spread: max(direct.spread(), catFiles.spread()),
	})
	if err := b.ms.stopZarrfs(mnt); err != nil {
		return err
	}
	if err := b.remoteGCS(spec, root, nbytes, direct, directReqs); err != nil {
		return err
	}
	if err := b.azRemote(spec, direct, directReqs, nbytes); err != nil {
		return err
	}
	if err := b.clusterReads(spec, s3Proxy, nbytes); err != nil {
		return err
	}
	fewer := total(mountReqs) <= total(directReqs)
	b.add(row{
		name:   fmt.Sprintf("requests: zarr-python via mount %v (%s); cat %v (%s); zarrita %v", mountReqs, mountBytes, catReqs, catBytes, directReqs),
		zarrfs: fmt.Sprint(total(mountReqs)), ref: fmt.Sprint(total(directReqs)),
		check: "<= zarrita's", pass: &fewer,
	})
	return nil
}

// remoteGCS: the same array in a GCS emulator (fake-gcs-server) behind
// the same latency, read cold by zarr-python 2 through MNT/v2 of a gs://
// mount, against zarrita's direct reads of workload 8 (direct, directReqs).
func (b *bench) remoteGCS(spec *arraySpec, root []byte, nbytes int64, direct sample, directReqs map[string]int) error {
	logFile, err := os.Create(filepath.Join(b.work, "fake-gcs-server.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	srv, stop, err := gcstest.StartServer(logFile)
	if err != nil {
		b.add(row{name: "gs:// skipped: " + err.Error(), check: "-"})
		return nil
	}
	defer stop()
	ctx := context.Background()
	progress("uploading the " + spec.name + " array to the GCS emulator")
	if err := srv.CreateBucket(ctx, "bench"); err != nil {
		return err
	}
	if err := srv.UploadDir(ctx, filepath.Join(b.storeDir, spec.name), "bench", "store/"+spec.name); err != nil {
		return err
	}
	if err := srv.UploadDir(ctx, filepath.Join(b.work, "s3-root"), "bench", "store"); err != nil {
		return err
	}
	proxy, err := newDelayProxy(srv.Endpoint)
	if err != nil {
		return err
	}
	defer proxy.srv.Close()
	os.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(proxy.srv.URL, "http://"))
	mnt := filepath.Join(b.work, "gcs-mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	defer b.ms.stopZarrfs(mnt)
	arrayV2 := filepath.Join(mnt, "v2", spec.name)
	var viaMount sample
	var reqs map[string]int
	var rss peakRSSOf
	for range b.cfg.runs {
		if err := b.ms.stopZarrfs(mnt); err != nil {
			return err
		}
		if err := dropCaches(); err != nil {
			return err
		}
		proxy.take()
		m, err := b.ms.startZarrfs(b.bin, "gs://bench/store", mnt, append([]string{"--ro"}, b.cfg.mountArgs...)...)
		if err != nil {
			return err
		}
		times, _, err := b.python("zarr", 0, 1, arrayV2)
		if err != nil {
			return err
		}
		viaMount, reqs = append(viaMount, times[arrayV2]...), proxy.take()
		rss.add(m)
	}
	b.add(row{
		name:   "zarr-python via MNT/v2 of gs:// (fake-gcs-server) vs zarrita direct over HTTP" + rss.String(),
		zarrfs: rate(nbytes, viaMount.median()), ref: rate(nbytes, direct.median()),
		ratio: ratio(direct, viaMount), spread: max(direct.spread(), viaMount.spread()),
	})
	fewer := total(reqs) <= total(directReqs)
	b.add(row{
		name:   fmt.Sprintf("requests: zarr-python via gs:// mount %v; zarrita %v", reqs, directReqs),
		zarrfs: fmt.Sprint(total(reqs)), ref: fmt.Sprint(total(directReqs)),
		check: "<= zarrita's", pass: &fewer,
	})
	return b.ms.stopZarrfs(mnt)
}

// fetchedServed are a mount's bytes fetched from the store (its requests'
// bodies) and served from its files, from MNT/.zarrfs/stats, and over
// io_uring the most requests one queue served at once.
type fetchedServed struct {
	fetched, served uint64
	uringPeak       int
}

func (f fetchedServed) String() string {
	s := fmt.Sprintf("fetched %s, served %s", formatBytes(float64(f.fetched)), formatBytes(float64(f.served)))
	if f.uringPeak > 0 {
		s += fmt.Sprintf(", up to %d requests at once on an io_uring queue", f.uringPeak)
	}
	return s
}

// peakRSSOf is the largest peak RSS (VmHWM) of the zarrfs processes of a
// row's runs, which the remote rows show beside their times.
type peakRSSOf int64

// add takes the peak RSS of m, the mount of a run that has just read.
func (r *peakRSSOf) add(m *integration.Mount) {
	if p, err := peakRSS(m.Pid()); err == nil {
		*r = max(*r, peakRSSOf(p))
	}
}

func (r peakRSSOf) String() string {
	return fmt.Sprintf(" (zarrfs peak RSS %s)", formatBytes(float64(r)))
}

func readFetchedServed(mnt string) fetchedServed {
	var st struct {
		Requests  map[string]uint64 `json:"requests"`
		URingPeak int               `json:"uring_peak_in_flight"`
		Served    struct {
			PassThrough uint64 `json:"pass_through_bytes"`
			Transcoded  uint64 `json:"transcoded_bytes"`
		} `json:"served"`
	}
	b, err := os.ReadFile(filepath.Join(mnt, ".zarrfs", "stats"))
	if err == nil && json.Unmarshal(b, &st) == nil {
		return fetchedServed{st.Requests["bytes fetched"], st.Served.PassThrough + st.Served.Transcoded, st.URingPeak}
	}
	return fetchedServed{}
}

// remoteAccessPatterns reads the array through MNT/v3 of a fresh s3://
// mount as a pool of readers (zarrita's: chunk keys queued in order, 4
// read at once, finishing out of order) and as a random reader (200
// chunk files), with the bytes each fetched against those it needed.
func (b *bench) remoteAccessPatterns(spec *arraySpec, mountCold func() error, peak func(*peakRSSOf), mnt string, direct sample, nbytes int64) error {
	c := readCase{*spec, "v3"}
	all := b.chunks[spec.name]
	rng := rand.New(rand.NewPCG(30, 1))
	picked := make([]chunk, min(200, len(all)))
	for i, k := range rng.Perm(len(all))[:len(picked)] {
		picked[i] = all[k]
	}
	var needed int64
	for _, ch := range picked {
		needed += ch.n
	}
	var pool, random sample
	var poolBytes, randomBytes fetchedServed
	var poolRSS, randomRSS peakRSSOf
	for range b.cfg.runs {
		if err := mountCold(); err != nil {
			return err
		}
		d, err := timed(func() error { return readPool(mnt, c, all, 4) })
		if err != nil {
			return err
		}
		pool, poolBytes = append(pool, d), readFetchedServed(mnt)
		peak(&poolRSS)
		if err := mountCold(); err != nil {
			return err
		}
		d, err = timed(func() error { _, err := readMountFiles(mnt, c, picked); return err })
		if err != nil {
			return err
		}
		random, randomBytes = append(random, d), readFetchedServed(mnt)
		peak(&randomRSS)
	}
	b.add(row{
		name:   fmt.Sprintf("4 readers of every chunk file of v3/, out of key order, vs zarrita direct (%s)%s", poolBytes, poolRSS),
		zarrfs: rate(nbytes, pool.median()), ref: rate(nbytes, direct.median()),
		ratio: ratio(direct, pool), spread: max(direct.spread(), pool.spread()),
	})
	within := randomBytes.fetched <= 2*uint64(needed)
	b.add(row{
		name:   fmt.Sprintf("%d random chunk files of v3/: %s, %s needed (%.2fx)%s", len(picked), randomBytes, formatBytes(float64(needed)), float64(randomBytes.fetched)/float64(needed), randomRSS),
		zarrfs: perSecond(len(picked), random.median(), "files"), ref: formatBytes(float64(needed)),
		check: "fetched <= 2x needed", pass: &within,
	})
	return nil
}

// readPool reads the files of chunks through the mount at mnt with n
// readers taking them in order from one queue.
func readPool(mnt string, c readCase, chunks []chunk, n int) error {
	queue := make(chan chunk)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			buf := make([]byte, 1<<20)
			for ch := range queue {
				if _, err := readFile(c.path(mnt, ch), buf); err != nil {
					errs <- err
					for range queue {
					}
					return
				}
			}
		})
	}
	for _, ch := range chunks {
		queue <- ch
	}
	close(queue)
	wg.Wait()
	close(errs)
	return <-errs
}

// zarritaRead times zarrita reading the array at path of the store at url.
func zarritaRead(script, url, path string) (time.Duration, error) {
	cmd := exec.Command("node", script, url, path)
	cmd.Dir = filepath.Dir(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("zarrita read: %v\n%s", err, out)
	}
	var r struct{ Seconds float64 }
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("zarrita printed %q: %v", out, err)
	}
	return time.Duration(r.Seconds * float64(time.Second)), nil
}

// clusterReads: three mounts of the store as peers of one cache (as on
// three machines), each read cold by zarr-python in turn: the second and
// third find what the first fetched in the cluster.
func (b *bench) clusterReads(spec *arraySpec, origin *delayProxy, nbytes int64) error {
	os.Setenv("ZARRFS_PEER_TOKEN", "mountbench")
	var addrs, peers, mnts []string
	for i := range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addrs = append(addrs, l.Addr().String())
		l.Close()
		peers = append(peers, "http://"+addrs[i])
		mnt := filepath.Join(b.work, fmt.Sprintf("peer-%d", i))
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			return err
		}
		mnts = append(mnts, mnt)
	}
	var times [3]sample
	var reqs [3]map[string]int
	var nodeStats [3]string // each node's cluster counters after the last run
	for range b.cfg.runs {
		if err := dropCaches(); err != nil {
			return err
		}
		for i, mnt := range mnts {
			args := append([]string{"--ro", "--s3-path-style", "--revalidate", "1h",
				"--peers", strings.Join(peers, ","), "--peer-listen", addrs[i]}, b.cfg.mountArgs...)
			if _, err := b.ms.startZarrfs(b.bin, "s3://bench/store", mnt, args...); err != nil {
				return err
			}
		}
		for i, mnt := range mnts {
			origin.take()
			path := filepath.Join(mnt, "v2", spec.name)
			t, _, err := b.python("zarr", 0, 1, path)
			if err != nil {
				return err
			}
			times[i], reqs[i] = append(times[i], t[path]...), origin.take()
		}
		for i, mnt := range mnts {
			nodeStats[i] = clusterCounters(mnt)
			if err := b.ms.stopZarrfs(mnt); err != nil {
				return err
			}
		}
	}
	for i := 1; i < 3; i++ {
		b.add(row{
			name:   fmt.Sprintf("cluster: node %d's first read vs node 1's (zarr-python via v2/)", i+1),
			zarrfs: rate(nbytes, times[i].median()), ref: rate(nbytes, times[0].median()),
			ratio: ratio(times[0], times[i]), atLeast: 3, spread: max(times[0].spread(), times[i].spread()),
		})
	}
	// The ceiling of any node: the same first read from a fresh mount of
	// the array in a local directory, no network at all.
	local, _, err := b.freshMountReads(filepath.Join(b.mnt, "v2", spec.name), "", true)
	if err != nil {
		return err
	}
	b.add(row{
		name:   "cluster: ceiling: the same first read from a fresh mount of a local directory vs node 1's",
		zarrfs: rate(nbytes, local.median()), ref: rate(nbytes, times[0].median()),
		ratio: ratio(times[0], local), spread: max(times[0].spread(), local.spread()),
	})
	b.add(row{name: fmt.Sprintf("cluster: origin requests of nodes 1, 2, 3: %v, %v, %v", reqs[0], reqs[1], reqs[2]), check: "-"})
	for i, s := range nodeStats {
		b.add(row{name: fmt.Sprintf("cluster: node %d's counters at the end: %s", i+1, s), check: "-"})
	}
	return nil
}

// clusterCounters returns the cluster counters of the stats file of the
// mount at mnt, as one line of JSON.
func clusterCounters(mnt string) string {
	b, err := os.ReadFile(filepath.Join(mnt, ".zarrfs", "stats"))
	if err != nil {
		return err.Error()
	}
	var s struct{ Cluster json.RawMessage }
	if err := json.Unmarshal(b, &s); err != nil {
		return err.Error()
	}
	var out bytes.Buffer
	json.Compact(&out, s.Cluster)
	return out.String()
}

// startZarritaAndS3 writes the zarrita read script beside the zarrita
// oracle (where node finds zarrita), under a name of its own so that runs
// at once do not remove each other's, and starts versitygw with its data
// and log under b.work/name, for the workloads that compare with zarrita
// reading S3 directly. Without either it adds a skipped row and returns a
// nil server (and no error); stop stops the server and removes the script.
func (b *bench) startZarritaAndS3(name string) (script string, srv *s3test.Server, stop func(), err error) {
	oracle := os.Getenv("ZARRFS_ORACLE")
	if oracle == "" {
		b.add(row{name: "skipped: set ZARRFS_ORACLE (the zarrita oracle, .ci/run installs it) to compare with zarrita", check: "-"})
		return "", nil, nil, nil
	}
	f, err := os.CreateTemp(filepath.Dir(oracle), "zarrfs-bench-zarrita-*.mjs")
	if err != nil {
		return "", nil, nil, err
	}
	script = f.Name()
	_, err = f.Write(zarritaReadJS)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(script)
		return "", nil, nil, err
	}
	logFile, err := os.Create(filepath.Join(b.work, name+"-versitygw.log"))
	if err != nil {
		os.Remove(script)
		return "", nil, nil, err
	}
	srv, stopS3, err := s3test.StartServer(filepath.Join(b.work, name), logFile)
	if err != nil {
		os.Remove(script)
		logFile.Close()
		b.add(row{name: "skipped: " + err.Error(), check: "-"})
		return "", nil, nil, nil
	}
	return script, srv, func() { stopS3(); logFile.Close(); os.Remove(script) }, nil
}
