package zarrtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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
	return runOne(t, o.zarritaCmd(t, "read", root, path))
}

// ZarritaAll reads every array under root with zarrita in one process and
// returns the results by array path.
func (o *Oracle) ZarritaAll(t testing.TB, root string) map[string]OracleResult {
	t.Helper()
	return runAll(t, o.zarritaCmd(t, "all", root))
}

// ZarrPython reads the v2 array at path under root with zarr-python 2.13.
func (o *Oracle) ZarrPython(t testing.TB, root, path string) OracleResult {
	t.Helper()
	return runOne(t, o.pythonCmd(t, "read", root, path))
}

// ZarrPythonAll reads every v2 array under root with zarr-python 2.13 in one
// process and returns the results by array path.
func (o *Oracle) ZarrPythonAll(t testing.TB, root string) map[string]OracleResult {
	t.Helper()
	return runAll(t, o.pythonCmd(t, "all", root))
}

// zarritaConsolidated opens a web server's store as zarrita does with
// v3 consolidated metadata and opens each node it lists, printing
// {"path", "kind", "error"} for each as one JSON array.
const zarritaConsolidated = `
import { Float16Array } from "@petamoriken/float16";
import * as zarr from "zarrita";
globalThis.Float16Array ??= Float16Array; // as oracle.mjs: Node < 24 lacks it
const store = await zarr.withConsolidatedMetadata(new zarr.FetchStore(process.argv[1]), { format: "v3" });
const out = [];
for (const { path, kind } of store.contents()) {
  try {
    await zarr.open.v3(zarr.root(store).resolve(path), { kind });
    out.push({ path, kind });
  } catch (e) {
    out.push({ path, kind, error: String(e) });
  }
}
console.log(JSON.stringify(out));
`

// ZarritaConsolidated opens the store at url (a web server) through its v3
// consolidated metadata with zarrita (withConsolidatedMetadata over a
// FetchStore) and opens every node that lists: their kinds ("group",
// "array") or "error: ..." by path ("/" for the root).
func (o *Oracle) ZarritaConsolidated(t testing.TB, url string) map[string]string {
	t.Helper()
	cmd := o.node(t, "--input-type=module", "-e", zarritaConsolidated, url)
	cmd.Dir = filepath.Dir(o.zarrita) // where the script's imports resolve
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zarrita with consolidated metadata from %s: %v\n%s", url, err, stderr.String())
	}
	var nodes []struct{ Path, Kind, Error string }
	if err := json.Unmarshal(out, &nodes); err != nil {
		t.Fatalf("zarrita with consolidated metadata printed %q: %v", out, err)
	}
	found := map[string]string{}
	for _, n := range nodes {
		found[n.Path] = n.Kind
		if n.Error != "" {
			found[n.Path] = "error: " + n.Error
		}
	}
	return found
}

func (o *Oracle) zarritaCmd(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	return o.node(t, append([]string{o.zarrita}, args...)...)
}

// node runs node, once the zarrita oracle is found installed.
func (o *Oracle) node(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	if o.zarrita == "" {
		Missing(t, "the zarrita oracle is not installed (npm ci in a copy of ../shared/tools/oracle, then set ZARRFS_ORACLE; .ci/run does this)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		Missing(t, "node is not installed; the zarrita oracle needs it")
	}
	return exec.Command("node", args...)
}

func (o *Oracle) pythonCmd(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	RequirePython(t, "zarr")
	return exec.Command("/usr/bin/python3", append([]string{o.python}, args...)...)
}

// RequirePython skips (Missing) the test unless Debian's /usr/bin/python3 can import
// every module named.
func RequirePython(t testing.TB, modules ...string) {
	t.Helper()
	for _, m := range modules {
		if err := exec.Command("/usr/bin/python3", "-c", "import "+m).Run(); err != nil {
			Missing(t, "/usr/bin/python3 cannot import %s (apt-get install python3-zarr python3-xarray): %v", m, err)
		}
	}
}

// runOne runs a `read` command. The oracles exit non-zero when they cannot
// read the array but still print a result line naming the error.
func runOne(t testing.TB, cmd *exec.Cmd) OracleResult {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
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

// runAll runs an `all` command, which prints one line per array and exits
// 1 when some array could not be read (its line names the error); any other
// failure is fatal.
func runAll(t testing.TB, cmd *exec.Cmd) map[string]OracleResult {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	results := map[string]OracleResult{}
	failed := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r OracleResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s printed %q: %v\n%s", cmd, sc.Bytes(), err, stderr.String())
		}
		results[r.Path] = r
		failed = failed || r.Error != ""
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	var exit *exec.ExitError
	if runErr != nil && !(errors.As(runErr, &exit) && exit.ExitCode() == 1 && failed) {
		t.Fatalf("%s: %v\n%s", cmd, runErr, stderr.String())
	}
	return results
}

// ZarritaModules returns the node_modules directory that holds zarrita, for
// tests that write with it through node; it skips (Missing) when the
// zarrita oracle or node is not installed.
func (o *Oracle) ZarritaModules(t testing.TB) string {
	t.Helper()
	o.node(t)
	return filepath.Join(filepath.Dir(o.zarrita), "node_modules")
}
