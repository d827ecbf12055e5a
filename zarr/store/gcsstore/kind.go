package gcsstore

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/registry"
)

// flags are the gs:// flags of a command.
type flags struct {
	anonymous *bool
	endpoint  *string
}

// Kind reads gs://BUCKET/PREFIX; its flags are --gcs-anonymous and
// --gcs-endpoint.
var Kind = registry.Kind[flags]{
	Name:    "gs",
	Schemes: []string{"gs"},
	Flags: func(fs *flag.FlagSet) flags {
		return flags{
			anonymous: fs.Bool("gcs-anonymous", false, "send gs:// requests without credentials (public buckets)"),
			endpoint:  fs.String("gcs-endpoint", "", "URL of the server of gs:// stores, with credentials (default: Google's; STORAGE_EMULATOR_HOST names an emulator, without)"),
		}
	},
	Parse: func(arg string, u *url.URL, f flags) (registry.Location, error) {
		if u.Host == "" {
			return registry.Location{}, fmt.Errorf("%s: no bucket (gs://BUCKET/PREFIX)", store.Redacted(arg))
		}
		bucket, prefix := u.Host, strings.Trim(u.Path, "/")
		return registry.Location{Writable: true, Open: func(ctx context.Context, o registry.Options) (store.Store, error) {
			return Open(ctx, bucket, prefix, Options{Endpoint: *f.endpoint, Anonymous: *f.anonymous, ReadOnly: o.ReadOnly, Limits: o.Limits})
		}}, nil
	},
}
