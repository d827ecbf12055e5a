package zarr_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

type expectation struct {
	Fixture  string `json:"fixture"`
	SHA256   string `json:"sha256"`
	HashKind string `json:"hash_kind"`
}

// TestFixtureConformance decodes every array under ../shared/fixtures and
// compares the digest of its content with EXPECTED.jsonl.
func TestFixtureConformance(t *testing.T) {
	fixtures := zarrtest.Fixtures(t)
	f, err := os.Open(filepath.Join(fixtures, "EXPECTED.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checked, failed := 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e expectation
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		got, err := digestFixture(filepath.Join(fixtures, e.Fixture))
		checked++
		switch {
		case err != nil:
			failed++
			t.Errorf("%s: %v", e.Fixture, err)
		case got != e.SHA256:
			failed++
			t.Errorf("%s: sha256 %s, want %s (%s)", e.Fixture, got, e.SHA256, e.HashKind)
		}
	}
	t.Logf("fixture conformance: %d arrays checked, %d decoded to the expected sha256, %d failed", checked, checked-failed, failed)
}

// digestFixture opens an array directory as a store and digests its content.
func digestFixture(dir string) (string, error) {
	s, err := store.OpenDir(dir, true)
	if err != nil {
		return "", err
	}
	defer s.Close()
	ctx := context.Background()
	h, err := zarr.Open(ctx, s)
	if err != nil {
		return "", err
	}
	root := h.Root()
	if root.Err != nil {
		return "", root.Err
	}
	data, err := root.Array.Read(ctx)
	if err != nil {
		return "", err
	}
	return zarrtest.Digest(data), nil
}
