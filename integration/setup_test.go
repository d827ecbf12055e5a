package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	zfs "github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// zarrfsBin is the binary under test, built once by TestMain.
var zarrfsBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if err := integration.CanMount(); err != nil {
		if os.Getenv("CI") != "" {
			fmt.Printf("FAIL: CI is set and the integration tests cannot mount: %v\n", err)
			return 1
		}
		fmt.Printf("SKIP: integration tests need FUSE: %v\n", err)
		return 0
	}
	dir, err := os.MkdirTemp("", "zarrfs-integration-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(dir)
	wd, _ := os.Getwd()
	if zarrfsBin, err = integration.Build(filepath.Dir(wd), dir, true); err != nil {
		fmt.Println(err)
		return 1
	}
	return m.Run()
}

// mount mounts store at a fresh directory for the test and unmounts it in
// cleanup, even when the test fails.
func mount(t *testing.T, store string, args ...string) *integration.Mount {
	t.Helper()
	return mountWith(t, zarrfsBin, store, args...)
}

// mountWith is mount with the zarrfs binary bin.
func mountWith(t *testing.T, bin, store string, args ...string) *integration.Mount {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := integration.Start(bin, store, dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mounted, _ := zfs.Mounted(dir); mounted {
			if err := m.Stop(); err != nil {
				t.Errorf("unmount: %v", err)
			}
		}
		m.Kill() // a process the test left running without its mount
		if race := integration.RaceReport(m.Log()); race != "" {
			t.Errorf("the mounted daemon raced:\n%s", race)
		}
	})
	return m
}

// generated writes both generated stores and returns their directories.
func generated(t *testing.T) (v3 string, v3Arrays []zarrtest.Generated, v2 string, v2Arrays []zarrtest.Generated) {
	t.Helper()
	v3, v2 = t.TempDir(), t.TempDir()
	return v3, zarrtest.WriteV3Store(t, v3), v2, zarrtest.WriteV2Store(t, v2)
}
