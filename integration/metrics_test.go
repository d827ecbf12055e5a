package integration_test

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// scrape gets http://addr/metrics, checks that it passes the Prometheus
// client library's linter and parses with its parser, and returns the
// metric families.
func scrape(t testing.TB, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %v %v\n%s", resp.Status, err, body)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v\n%s", err, body)
	}
	return families
}

// metricValue is the value of the metric of a family with the labels
// given as name, value pairs (a counter's, a gauge's, or a histogram's
// count), and whether there is one.
func metricValue(families map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetrics mounts an http:// store with --metrics-listen and reads
// chunk files through it: the store's requests (by kind and outcome, with
// their latencies), the bytes fetched, the memory and disk caches and the
// FUSE requests move, and every scrape passes promlint and parses. A
// read-write mount of a directory shows a write published.
func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	consolidate(t, dir)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	addr := freeAddr(t)
	m := mount(t, srv.URL+"/", "--ro", "--metrics-listen", addr, "--cache-dir", t.TempDir())

	var files []string
	var array string
	for _, g := range arrays {
		if !g.Sharded {
			continue
		}
		array, files = g.Path, chunkFilesOf(t, filepath.Join(m.Dir, "v3", g.Path))
		if len(files) >= 2 {
			break
		}
	}
	if len(files) < 2 {
		t.Fatal("no sharded array of the generated store has two chunk files")
	}

	type reading struct {
		name   string
		labels []string
	}
	readings := []reading{
		{"zarrfs_store_requests_total", []string{"kind", "ranged GET", "outcome", "ok"}},
		{"zarrfs_store_request_duration_seconds", []string{"kind", "ranged GET"}},
		{"zarrfs_store_fetched_bytes_total", nil},
		{"zarrfs_cache_misses_total", []string{"level", "memory"}},
		{"zarrfs_cache_hits_total", []string{"level", "memory"}},
		{"zarrfs_cache_misses_total", []string{"level", "disk"}},
		{"zarrfs_cache_bytes", []string{"level", "disk"}},
		{"zarrfs_served_bytes_total", []string{"source", "pass_through"}},
		{"zarrfs_fuse_request_duration_seconds", []string{"op", "READ"}},
	}
	values := func(families map[string]*dto.MetricFamily) []float64 {
		out := make([]float64, len(readings))
		for i, r := range readings {
			out[i], _ = metricValue(families, r.name, r.labels...)
		}
		return out
	}
	before := values(scrape(t, addr))
	// Two chunks of one shard: the first loads the shard's index, the
	// second finds it in the memory cache.
	for _, f := range files[:2] {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	after := scrape(t, addr)
	for i, v := range values(after) {
		if v <= before[i] {
			t.Errorf("%s%v: %v before reading two chunk files, %v after; want it to grow\n%s", readings[i].name, readings[i].labels, before[i], v, m.Log())
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "zarrfs_cache_max_bytes", "zarrfs_index_loads_total"} {
		if _, ok := metricValue(after, name); !ok {
			t.Errorf("no metric %s", name)
		}
	}

	t.Run("writes", func(t *testing.T) {
		addr := freeAddr(t)
		m := mount(t, dir, "--metrics-listen", addr)
		file := chunkFilesOf(t, filepath.Join(m.Dir, "v3", array))[0]
		data, err := os.ReadFile(file)
		if err == nil {
			err = os.WriteFile(file, data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		var families map[string]*dto.MetricFamily
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			families = scrape(t, addr)
			if n, _ := metricValue(families, "zarrfs_writes_published_total"); n >= 1 {
				break
			}
		}
		if n, _ := metricValue(families, "zarrfs_writes_published_total"); n < 1 {
			t.Errorf("zarrfs_writes_published_total is %v a minute after a chunk file was written\n%s", n, m.Log())
		}
		for _, name := range []string{"zarrfs_writes_pending", "zarrfs_writes_pending_bytes", "zarrfs_journal_bytes"} {
			if _, ok := metricValue(families, name); !ok {
				t.Errorf("no metric %s on a read-write mount", name)
			}
		}
		if n, _ := metricValue(families, "zarrfs_fuse_request_duration_seconds", "op", "WRITE"); n < 1 {
			t.Errorf("no FUSE WRITE request counted")
		}
	})
}

// chunkFilesOf lists the chunk files under a mounted array's directory.
func chunkFilesOf(t testing.TB, arrayDir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(arrayDir, "c"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}
