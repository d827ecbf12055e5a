package s3store

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/registry"
)

// flags are the s3:// flags of a command.
type flags struct {
	endpoint  *string
	region    *string
	pathStyle *bool
	anonymous *bool
}

// Kind reads s3://BUCKET/PREFIX.
var Kind = registry.Kind[flags]{
	Name:    "s3",
	Schemes: []string{"s3"},
	Flags: func(fs *flag.FlagSet) flags {
		return flags{
			endpoint:  fs.String("s3-endpoint", "", "S3 endpoint URL for s3:// stores (default: AWS_ENDPOINT_URL, else AWS)"),
			region:    fs.String("s3-region", "", "region of s3:// buckets (default: AWS_REGION or ~/.aws/config, else us-east-1)"),
			pathStyle: fs.Bool("s3-path-style", false, "address S3 buckets in the path (most servers other than AWS need it)"),
			anonymous: fs.Bool("s3-anonymous", false, "send unsigned S3 requests (public buckets)"),
		}
	},
	Parse: func(arg string, u *url.URL, f flags) (registry.Location, error) {
		if u.Host == "" {
			return registry.Location{}, fmt.Errorf("%s: no bucket (s3://BUCKET/PREFIX)", store.Redacted(arg))
		}
		bucket, prefix := u.Host, strings.Trim(u.Path, "/")
		return registry.Location{Writable: true, Open: func(ctx context.Context, o registry.Options) (store.Store, error) {
			return Open(ctx, bucket, prefix, Options{
				Endpoint: *f.endpoint, Region: *f.region, PathStyle: *f.pathStyle, Anonymous: *f.anonymous, ReadOnly: o.ReadOnly, Limits: o.Limits,
			})
		}}, nil
	},
}
