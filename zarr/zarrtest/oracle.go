package zarrtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// OracleResult is the line an oracle reader prints for one array.
type OracleResult struct {
	Path     string `json:"path"`
	Format   int    `json:"zarr_format"`
	Shape    []int  `json:"shape"`
	SHA256   string `json:"sha256"`
	HashKind string `json:"hash_kind"`
	Error    string `json:"error"`
}

// Oracle runs the independent readers in ../shared/tools/oracle: zarrita
// (Zarr v2 and v3, through node) and zarr-python 2.13 (v2, Debian's python).
type Oracle struct {
	zarrita string // oracle.mjs with its node_modules installed
	python  string // oracle_v2.py
}

// NewOracle finds the oracles. The zarrita oracle needs `npm ci` in a copy of
// ../shared/tools/oracle (ZARRFS_ORACLE names its oracle.mjs; .ci/run sets it
// up); tests that need a missing oracle skip with a visible message.
func NewOracle(t testing.TB) *Oracle {
	t.Helper()
	o := &Oracle{}
	candidates := []string{os.Getenv("ZARRFS_ORACLE"), "/tmp/zarrfs-oracle/oracle.mjs",
		filepath.Join(Shared(t), "tools", "oracle", "oracle.mjs")}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(c), "node_modules", "zarrita")); err == nil {
			o.zarrita = c
			break
		}
	}
	o.python = filepath.Join(Shared(t), "tools", "oracle", "oracle_v2.py")
	return o
}

// Zarrita reads the array at path under root with zarrita.
func (o *Oracle) Zarrita(t testing.TB, root, path string) OracleResult {
	t.Helper()
	if o.zarrita == "" {
		t.Skip("SKIP: the zarrita oracle is not installed (npm ci in a copy of ../shared/tools/oracle, then set ZARRFS_ORACLE; .ci/run does this)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("SKIP: node is not installed; the zarrita oracle needs it")
	}
	return run(t, exec.Command("node", o.zarrita, "read", root, path))
}

// ZarrPython reads the v2 array at path under root with zarr-python 2.13.
func (o *Oracle) ZarrPython(t testing.TB, root, path string) OracleResult {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import zarr").Run(); err != nil {
		t.Skip("SKIP: Debian's python3-zarr is not installed (apt-get install python3-zarr)")
	}
	return run(t, exec.Command("/usr/bin/python3", o.python, "read", root, path))
}

func run(t testing.TB, cmd *exec.Cmd) OracleResult {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// The oracles exit non-zero when they cannot read the array but still
	// print a result line naming the error.
	out, runErr := cmd.Output()
	var r OracleResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		t.Fatalf("%s: %v, printed %q: %v\n%s", cmd, runErr, out, err, stderr.String())
	}
	if runErr != nil && r.Error == "" {
		r.Error = runErr.Error() + ": " + stderr.String()
	}
	return r
}
