package registry_test

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/registry"
)

// mem is a kind of store the registry knows nothing of: a directory
// reached as mem://NAME below the directory its flag --mem-root names.
var mem = registry.Kind[*string]{
	Name:    "mem",
	Schemes: []string{"mem"},
	Flags: func(fs *flag.FlagSet) *string {
		return fs.String("mem-root", "", "where mem:// stores are")
	},
	Parse: func(arg string, u *url.URL, root *string) (registry.Location, error) {
		if u.Host == "" {
			return registry.Location{}, fmt.Errorf("%s: no name (mem://NAME)", arg)
		}
		return registry.Location{Open: func(_ context.Context, o registry.Options) (store.Store, error) {
			return store.OpenDir(filepath.Join(*root, u.Host), true)
		}}, nil
	},
}

// claimsAll claims any URL whose host is "claimed", before schemes are
// looked up.
var claimsAll = registry.Kind[struct{}]{
	Name:   "claimer",
	Claims: func(u *url.URL) bool { return u.Host == "claimed" },
	Parse: func(string, *url.URL, struct{}) (registry.Location, error) {
		return registry.Location{}, nil
	},
}

// TestRegistry: a kind registered with its flags reads its URLs with the
// values of its flags in each flag set; paths go to the directory kind;
// a kind that claims URLs is asked before schemes; an unknown scheme is
// refused with a message listing the forms that are known.
func TestRegistry(t *testing.T) {
	r := registry.New(registry.Dir, claimsAll, mem)
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a", "zarr.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	f := r.AddFlags(fs)
	if err := fs.Parse([]string{"--mem-root", root}); err != nil {
		t.Fatal(err)
	}
	other := r.AddFlags(flag.NewFlagSet("other", flag.ContinueOnError)) // its --mem-root is empty

	l, err := f.Parse("mem://a")
	if err != nil || l.Kind != "mem" {
		t.Fatalf("Parse(mem://a) = %+v, %v; want a mem store", l, err)
	}
	s, err := l.Open(context.Background(), registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, err := store.ReadAll(context.Background(), s, "zarr.json"); err != nil || string(b) != "{}" {
		t.Errorf("mem://a read %q, %v; want the store below --mem-root", b, err)
	}
	if l, err := other.Parse("mem://a"); err != nil {
		t.Error(err)
	} else if s, err := l.Open(context.Background(), registry.Options{}); err == nil {
		s.Close()
		t.Error("mem://a opened with the flags of another flag set")
	}
	if _, err := f.Parse("mem://"); err == nil || !strings.Contains(err.Error(), "no name") {
		t.Errorf("Parse(mem://) = %v; want the kind's error", err)
	}

	for arg, kind := range map[string]string{
		root: "directory", "file://" + root: "directory", "c:/data": "directory",
		"mem://claimed/x": "claimer", "https://claimed/x": "claimer",
	} {
		if l, err := f.Parse(arg); err != nil || l.Kind != kind {
			t.Errorf("Parse(%s) = %+v, %v; want kind %s", arg, l, err, kind)
		}
	}
	if l, _ := f.Parse(root); l.LocalDir != root || !l.Writable {
		t.Errorf("a writable directory parsed as %+v", l)
	}

	_, err = f.Parse("ftp://user:secret@host/x")
	if err == nil || !strings.Contains(err.Error(), `unsupported store URL scheme "ftp" (a path, file://, mem://)`) || strings.Contains(err.Error(), "secret") {
		t.Errorf("Parse of an ftp:// URL: %v; want a refusal listing the known forms, without the password", err)
	}
}

// TestRegistrySchemeTwice: two kinds of one scheme are a mistake of the
// program, caught when the registry is made.
func TestRegistrySchemeTwice(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a scheme registered twice was accepted")
		}
	}()
	registry.New(registry.Dir, mem, mem)
}
