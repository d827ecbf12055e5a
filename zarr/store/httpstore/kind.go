package httpstore

import (
	"context"
	"net/url"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/registry"
)

// Kind reads http:// and https:// URLs (but those another kind claims,
// as az:// does Azure's): read-only.
var Kind = registry.Kind[struct{}]{
	Name:    "http",
	Schemes: []string{"http", "https"},
	Parse: func(arg string, _ *url.URL, _ struct{}) (registry.Location, error) {
		return registry.Location{Open: func(_ context.Context, o registry.Options) (store.Store, error) {
			return Open(arg, Options{Limits: o.Limits})
		}}, nil
	},
}
