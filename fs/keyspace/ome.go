package keyspace

import (
	"context"
	"encoding/json"
	"path"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/ome"
)

// The v2 view shows OME-Zarr 0.5 images (Zarr v3) as OME-Zarr 0.4 (Zarr
// v2), which is what napari-ome-zarr, Fiji/MoBIE and QuPath read: group
// attributes in the 0.4 form (package ome), and the levels of each
// multiscale image with "/" chunk keys, which 0.4 requires.

// findOMELevels returns the arrays that are levels of OME-Zarr 0.5
// multiscale images, by path, with the dimension names the v2 view gives
// them: the axes' names, where a level smaller than the first along an
// axis gets the axis name with the level's path appended, so that xarray
// can open a group's levels together (it refuses one name of two sizes).
// Levels are found once, when the views are built.
func findOMELevels(h *zarr.Hierarchy) map[string][]string {
	levels := map[string][]string{}
	for _, g := range h.Nodes() {
		if g.Array != nil || g.Format != 3 {
			continue
		}
		for _, m := range ome.Multiscales(g.Attributes) {
			var first *zarr.Array
			for _, p := range m.Paths {
				key := path.Clean(joinPath(g.Path, p))
				n, ok := h.Node(key)
				if below := g.Path == "" || strings.HasPrefix(key, g.Path+"/"); !ok || n.Array == nil || !below {
					continue
				}
				a := n.Array
				if first == nil {
					first = a
				}
				names := axisNames(a, m.Axes)
				if names != nil && len(first.Shape) == len(a.Shape) {
					for d := range names {
						if a.Shape[d] != first.Shape[d] {
							names[d] += "_" + strings.ReplaceAll(path.Clean(p), "/", "_")
						}
					}
				}
				levels[key] = names
			}
		}
	}
	return levels
}

// axisNames are the names of a level's dimensions: its dimension_names
// (which 0.5 says match the axes), or else the axes' names; nil when
// neither names every dimension.
func axisNames(a *zarr.Array, axes []string) []string {
	if a.V3 != nil && len(a.V3.DimensionNames) == len(a.Shape) && !slices.Contains(a.V3.DimensionNames, nil) {
		names := make([]string, len(a.Shape))
		for i, p := range a.V3.DimensionNames {
			names[i] = *p
		}
		return names
	}
	if len(axes) == len(a.Shape) && !slices.Contains(axes, "") {
		return slices.Clone(axes)
	}
	return nil
}

// v2Form returns a node's attributes as the v2 view shows them: those
// holding OME-Zarr 0.5 metadata in the 0.4 form (translated), others as
// they are. Metadata that has no 0.4 form is shown as it is, with a log
// line.
func (f *FS) v2Form(n *zarr.Node) (attrs json.RawMessage, translated bool) {
	if n.Format != 3 {
		return n.Attributes, false
	}
	out, ok, err := ome.ToV04(n.Attributes)
	if err != nil {
		f.logOnce(context.Background(), n.Path, "OME-Zarr 0.5 metadata shown as it is in the v2 view", "error", err)
		return n.Attributes, false
	}
	return out, ok
}
