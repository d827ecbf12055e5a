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

// Kind reads gs://BUCKET/PREFIX; its flag is --gcs-anonymous.
var Kind = registry.Kind[*bool]{
	Name:    "gs",
	Schemes: []string{"gs"},
	Flags: func(fs *flag.FlagSet) *bool {
		return fs.Bool("gcs-anonymous", false, "send gs:// requests without credentials (public buckets)")
	},
	Parse: func(arg string, u *url.URL, anonymous *bool) (registry.Location, error) {
		if u.Host == "" {
			return registry.Location{}, fmt.Errorf("%s: no bucket (gs://BUCKET/PREFIX)", store.Redacted(arg))
		}
		bucket, prefix := u.Host, strings.Trim(u.Path, "/")
		return registry.Location{Writable: true, Open: func(ctx context.Context, o registry.Options) (store.Store, error) {
			return Open(ctx, bucket, prefix, Options{Anonymous: *anonymous, ReadOnly: o.ReadOnly, Limits: o.Limits})
		}}, nil
	},
}
