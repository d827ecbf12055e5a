package integration_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os/exec"
	"slices"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// consolidatedScript opens MNT/v2 the way a zarr-python 2 user would, with
// zarr.open_consolidated, and prints every array it finds, with the
// digest of its content for numeric types.
const consolidatedScript = `
import hashlib, json, sys
import numpy as np
import zarr

root = zarr.open_consolidated(sys.argv[1], mode="r")
out = []
def visit(path, node):
    if not isinstance(node, zarr.Array):
        return
    r = {"path": path, "shape": list(node.shape)}
    try:
        data = np.asarray(node[...])
        if data.dtype.kind in "biufc":
            le = np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<"))
            r["sha256"] = hashlib.sha256(le.tobytes()).hexdigest()
    except Exception as e:
        r["error"] = f"{type(e).__name__}: {e}"
    out.append(r)
root.visititems(visit)
print(json.dumps(out))
`

// TestZarrPythonConsolidated opens the v2 view with zarr-python 2.13's
// zarr.open_consolidated: it must list every array of the hierarchy with
// its shape, and read each numeric one with the original digest.
func TestZarrPythonConsolidated(t *testing.T) {
	zarrtest.RequirePython(t, "zarr")
	v3, arrays, _, _ := generated(t)
	t.Run("generated-v3", func(t *testing.T) {
		checkConsolidated(t, v3, generatedDigests(arrays))
	})
	t.Run("fixtures", func(t *testing.T) {
		fixtures := zarrtest.Fixtures(t)
		checkConsolidated(t, fixtures, fixtureDigests(t, fixtures))
	})
}

func checkConsolidated(t *testing.T, dir string, want map[string]string) {
	h := scanStore(t, dir)
	m := mount(t, dir, "--ro")
	out, err := exec.Command("/usr/bin/python3", "-c", consolidatedScript, m.Dir+"/v2").Output()
	if err != nil {
		t.Fatalf("zarr.open_consolidated: %v\n%s", err, stderrOf(err))
	}
	var got []struct {
		Path, SHA256, Error string
		Shape               []int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	var digests int
	for _, r := range got {
		listed[r.Path] = true
		n, ok := nodeOf(h, r.Path)
		switch {
		case !ok:
			t.Errorf("zarr-python lists an array %s that the store does not have", r.Path)
		case !slices.Equal(r.Shape, n.Array.Shape):
			t.Errorf("%s: zarr-python sees shape %v, want %v", r.Path, r.Shape, n.Array.Shape)
		case r.Error != "":
			t.Errorf("%s: zarr-python cannot read it: %s", r.Path, r.Error)
		case r.SHA256 != "" && r.SHA256 != want[r.Path]:
			t.Errorf("%s: zarr-python reads digest %s, want %s", r.Path, r.SHA256, want[r.Path])
		case r.SHA256 != "":
			digests++
		}
	}
	for _, sa := range h.arrays {
		if !listed[sa.path()] {
			t.Errorf("zarr.open_consolidated does not list %s", sa.path())
		}
	}
	t.Logf("zarr.open_consolidated lists %d arrays (the store has %d); %d numeric ones read with the right digest",
		len(got), len(h.arrays), digests)
}

func nodeOf(h *storedHierarchy, path string) (*zarr.Node, bool) {
	for _, sa := range h.arrays {
		if sa.path() == path {
			return sa.node, true
		}
	}
	return nil, false
}

func stderrOf(err error) string {
	if exit, ok := err.(*exec.ExitError); ok {
		return string(exit.Stderr)
	}
	return ""
}

// xarrayScript opens the weather group of MNT/v2 with xarray, once from the
// group's directory and once through the root's consolidated metadata.
const xarrayScript = `
import hashlib, json, sys
import numpy as np
import xarray as xr

mnt = sys.argv[1]
out = {}
for name, kw in [("group", dict(store=mnt + "/v2/weather", consolidated=False)),
                 ("consolidated", dict(store=mnt + "/v2", group="weather", consolidated=True))]:
    ds = xr.open_zarr(mask_and_scale=False, **kw)
    t = ds["temperature"]
    out[name] = {
        "dims": list(t.dims),
        "coords": sorted(ds.coords),
        "title": ds.attrs.get("title"),
        "lat": ds["lat"].values.tolist(),
        "sha256": hashlib.sha256(np.ascontiguousarray(t.values, dtype="<f4").tobytes()).hexdigest(),
    }
print(json.dumps(out))
`

// TestXarray opens a group of v3 arrays with dimension_names through the v2
// view with xarray: the view's _ARRAY_DIMENSIONS give the data variable
// its dimensions and make the 1-d arrays coordinates.
func TestXarray(t *testing.T) {
	zarrtest.RequirePython(t, "zarr", "xarray")
	dir := t.TempDir()
	digest, lat := writeWeatherStore(t, dir)
	m := mount(t, dir, "--ro")
	out, err := exec.Command("/usr/bin/python3", "-c", xarrayScript, m.Dir).Output()
	if err != nil {
		t.Fatalf("xarray: %v\n%s", err, stderrOf(err))
	}
	var got map[string]struct {
		Dims, Coords []string
		Title        string
		Lat          []float64
		SHA256       string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"group", "consolidated"} {
		r := got[how]
		if !slices.Equal(r.Dims, []string{"time", "lat", "lon"}) || !slices.Equal(r.Coords, []string{"lat", "lon"}) ||
			r.Title != "weather" || !slices.Equal(r.Lat, lat) || r.SHA256 != digest {
			t.Errorf("xr.open_zarr (%s): %+v; want dims [time lat lon], coords [lat lon], title weather, lat %v, digest %s", how, r, lat, digest)
		}
	}
	t.Logf("xr.open_zarr: %+v", got)
}

// writeWeatherStore writes a v3 group "weather" holding a sharded
// temperature(time, lat, lon) and its lat and lon coordinates, and returns
// the digest of the temperatures and the latitudes.
func writeWeatherStore(t *testing.T, dir string) (digest string, lat []float64) {
	t.Helper()
	ctx := context.Background()
	s := zarrtest.OpenStore(t, dir)
	defer s.Close()
	for _, err := range []error{
		zarr.CreateGroup(ctx, s, "", 3, nil),
		zarr.CreateGroup(ctx, s, "weather", 3, json.RawMessage(`{"title":"weather"}`)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// write creates an array whose element i is value(i).
	write := func(path string, typ dtype.DataType, shape, chunk []int, codecs []meta.Codec, dims []string, value func(i int) float64) *codec.Chunk {
		m := &meta.ArrayV3{Shape: shape, DataType: typ, ChunkShape: chunk, FillValue: make([]byte, typ.Size), Codecs: codecs,
			KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingDefault, Separator: "/"}}
		for _, d := range dims {
			m.DimensionNames = append(m.DimensionNames, &d)
		}
		a, err := zarr.CreateArrayV3(ctx, s, path, m)
		if err != nil {
			t.Fatal(err)
		}
		c := &codec.Chunk{Shape: shape, Type: typ, Data: make([]byte, nd.Size(shape)*typ.Size)}
		for i := range nd.Size(shape) {
			if typ.Size == 4 {
				binary.LittleEndian.PutUint32(c.Data[4*i:], math.Float32bits(float32(value(i))))
			} else {
				binary.LittleEndian.PutUint64(c.Data[8*i:], math.Float64bits(value(i)))
			}
		}
		if err := a.Write(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	temps := write("weather/temperature", dtype.TypeFloat32, []int{4, 6, 8}, []int{2, 6, 8},
		zarr.ShardedCodecs([]int{1, 3, 4}, []meta.Codec{zarrtest.BytesLE, zarrtest.Zstd}),
		[]string{"time", "lat", "lon"}, func(i int) float64 { return 0.5*float64(i) + 1 })
	latitude := func(i int) float64 { return -50 + 20*float64(i) }
	write("weather/lat", dtype.TypeFloat64, []int{6}, []int{6}, []meta.Codec{zarrtest.BytesLE}, []string{"lat"}, latitude)
	write("weather/lon", dtype.TypeFloat64, []int{8}, []int{4}, []meta.Codec{zarrtest.BytesLE, zarrtest.Gzip}, []string{"lon"},
		func(i int) float64 { return 10 * float64(i) })
	for i := range 6 {
		lat = append(lat, latitude(i))
	}
	return zarrtest.Digest(temps), lat
}
