package zarrtest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"testing"
)

// StartPython runs a helper script with Debian's python3 for the test, one
// request a line: what the test writes to in is its standard input, out
// reads its standard output. It ends when the test does. Callers check
// first that python3 has the modules the script needs (RequirePython or
// their own check).
func StartPython(t testing.TB, script string, args ...string) (in io.Writer, out *bufio.Reader) {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", append([]string{script}, args...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	return stdin, bufio.NewReaderSize(stdout, 1<<20)
}
