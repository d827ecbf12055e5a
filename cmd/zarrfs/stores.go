package main

import (
	"github.com/zarrfs/zarrfs/zarr/store/azstore"
	"github.com/zarrfs/zarrfs/zarr/store/gcsstore"
	"github.com/zarrfs/zarrfs/zarr/store/httpstore"
	"github.com/zarrfs/zarrfs/zarr/store/registry"
	"github.com/zarrfs/zarrfs/zarr/store/s3store"
	"github.com/zarrfs/zarrfs/zarr/store/zipstore"
)

// stores are the kinds of store zarrfs reads, one line each. Kinds that
// claim URLs (zip files, Azure's https:// hosts) are asked in this order
// before any kind is looked up by its scheme.
var stores = registry.New(
	registry.Dir,
	zipstore.Kind,
	s3store.Kind,
	gcsstore.Kind,
	azstore.Kind,
	httpstore.Kind,
)
