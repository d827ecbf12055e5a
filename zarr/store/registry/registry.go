// Package registry reads STORE arguments: each kind of store (a local
// directory, a zip file, s3://, gs://, az://, a web server) registers the
// URLs it reads, its flags and how it opens, and a command looks the
// argument up and opens what it names. A new kind of store is its package
// (with its Kind) and one line in the list a command registers.
//
// It lives below package store rather than in it because opening a
// remote store takes requests.Limits, and package requests imports store.
package registry

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
)

// Kind is a kind of store, whose flags are F.
type Kind[F any] struct {
	// Name names the kind in messages ("s3").
	Name string
	// Schemes are the URL schemes the kind reads ("s3"); "file" is that of
	// paths too.
	Schemes []string
	// Claims, when set, takes URLs of any scheme before schemes are looked
	// up, in the order kinds are registered: az:// claims Azure's
	// https://ACCOUNT.blob.core.windows.net/, a zip file claims paths of
	// regular files.
	Claims func(u *url.URL) bool
	// Flags, when set, registers the kind's flags in a command's flag set
	// (their names prefixed with the kind's: --s3-endpoint); Parse gets
	// what it returns, to read their values when the store is opened.
	Flags func(fs *flag.FlagSet) F
	// Parse reads a URL of the kind (arg is the argument as given, for
	// messages, which must not show it unredacted). It sends no request.
	Parse func(arg string, u *url.URL, flags F) (Location, error)
}

// Registration is a Kind, of any flags, as New takes it.
type Registration interface {
	name() string
	schemes() []string
	claims(u *url.URL) bool
	bind(fs *flag.FlagSet) parser
}

// parser reads URLs of a kind with the values of its flags in one flag set.
type parser func(arg string, u *url.URL) (Location, error)

func (k Kind[F]) name() string      { return k.Name }
func (k Kind[F]) schemes() []string { return k.Schemes }

func (k Kind[F]) claims(u *url.URL) bool { return k.Claims != nil && k.Claims(u) }

func (k Kind[F]) bind(fs *flag.FlagSet) parser {
	var flags F
	if k.Flags != nil {
		flags = k.Flags(fs)
	}
	return func(arg string, u *url.URL) (Location, error) { return k.Parse(arg, u, flags) }
}

// Location is a parsed STORE argument: a store of a kind, not yet opened.
type Location struct {
	// Kind is the name of the store's kind (set by the registry).
	Kind string
	// Writable reports whether the store may take writes: a web server, a
	// zip file and a public container read anonymously do not.
	Writable bool
	// LocalDir is the directory of a store of local files that journals
	// the writes made to it inside itself (STORE/.zarrfs/journal), so that
	// any mount of it replays them. Remote stores (store.Store.Remote)
	// journal outside, by their identity; other stores are never written.
	LocalDir string
	// Open opens the store.
	Open func(ctx context.Context, o Options) (store.Store, error)
}

// Options are what opening a store takes besides its location.
type Options struct {
	// ReadOnly opens the store read-only.
	ReadOnly bool
	// Limits bound the requests of a remote store.
	Limits requests.Limits
}

// Registry is the kinds of store a command reads.
type Registry struct {
	kinds []Registration
}

// New returns the registry of kinds; a scheme registered twice is a
// mistake of the program, and panics.
func New(kinds ...Registration) *Registry {
	seen := map[string]string{}
	for _, k := range kinds {
		for _, s := range k.schemes() {
			if other, ok := seen[s]; ok {
				panic(fmt.Sprintf("registry: scheme %q of %s is %s's already", s, k.name(), other))
			}
			seen[s] = k.name()
		}
	}
	return &Registry{kinds: kinds}
}

// Flags are the flags of every kind in one flag set, ready to read STORE
// arguments with their values.
type Flags struct {
	r       *Registry
	parsers []parser // of r.kinds, in order
}

// AddFlags registers the flags of every kind in fs.
func (r *Registry) AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{r: r}
	for _, k := range r.kinds {
		f.parsers = append(f.parsers, k.bind(fs))
	}
	return f
}

// Parse reads a STORE argument: a path (of a directory, or a regular
// file: a zip) or a URL. It sends no request.
func (f *Flags) Parse(arg string) (Location, error) {
	u, err := url.Parse(arg)
	if err != nil || u.Scheme == "" || len(u.Scheme) == 1 {
		u = &url.URL{Scheme: "file", Path: arg} // a path (a one-letter scheme is not one)
	}
	i := slices.IndexFunc(f.r.kinds, func(k Registration) bool { return k.claims(u) })
	if i < 0 {
		i = slices.IndexFunc(f.r.kinds, func(k Registration) bool { return slices.Contains(k.schemes(), u.Scheme) })
	}
	if i < 0 {
		return Location{}, fmt.Errorf("%s: unsupported store URL scheme %q (%s)", store.Redacted(arg), u.Scheme, f.r.known())
	}
	l, err := f.parsers[i](arg, u)
	l.Kind = f.r.kinds[i].name()
	return l, err
}

// known lists the forms of STORE arguments: "a path, file://, s3://...".
func (r *Registry) known() string {
	forms := []string{"a path"}
	for _, k := range r.kinds {
		for _, s := range k.schemes() {
			forms = append(forms, s+"://")
		}
	}
	return strings.Join(forms, ", ")
}

// Dir is the kind of local directories: paths and file:// URLs (of what
// no other kind claims). It is writable when this process may write the
// directory.
var Dir = Kind[struct{}]{
	Name:    "directory",
	Schemes: []string{"file"},
	Parse: func(_ string, u *url.URL, _ struct{}) (Location, error) {
		dir := u.Path
		return Location{
			Writable: syscall.Access(dir, unix.W_OK) == nil,
			LocalDir: dir,
			Open: func(_ context.Context, o Options) (store.Store, error) {
				return store.OpenDir(dir, o.ReadOnly)
			},
		}, nil
	},
}

// LocalFile reports whether u is a path (or file:// URL) of a regular
// file, for kinds that read files (zip).
func LocalFile(u *url.URL) bool {
	if u.Scheme != "file" {
		return false
	}
	fi, err := os.Stat(u.Path)
	return err == nil && fi.Mode().IsRegular()
}
