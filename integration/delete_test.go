package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store/s3store/s3test"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// deleteStore returns a new v3 store with a root group, the arrays victim
// and keep (the resize layout, by zarrfs's own writer) and a group grp
// (with attributes) holding the array grp/inner.
func deleteStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := zarrtest.OpenStore(t, dir)
	ctx := context.Background()
	if err := zarr.CreateGroup(ctx, s, "", 3, nil); err != nil {
		t.Fatal(err)
	}
	if err := zarr.CreateGroup(ctx, s, "grp", 3, json.RawMessage(`{"purpose":"deleted"}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var layouts []writeLayout
	for _, p := range []string{"victim", "keep", "grp/inner"} {
		l := resizeLayout
		l.path = p
		layouts = append(layouts, l)
	}
	addLayouts(t, dir, layouts)
	return dir
}

// storeKeys lists the files of the store at dir below prefix (symbolic
// links as themselves), without zarrfs's state.
func storeKeys(t *testing.T, dir, prefix string) []string {
	t.Helper()
	var keys []string
	filepath.WalkDir(filepath.Join(dir, prefix), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			keys = append(keys, filepath.ToSlash(rel))
		}
		return nil
	})
	return keys
}

// TestDeleteThroughMount: `rm -r` of an array in the v3 view and
// zarr-python 2's `del group[name]` (shutil.rmtree) of a group in the v2
// view delete them from the store: the metadata, every shard, the
// tombstone; nothing else. A symbolic link the victim's directory holds
// into another array's shards (a planted link in a local store) is
// followed by no delete: the other array keeps every byte. Both views
// stop showing the deleted nodes at once, and after unmounting zarrita
// reads the store without them and `zarrfs check` passes.
func TestDeleteThroughMount(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	dir := deleteStore(t)
	// victim's second row of shards is a link to keep's.
	if err := os.RemoveAll(filepath.Join(dir, "victim", "c", "1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "keep", "c", "1"), filepath.Join(dir, "victim", "c", "1")); err != nil {
		t.Fatal(err)
	}
	keepBefore := storeFiles(t, filepath.Join(dir, "keep"))
	keepDigest := o.Zarrita(t, dir, "keep").SHA256
	m := mount(t, dir)
	deleteVictimAndGroup(t, m, "['keep']")
	stop(t, m, dir)
	checkStore(t, dir)

	if left := storeKeys(t, dir, "victim"); len(left) != 1 || left[0] != "victim/c/1" {
		t.Errorf("left of victim in the store: %v, want only the planted link victim/c/1", left)
	}
	if left := storeKeys(t, dir, "grp"); len(left) != 0 {
		t.Errorf("left of grp in the store: %v", left)
	}
	// The directories that held only deleted keys go too; victim/c holds
	// the link, which no delete follows, so it and victim stay.
	for _, p := range []string{"grp", "victim/c/0"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the delete left the directory %s in the store (%v)", p, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, "victim", "c", "1")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the planted link victim/c/1: %v, %v; want it left as it was", fi, err)
	}
	requireSameFiles(t, keepBefore, storeFiles(t, filepath.Join(dir, "keep")))
	all := o.ZarritaAll(t, dir)
	if len(all) != 1 || all["keep"].SHA256 != keepDigest {
		t.Errorf("zarrita reads %+v from the store; want only keep with digest %s", all, keepDigest)
	}
}

// deleteVictimAndGroup removes victim with `rm -r` in m's v3 view and grp
// with zarr-python 2's `del group["grp"]` in its v2 view, and checks that
// both views stop showing them at once; rest is what zarr-python then
// lists in the root group.
func deleteVictimAndGroup(t *testing.T, m *integration.Mount, rest string) {
	t.Helper()
	if out, err := exec.Command("rm", "-r", filepath.Join(m.Dir, "v3", "victim")).CombinedOutput(); err != nil {
		t.Fatalf("rm -r v3/victim: %v\n%s\n%s", err, out, m.Log())
	}
	script := `import sys, zarr
g = zarr.open_group(sys.argv[1], mode="r+")
del g["grp"]
print(sorted(g.keys()))`
	out, err := exec.Command("/usr/bin/python3", "-c", script, filepath.Join(m.Dir, "v2")).CombinedOutput()
	if err != nil {
		t.Fatalf("zarr-python del group['grp']: %v\n%s\n%s", err, out, m.Log())
	}
	if got := strings.TrimSpace(string(out)); got != rest {
		t.Errorf("zarr-python lists %s after the deletes, want %s", got, rest)
	}
	for _, p := range []string{"v2/victim", "v3/victim", "v2/grp", "v3/grp", "v3/grp/inner"} {
		if _, err := os.Stat(filepath.Join(m.Dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still shows after the delete (%v)", p, err)
		}
	}
	zmeta, err := os.ReadFile(filepath.Join(m.Dir, "v2", zarr.ZMetadata))
	if err != nil || strings.Contains(string(zmeta), "victim") || strings.Contains(string(zmeta), "grp") {
		t.Errorf(".zmetadata after the deletes (%v):\n%s", err, zmeta)
	}
}

// TestDeleteCutShort: a delete cut short between its metadata and its
// shards (simulated in the store: the metadata step alone) leaves shards
// that `zarrfs check` names and `zarrfs compact` removes, with the
// tombstone. A forged tombstone beside a live array, and one beside files
// that are no shards, delete nothing of them.
func TestDeleteCutShort(t *testing.T) {
	dir := deleteStore(t)
	deleteCutShort(t, dir, "victim")
	meta, err := os.ReadFile(filepath.Join(dir, "keep", zarr.ZarrJSON))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"keep/zarr.json.deleted", "junk/zarr.json.deleted"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), meta, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "junk", "c", "0"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "junk", "c", "0", "0"), []byte("not a shard"), 0o644); err != nil {
		t.Fatal(err)
	}
	keepBefore := storeFiles(t, filepath.Join(dir, "keep"))
	out, err := exec.Command(zarrfsBin, "check", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "DELETED /victim") || !strings.Contains(string(out), "victim/c/1/0") ||
		strings.Contains(string(out), "DELETED /keep") || !strings.Contains(string(out), "TOMBSTONE keep/zarr.json.deleted") {
		t.Errorf("zarrfs check after a delete cut short: %v\n%s", err, out)
	}
	if out, err := exec.Command(zarrfsBin, "compact", dir).CombinedOutput(); err != nil {
		t.Fatalf("zarrfs compact: %v\n%s", err, out)
	}
	if left := storeKeys(t, dir, "victim"); len(left) != 0 {
		t.Errorf("left of victim after compact: %v", left)
	}
	if left := storeKeys(t, dir, "junk"); len(left) != 1 || left[0] != "junk/c/0/0" {
		t.Errorf("left of junk after compact: %v, want junk/c/0/0 (no shard: not zarrfs's to delete)", left)
	}
	after := storeFiles(t, filepath.Join(dir, "keep"))
	delete(keepBefore, "zarr.json.deleted") // the forged tombstone goes
	requireSameFiles(t, keepBefore, after)
	checkStore(t, dir)
}

// deleteCutShort takes the first step of deleting the array at path in
// the store at dir (its metadata goes, behind a tombstone) and not the
// next (its shards stay), as a delete a crash cut short.
func deleteCutShort(t *testing.T, dir, path string) {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	h, err := zarr.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := h.Node(path); !ok || n.Array == nil || zarr.DeleteArrayMetadata(ctx, n.Array) != nil {
		t.Fatalf("deleting the metadata of %s: %v", path, n)
	}
}

// TestS3ResizeAndDelete: the resizes of TestZarrPythonResize and the
// deletes of TestDeleteThroughMount through a read-write s3:// mount
// (versitygw): after unmounting, `zarrfs check s3://…` passes, and the
// bucket, downloaded with an independent client and read by zarrita, holds
// the resized array as zarr-python wrote its copy, without the deleted
// nodes' objects, and the other array unchanged.
func TestS3ResizeAndDelete(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	o := zarrtest.NewOracle(t)
	srv := s3test.Start(t)
	srv.Bucket(t, "zarr")
	dir := deleteStore(t)
	addLayouts(t, dir, []writeLayout{resizeLayout})
	keepDigest := o.Zarrita(t, dir, "keep").SHA256
	srv.Upload(t, dir, "zarr", "rd")
	useS3(t, srv, srv.Endpoint)
	m := mount(t, "s3://zarr/rd", "--s3-path-style", "--journal-dir", t.TempDir())
	copies := zarrPythonResize(t, m)
	deleteVictimAndGroup(t, m, "['keep', 'resizable']")
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(zarrfsBin, "check", "--s3-path-style", "s3://zarr/rd").CombinedOutput(); err != nil {
		t.Errorf("zarrfs check s3://zarr/rd: %v\n%s", err, out)
	}
	got := t.TempDir()
	srv.Download(t, "zarr", "rd", got)
	checkResized(t, o, got, copies)
	for _, p := range []string{"victim", "grp"} {
		if left := storeKeys(t, got, p); len(left) != 0 {
			t.Errorf("left of %s in the bucket: %v", p, left)
		}
	}
	if all := o.ZarritaAll(t, got); len(all) != 2 || all["keep"].SHA256 != keepDigest {
		t.Errorf("zarrita reads %+v from the bucket; want keep (digest %s) and resizable", all, keepDigest)
	}
}

// TestDeleteCreatedLeavesNoDirs: `rm -r` through MNT/v2 of arrays this
// mount created ("/" chunk keys, so their shards sit in nested
// directories) leaves no directory of theirs in the local store, except
// one still holding a file of the user's, which stays as it was.
func TestDeleteCreatedLeavesNoDirs(t *testing.T) {
	dir := t.TempDir()
	v3Root(t, dir)
	m := mount(t, dir)
	zarray := []byte(`{"zarr_format":2,"shape":[4,4],"chunks":[2,2],"dtype":"|u1","compressor":null,"fill_value":0,"order":"C","filters":null,"dimension_separator":"/"}`)
	for _, name := range []string{"gone", "kept"} {
		arr := filepath.Join(m.Dir, "v2", name)
		if err := os.Mkdir(arr, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeRename(filepath.Join(arr, ".zarray"), zarray); err != nil {
			t.Fatalf("%v\n%s", err, m.Log())
		}
		for _, c := range []string{"0/0", "1/1"} {
			if err := os.MkdirAll(filepath.Join(arr, c[:1]), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := writeRename(filepath.Join(arr, filepath.FromSlash(c)), []byte{1, 2, 3, 4}); err != nil {
				t.Fatalf("chunk %s/%s: %v\n%s", name, c, err, m.Log())
			}
		}
	}
	if err := m.Stop(); err != nil { // publishes the shards
		t.Fatal(err)
	}
	if len(storeKeys(t, dir, "gone")) < 2 {
		t.Fatalf("the store holds %v for gone; want its zarr.json and shards", storeKeys(t, dir, "gone"))
	}
	note := filepath.Join(dir, "kept", "NOTES.txt")
	if err := os.WriteFile(note, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	m = mount(t, dir)
	for _, name := range []string{"gone", "kept"} {
		if out, err := exec.Command("rm", "-r", filepath.Join(m.Dir, "v2", name)).CombinedOutput(); err != nil {
			t.Fatalf("rm -r v2/%s: %v\n%s\n%s", name, err, out, m.Log())
		}
	}
	stop(t, m, dir)
	if _, err := os.Lstat(filepath.Join(dir, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("rm -r left gone in the store: %v (holding %v)", err, storeKeys(t, dir, "gone"))
	}
	if left := storeKeys(t, dir, "kept"); len(left) != 1 || left[0] != "kept/NOTES.txt" {
		t.Errorf("left of kept in the store: %v; want only the user's kept/NOTES.txt", left)
	}
	if b, err := os.ReadFile(note); err != nil || string(b) != "mine" {
		t.Errorf("the user's file after the delete: %q, %v", b, err)
	}
	checkStore(t, dir)
}
