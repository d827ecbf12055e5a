package storetest_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store/storetest"
)

// TestEmulator: the starter finds a program, waits until it listens on
// 127.0.0.1 and stops it; a program that is missing, exits or never
// listens is an error naming it, within the wait.
func TestEmulator(t *testing.T) {
	missing := storetest.Emulator{Name: "zarrfs-no-such-program", EnvVar: "ZARRFS_NO_SUCH_PROGRAM", Install: "install it"}
	if _, err := missing.Binary(); err == nil || !strings.Contains(err.Error(), "zarrfs-no-such-program not found: install it, or set ZARRFS_NO_SUCH_PROGRAM") {
		t.Errorf("Binary of a missing program: %v", err)
	}
	sh := func(script string) storetest.Emulator {
		return storetest.Emulator{Name: "sh", Args: func(addr, dir string) []string { return []string{"-c", script} }, Wait: 2 * time.Second}
	}
	if _, _, err := sh("exit 3").StartProcess(t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), "sh exited: exit status 3") {
		t.Errorf("a program that exits: %v", err)
	}
	if _, _, err := sh("sleep 60").StartProcess(t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), "does not listen") {
		t.Errorf("a program that never listens: %v", err)
	}

	web := storetest.Emulator{
		Name: "python3", Install: "apt-get install python3",
		Args: func(addr, dir string) []string {
			host, port, _ := net.SplitHostPort(addr)
			return []string{"-m", "http.server", "--bind", host, "--directory", dir, port}
		},
	}
	addr, dir := web.Start(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") || dir == "" {
		t.Fatalf("Start = %q, %q", addr, dir)
	}
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("the started server does not answer: %v", err)
	}
	resp.Body.Close()
}
