package zipstore

import (
	"context"
	"net/url"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/registry"
)

// Kind reads paths (and file:// URLs) of regular files: zip files
// (zarr-python's ZipStore, .ozx), read-only.
var Kind = registry.Kind[struct{}]{
	Name:   "zip",
	Claims: registry.LocalFile,
	Parse: func(_ string, u *url.URL, _ struct{}) (registry.Location, error) {
		return registry.Location{Open: func(ctx context.Context, _ registry.Options) (store.Store, error) {
			return Open(ctx, u.Path)
		}}, nil
	},
}
