package fs

import (
	"os"
	"testing"
)

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/plain`:          "/mnt/plain",
		`/mnt/a\040b`:         "/mnt/a b",
		`/mnt/tab\011nl\012`:  "/mnt/tab\tnl\n",
		`/mnt/back\134slash`:  `/mnt/back\slash`,
		`/mnt/not\9escape\04`: `/mnt/not\9escape\04`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMounted(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc/self/mountinfo:", err)
	}
	if ok, err := Mounted("/"); err != nil || !ok {
		t.Errorf("Mounted(/) = %v, %v; want true", ok, err)
	}
	if ok, err := Mounted(t.TempDir()); err != nil || ok {
		t.Errorf("Mounted(a fresh temporary directory) = %v, %v; want false", ok, err)
	}
}

func TestMountAt(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc/self/mountinfo:", err)
	}
	if m, err := MountAt("/proc"); err != nil || m == nil || m.FSType != "proc" {
		t.Errorf("MountAt(/proc) = %+v, %v; want a proc mount", m, err)
	}
	if m, err := MountAt(t.TempDir()); err != nil || m != nil {
		t.Errorf("MountAt(a fresh temporary directory) = %+v, %v; want nil", m, err)
	}
}
