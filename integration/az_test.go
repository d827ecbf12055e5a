package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store/azstore/aztest"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// azProxy starts a counting proxy in front of Azurite, points the Azure
// environment of this process (which mounts inherit) at it with a
// connection string, and returns the proxy's blob endpoint.
func azProxy(t *testing.T, srv *aztest.Server) (string, *requestCounter) {
	host, _ := strings.CutSuffix(srv.Endpoint, "/"+aztest.Account)
	proxy, counter := countingProxyTo(t, host)
	endpoint := proxy + "/" + aztest.Account
	aztest.SetEnv(t, endpoint)
	return endpoint, counter
}

// TestAzReads mounts a store uploaded to Azurite with Azure's SDK: the
// oracles read both views to the original digests, and a cold read of one
// inner chunk costs a HEAD and a ranged GET for the index (Azure has no
// suffix ranges) and a ranged GET for the chunk.
func TestAzReads(t *testing.T) {
	o := zarrtest.NewOracle(t)
	srv := aztest.Start(t)
	srv.Container(t, "zarr")
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	srv.Upload(t, dir, "zarr", "gen/v3")
	_, counter := azProxy(t, srv)

	// A cold read checks the shard once; within --revalidate (1 s by
	// default, which a loaded machine can pass mid-read) not again.
	m := mount(t, "az://zarr/gen/v3", "--ro", "--revalidate", "1m")
	h := openView(t, dir)
	var a *zarr.Array
	for _, g := range arrays {
		if n, _ := h.Node(g.Path); g.Sharded && n.Array.Sharding() != nil && len(n.Array.Shape) == 2 {
			a = n.Array
			break
		}
	}
	if a == nil {
		t.Fatal("the generated store has no 2-D sharded array")
	}
	path := filepath.Join(m.Dir, "v3", a.Path, keyIn(a, "v3", firstStoredInner(t, a)))
	discovery := counter.take()
	if _, err := os.ReadFile(path); err != nil {
		t.Fatalf("read %s: %v\n%s", path, err, m.Log())
	}
	cold := counter.take()
	t.Logf("mount discovery: %v; cold read of one inner chunk: %v", discovery, cold)
	if want := map[string]int{"HEAD": 1, "ranged GET": 2}; fmt.Sprint(cold) != fmt.Sprint(want) {
		t.Errorf("a cold read of one inner chunk sent %v, want %v", cold, want)
	}
	checkOracles(t, o, m.Dir, m.Log(), generatedDigests(arrays))
	t.Logf("reading every array through both views: %v", counter.take())
	st := readStats(t, m.Dir)
	counter.mu.Lock()
	defer counter.mu.Unlock()
	for _, k := range []string{"ranged GET", "HEAD", "LIST", "GET"} {
		if st.Requests[k] != uint64(counter.total[k]) {
			t.Errorf("the stats file counts %d %s requests, the server got %d", st.Requests[k], k, counter.total[k])
		}
	}
}

// TestAzFixtures mounts the hold-out fixtures, uploaded to Azurite with
// Azure's SDK, as az://: zarrita through v3/ and zarr-python 2 through v2/
// read every array to the catalogue's digests.
func TestAzFixtures(t *testing.T) {
	fixtures := zarrtest.Fixtures(t)
	o := zarrtest.NewOracle(t)
	srv := aztest.Start(t)
	srv.Container(t, "zarr")
	srv.Upload(t, fixtures, "zarr", "fixtures")
	aztest.SetEnv(t, srv.Endpoint)
	m := mount(t, "az://zarr/fixtures", "--ro")
	checkOracles(t, o, m.Dir, m.Log(), fixtureDigests(t, fixtures))
}

// TestAzZarrPythonWrites: zarr-python 2.13 writes regions through the v2
// view of a read-write az:// mount; after unmounting, the container,
// downloaded with Azure's SDK and read by zarrita, holds what zarr-python
// wrote, and `zarrfs check az://…` passes.
func TestAzZarrPythonWrites(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	script, err := filepath.Abs(filepath.Join("testdata", "zarr_write.py"))
	if err != nil {
		t.Fatal(err)
	}
	srv := aztest.Start(t)
	srv.Container(t, "zarr")
	dir, arrays := writeStore(t)
	srv.Upload(t, dir, "zarr", "w")
	_, counter := azProxy(t, srv)
	journals := t.TempDir()
	m := mount(t, "az://zarr/w", "--journal-dir", journals)
	w := zarrPythonWrites(t, script, m, openView(t, dir), arrays, 5)
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("requests of the mount: %v", counter.take())
	if left, _ := filepath.Glob(filepath.Join(journals, "*", "*", "*")); len(left) > 0 {
		t.Errorf("a clean unmount left journal files: %v", left)
	}
	if out, err := exec.Command(zarrfsBin, "check", "az://zarr/w").CombinedOutput(); err != nil {
		t.Errorf("zarrfs check az://zarr/w: %v\n%s", err, out)
	}
	got := t.TempDir()
	srv.Download(t, "zarr", "w", got)
	w.check(t, o, got)
}

// TestAzTwoMounts: two read-write mounts of one container, as on two
// machines, write disjoint inner chunks of the same shards at once; each
// publishes whole shards with conditional Put Blobs (If-Match on the ETag,
// If-None-Match: * for new ones), re-reading when the other won, so that
// after both unmount the container holds every write of both.
func TestAzTwoMounts(t *testing.T) {
	srv := aztest.Start(t)
	srv.Container(t, "zarr")
	dir, _ := writeStore(t)
	srv.Upload(t, dir, "zarr", "two")
	azProxy(t, srv)
	twoMountsLoseNothing(t, dir, srv, "zarr", "two", "az://zarr/two")
}

// TestAzSASStaysSecret: a container's https:// URL with a SAS token, as
// the portal hands it out, mounts (the token reaches the server) but the
// signature shows neither in the mount table, which every user can read,
// nor in the log; with the token cut, the server's refusal is what the
// mount says.
func TestAzSASStaysSecret(t *testing.T) {
	srv := aztest.Start(t)
	srv.Container(t, "zarr")
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	srv.Upload(t, dir, "zarr", "s")
	for _, k := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN"} {
		t.Setenv(k, "")
	}
	token, err := aztest.ContainerSAS("zarr")
	if err != nil {
		t.Fatal(err)
	}
	_, sig, _ := strings.Cut(token, "sig=")
	sig, _, _ = strings.Cut(sig, "&")
	storeURL := "https://" + aztest.Account + ".blob.core.windows.net/zarr/s?" + token
	m := mount(t, storeURL, "--ro", "--az-endpoint", srv.Endpoint)
	if _, err := os.ReadFile(filepath.Join(m.Dir, "v3", "zarr.json")); err != nil {
		t.Fatalf("reading through the mount: %v\n%s", err, m.Log())
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, m.Dir) {
			found = true
			if strings.Contains(line, sig) || strings.Contains(line, "sig=") {
				t.Errorf("the mount table shows the SAS signature: %s", line)
			}
			if !strings.Contains(line, "az://zarr/s?endpoint=") {
				t.Errorf("the mount table does not name the store: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no mount table line for %s", m.Dir)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.Log(), sig) {
		t.Errorf("the mount's log shows the SAS signature:\n%s", m.Log())
	}
	cut := strings.Replace(storeURL, sig, "AAAA", 1)
	out, err := exec.Command(zarrfsBin, "info", "--az-endpoint", srv.Endpoint, cut).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "AuthenticationFailed") && !strings.Contains(string(out), "AuthorizationFailure") || strings.Contains(string(out), "AAAA") {
		t.Errorf("zarrfs info with a wrong signature: %v\n%s\nwant the server's refusal, without the signature", err, out)
	}
}
