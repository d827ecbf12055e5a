package codec_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// chunkFiles lists the stored chunk files of an array directory (every
// file but metadata).
func chunkFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		switch e.Name() {
		case "zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata":
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func findFiles(t *testing.T, root, name string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && e.Name() == name {
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// zarrayDoc is the part of a .zarray the codec tests read.
type zarrayDoc struct {
	DType      string            `json:"dtype"`
	Chunks     []int             `json:"chunks"`
	Order      string            `json:"order"`
	Filters    []json.RawMessage `json:"filters"`
	Compressor json.RawMessage   `json:"compressor"`
}

// TestFixturesV2 maps every v2 fixture array with FromV2, builds its
// pipeline and decodes every chunk.
func TestFixturesV2(t *testing.T) {
	root := zarrtest.Fixtures(t)
	files := findFiles(t, root, ".zarray")
	if len(files) == 0 {
		t.Fatal("no .zarray under the fixtures")
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, filepath.Dir(f))
		t.Run(rel, func(t *testing.T) {
			p := v2FixturePipeline(t, f)
			decodeChunks(t, filepath.Dir(f), p)
			checkBackToV2(t, f, p)
		})
	}
}

func v2FixturePipeline(t *testing.T, zarray string) *codec.Pipeline {
	t.Helper()
	raw, err := os.ReadFile(zarray)
	if err != nil {
		t.Fatal(err)
	}
	var m zarrayDoc
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	d, e, err := dtype.ParseV2(m.DType)
	if err != nil {
		t.Fatal(err)
	}
	rd, chain, err := codec.FromV2(d, e, m.Order[0], len(m.Chunks), m.Filters, m.Compressor)
	if err != nil {
		t.Fatalf("FromV2(%s): %v", raw, err)
	}
	p, err := codec.NewPipeline(chain, codec.Spec{Shape: m.Chunks, Type: rd})
	if err != nil {
		t.Fatalf("NewPipeline(%s): %v", chainString(chain), err)
	}
	return p
}

// checkBackToV2: ToV2 of the chain FromV2 made describes the v2 array again.
func checkBackToV2(t *testing.T, zarray string, p *codec.Pipeline) {
	raw, err := os.ReadFile(zarray)
	if err != nil {
		t.Fatal(err)
	}
	var m zarrayDoc
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	d, e, _ := dtype.ParseV2(m.DType)
	rd, chain, _ := codec.FromV2(d, e, m.Order[0], len(m.Chunks), m.Filters, m.Compressor)
	v, ok := codec.ToV2(rd, chain, m.Chunks)
	if !ok {
		t.Fatalf("ToV2(%s) is not ok", chainString(chain))
	}
	if want, _ := dtype.FormatV2(d, e); v.DType != want {
		t.Errorf("ToV2 dtype %s, want %s", v.DType, want)
	}
	if len(m.Chunks) > 1 && string(v.Order) != m.Order {
		t.Errorf("ToV2 order %c, want %s", v.Order, m.Order)
	}
	if len(v.Filters) != len(m.Filters) || (v.Compressor == nil) != (string(m.Compressor) == "null" || m.Compressor == nil) {
		t.Errorf("ToV2 filters %s compressor %s, want %s %s", v.Filters, v.Compressor, m.Filters, m.Compressor)
	}
}

// TestFixturesV3 builds the pipeline of every unsharded v3 fixture array
// and decodes every chunk.
func TestFixturesV3(t *testing.T) {
	root := zarrtest.Fixtures(t)
	n := 0
	for _, f := range findFiles(t, root, "zarr.json") {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			NodeType  string          `json:"node_type"`
			DataType  json.RawMessage `json:"data_type"`
			ChunkGrid struct {
				Configuration struct {
					ChunkShape []int `json:"chunk_shape"`
				} `json:"configuration"`
			} `json:"chunk_grid"`
			Codecs []meta.Codec `json:"codecs"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m.NodeType != "array" || slices.ContainsFunc(m.Codecs, func(c meta.Codec) bool { return c.Name == "sharding_indexed" }) {
			continue
		}
		n++
		rel, _ := filepath.Rel(root, filepath.Dir(f))
		t.Run(rel, func(t *testing.T) {
			d, err := dtype.ParseV3(m.DataType)
			if err != nil {
				t.Fatal(err)
			}
			p, err := codec.NewPipeline(m.Codecs, codec.Spec{Shape: m.ChunkGrid.Configuration.ChunkShape, Type: d})
			if err != nil {
				t.Fatalf("NewPipeline(%s): %v", chainString(m.Codecs), err)
			}
			decodeChunks(t, filepath.Dir(f), p)
		})
	}
	if n == 0 {
		t.Fatal("no unsharded v3 arrays under the fixtures")
	}
}

func decodeChunks(t *testing.T, dir string, p *codec.Pipeline) {
	t.Helper()
	files := chunkFiles(t, dir)
	if len(files) == 0 {
		t.Fatalf("no chunk files in %s", dir)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.Decode(b)
		if err != nil {
			t.Errorf("%s: decode with %v: %v", strings.TrimPrefix(f, dir+"/"), p.Names(), err)
			continue
		}
		// Decode checks shape, type and size; check it twice here.
		if want := p.Spec().NumElements(); c.Type.Variable() && len(c.Items) != want || !c.Type.Variable() && len(c.Data) != want*c.Type.Size {
			t.Errorf("%s: wrong decoded size", f)
		}
	}
}
