package integration_test

import (
	"bytes"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestHTTPWithoutConsolidatedMetadata serves a v3 store whose root group
// has no consolidated metadata with Go's file server, which cannot list:
// `zarrfs info` and the mount say, once, that the children cannot be
// discovered and name the two ways out. After `zarrfs consolidate` on the
// directory behind the server, the same URL mounts the whole tree (an
// array lists and reads to its digest through the mount), zarrita finds
// every node through the consolidated metadata over HTTP, and reads every
// array of the directory.
func TestHTTPWithoutConsolidatedMetadata(t *testing.T) {
	o := zarrtest.NewOracle(t)
	dir := t.TempDir()
	arrays := zarrtest.WriteV3Store(t, dir)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	url := srv.URL + "/"
	const says = "children of the root group cannot be discovered"
	fixes := []string{says, srv.URL + "/PATH/TO/ARRAY", "zarrfs consolidate"}

	var stdout, stderr bytes.Buffer
	info := exec.Command(zarrfsBin, "info", url)
	info.Stdout, info.Stderr = &stdout, &stderr
	if err := info.Run(); err != nil {
		t.Fatalf("zarrfs info %s: %v\n%s", url, err, stderr.String())
	}
	for _, want := range fixes {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("zarrfs info %s does not say %q:\n%s", url, want, stderr.String())
		}
	}

	var one zarrtest.Generated
	for _, g := range arrays {
		if g.Sharded && g.ZarritaReads && !strings.Contains(g.Path, "/") {
			one = g
			break
		}
	}
	m := mount(t, url, "--ro")
	if _, err := os.Stat(filepath.Join(m.Dir, "v3", one.Path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s before consolidating: %v, want it missing", one.Path, err)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(m.Log(), says); n != 1 {
		t.Errorf("the mount said %d times that the children cannot be discovered, want once:\n%s", n, m.Log())
	}
	for _, want := range fixes {
		if !strings.Contains(m.Log(), want) {
			t.Errorf("the mount's log does not say %q:\n%s", want, m.Log())
		}
	}

	if out, err := exec.Command(zarrfsBin, "consolidate", dir).CombinedOutput(); err != nil || !strings.Contains(string(out), "consolidated ") {
		t.Fatalf("zarrfs consolidate %s: %v\n%s", dir, err, out)
	}
	if out, err := exec.Command(zarrfsBin, "consolidate", url).CombinedOutput(); err == nil || !strings.Contains(string(out), "not writable") {
		t.Errorf("zarrfs consolidate %s (a web server): %v, want a refusal saying it is not writable\n%s", url, err, out)
	}

	m = mount(t, url, "--ro")
	ents, err := os.ReadDir(filepath.Join(m.Dir, "v3", one.Path))
	if err != nil || !slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == "zarr.json" }) {
		t.Errorf("listing %s after consolidating: %v %v, want its zarr.json and chunks", one.Path, ents, err)
	}
	if r := o.Zarrita(t, filepath.Join(m.Dir, "v3"), one.Path); r.Error != "" || r.SHA256 != one.Digest {
		t.Errorf("zarrita read %s through the mount of %s: %+v, want digest %s", one.Path, url, r, one.Digest)
	}
	if strings.Contains(m.Log(), says) {
		t.Errorf("the mount of the consolidated store still says the children cannot be discovered:\n%s", m.Log())
	}

	found := o.ZarritaConsolidated(t, url)
	for _, n := range openView(t, dir).Nodes() {
		kind, want := found["/"+n.Path], "group"
		if n.Array != nil {
			want = "array"
		}
		if g := generatedArray(arrays, n.Path); g != nil && !g.ZarritaReads {
			continue // zarrita does not know its data type
		}
		if kind != want {
			t.Errorf("zarrita through the consolidated metadata at %s: /%s is %q, want %s", url, n.Path, kind, want)
		}
	}
	all := o.ZarritaAll(t, dir)
	for _, g := range arrays {
		if r := all[g.Path]; g.ZarritaReads && (r.Error != "" || r.SHA256 != g.Digest) {
			t.Errorf("zarrita read %s of the consolidated store: %+v, want digest %s", g.Path, r, g.Digest)
		}
	}
}

func generatedArray(arrays []zarrtest.Generated, path string) *zarrtest.Generated {
	for i := range arrays {
		if arrays[i].Path == path {
			return &arrays[i]
		}
	}
	return nil
}

// TestConsolidateS3: `zarrfs consolidate` writes the .zmetadata of a v2
// store in a bucket of a real S3 server; zarr-python 2.13 opens the
// downloaded store by its consolidated metadata alone and finds every
// array, and `zarrfs info` over HTTP lists them without a warning.
func TestConsolidateS3(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	src := t.TempDir()
	arrays := zarrtest.WriteV2Store(t, src)
	srv.Upload(t, src, "zarr", "v2")
	srv.SetEnv(t)
	if out, err := exec.Command(zarrfsBin, "consolidate", "--s3-path-style", "s3://zarr/v2").CombinedOutput(); err != nil {
		t.Fatalf("zarrfs consolidate s3://zarr/v2: %v\n%s", err, out)
	}
	dir := t.TempDir()
	srv.Download(t, "zarr", "v2", dir)

	script := `import sys, zarr
g = zarr.open_consolidated(sys.argv[1], mode="r")
paths = []
g.visitvalues(lambda v: paths.append(v.path) if isinstance(v, zarr.Array) else None)
print("\n".join(sorted(paths)))`
	out, err := exec.Command("/usr/bin/python3", "-c", script, dir).Output()
	if err != nil {
		t.Fatalf("zarr-python open_consolidated: %v", err)
	}
	var want []string
	for _, g := range arrays {
		want = append(want, g.Path)
	}
	slices.Sort(want)
	if got := strings.Fields(string(out)); !slices.Equal(got, want) {
		t.Errorf("zarr-python finds %v through .zmetadata, want %v", got, want)
	}

	web := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(web.Close)
	var stdout, stderr bytes.Buffer
	info := exec.Command(zarrfsBin, "info", "--json", web.URL+"/")
	info.Stdout, info.Stderr = &stdout, &stderr
	if err := info.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("zarrfs info of the consolidated store over HTTP: %v\n%s", err, stderr.String())
	}
	for _, p := range want {
		if !strings.Contains(stdout.String(), `"path":"/`+p+`","kind":"array"`) {
			t.Errorf("zarrfs info over HTTP does not list the array %s:\n%s", p, stdout.String())
		}
	}
}
