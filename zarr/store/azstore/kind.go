package azstore

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/registry"
)

// flags are the az:// flags of a command.
type flags struct {
	endpoint  *string
	anonymous *bool
}

// Kind reads the URL forms of an Azure container and prefix:
// az://CONTAINER/PREFIX (the account from the environment),
// abfs[s]://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX and
// https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX[?SAS]. The last
// is the form public data is published in: without credentials in the
// URL or the environment its requests go anonymous (and the store is
// read-only), as they did when such URLs were read as plain web servers.
var Kind = registry.Kind[flags]{
	Name:    "az",
	Schemes: []string{"az", "abfs", "abfss"},
	Claims: func(u *url.URL) bool {
		_, ok := account(u.Host, ".blob.core.windows.net")
		return ok && u.Scheme == "https"
	},
	Flags: func(fs *flag.FlagSet) flags {
		return flags{
			endpoint:  fs.String("az-endpoint", "", "blob service URL for az:// stores, for emulators and other clouds (default: the connection string's, else https://ACCOUNT.blob.core.windows.net)"),
			anonymous: fs.Bool("az-anonymous", false, "send az:// requests without credentials (public containers)"),
		}
	},
	Parse: parse,
}

func parse(arg string, u *url.URL, f flags) (registry.Location, error) {
	o := Options{}
	container, prefix := "", strings.Trim(u.Path, "/")
	switch u.Scheme {
	case "az":
		container = u.Host
		if u.User != nil { // az://CONTAINER@ACCOUNT.dfs.core.windows.net/, as adlfs reads it
			container = u.User.Username()
			o.Account, _ = account(u.Host, ".dfs.core.windows.net", ".blob.core.windows.net")
		}
	case "abfs", "abfss":
		if u.User == nil {
			return registry.Location{}, fmt.Errorf("%s: no container (abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX)", store.Redacted(arg))
		}
		a, ok := account(u.Host, ".dfs.core.windows.net", ".blob.core.windows.net")
		if !ok {
			return registry.Location{}, fmt.Errorf("%s: not an Azure storage host (abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX)", store.Redacted(arg))
		}
		container, o.Account = u.User.Username(), a
	default: // https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX
		o.Account, _ = account(u.Host, ".blob.core.windows.net")
		container, prefix, _ = strings.Cut(prefix, "/")
		o.SAS = u.RawQuery
		o.Anonymous = o.SAS == "" && os.Getenv("AZURE_STORAGE_CONNECTION_STRING") == "" &&
			os.Getenv("AZURE_STORAGE_KEY") == "" && os.Getenv("AZURE_STORAGE_SAS_TOKEN") == ""
	}
	if container == "" {
		return registry.Location{}, fmt.Errorf("%s: no container (az://CONTAINER/PREFIX)", store.Redacted(arg))
	}
	return registry.Location{Writable: !o.Anonymous, Open: func(ctx context.Context, ro registry.Options) (store.Store, error) {
		o := o
		o.Endpoint, o.Anonymous = *f.endpoint, *f.anonymous || o.Anonymous
		o.ReadOnly, o.Limits = ro.ReadOnly, ro.Limits
		return Open(ctx, container, prefix, o)
	}}, nil
}

// account is the account of an Azure storage host name ACCOUNT.SUFFIX.
func account(host string, suffixes ...string) (string, bool) {
	for _, suffix := range suffixes {
		if a, ok := strings.CutSuffix(strings.ToLower(host), suffix); ok && a != "" && !strings.Contains(a, ".") {
			return a, true
		}
	}
	return "", false
}
