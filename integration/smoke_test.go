package integration_test

import (
	"path/filepath"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestOraclesThroughMount points the oracle readers at both views of a
// mounted generated store: each must print the digest of the data written.
func TestOraclesThroughMount(t *testing.T) {
	o := zarrtest.NewOracle(t)
	v3, arrays, _, _ := generated(t)
	m := mount(t, v3, "--ro")
	for _, g := range arrays {
		if g.ZarritaReads {
			if r := o.Zarrita(t, filepath.Join(m.Dir, "v3"), g.Path); r.SHA256 != g.Digest {
				t.Errorf("zarrita MNT/v3 %s: %+v, want %s", g.Path, r, g.Digest)
			}
		}
		if r := o.ZarrPython(t, filepath.Join(m.Dir, "v2"), g.Path); r.SHA256 != g.Digest {
			t.Errorf("zarr-python MNT/v2 %s: %+v, want %s", g.Path, r, g.Digest)
		}
	}
}
