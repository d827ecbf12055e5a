package codec_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

const python = "/usr/bin/python3"

// zarrPython decodes chunks with zarr-python 2.13 through
// testdata/numcodecs_decode.py, one process per test.
type zarrPython struct {
	in  io.Writer
	out *bufio.Reader
}

// startZarrPython starts the decoder, or skips the test visibly when
// Debian's python3 with zarr and numcodecs is absent (fails under CI=true,
// zarrtest.Missing).
func startZarrPython(t *testing.T) *zarrPython {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIP: -short: not running zarr-python")
	}
	if err := exec.Command(python, "-c", "import zarr, numcodecs, crcmod").Run(); err != nil {
		zarrtest.Missing(t, "%s with zarr, numcodecs and crcmod is not available: %v", python, err)
	}
	in, out := zarrtest.StartPython(t, filepath.Join("testdata", "numcodecs_decode.py"))
	return &zarrPython{in: in, out: out}
}

// zarrayFields are the .zarray fields the decoder needs.
type zarrayFields struct {
	DType      string            `json:"dtype"`
	Shape      []int             `json:"shape"`
	Order      string            `json:"order"`
	Filters    []json.RawMessage `json:"filters"`
	Compressor json.RawMessage   `json:"compressor"`
}

// decode returns the chunk as zarr-python reads it (as a v2Case holding
// the expected content), or zarr-python's error.
func (z *zarrPython) decode(t *testing.T, meta zarrayFields, chunk []byte) (*v2Case, string) {
	t.Helper()
	if meta.Filters == nil {
		meta.Filters = []json.RawMessage{}
	}
	if len(meta.Compressor) == 0 {
		meta.Compressor = json.RawMessage("null")
	}
	req, _ := json.Marshal(map[string]any{"zarray": meta, "chunk": base64.StdEncoding.EncodeToString(chunk)})
	if _, err := z.in.Write(append(req, '\n')); err != nil {
		t.Fatal(err)
	}
	line, err := z.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("zarr-python: %v", err)
	}
	var resp struct {
		v2Case
		Error string `json:"error"`
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		t.Fatalf("zarr-python answered %q: %v", line, err)
	}
	return &resp.v2Case, resp.Error
}

// TestZarrPythonReadsOurChunks encodes every vector's content with our
// encoders and has zarr-python 2.13 decode it.
func TestZarrPythonReadsOurChunks(t *testing.T) {
	z := startZarrPython(t)
	v2, _ := loadVectors(t)
	for _, c := range v2 {
		t.Run(c.Name, func(t *testing.T) {
			p := c.pipeline(t)
			ref, err := p.Decode(unb64(t, c.Encoded))
			if err != nil {
				t.Fatal(err)
			}
			enc, err := p.Encode(ref)
			if err != nil {
				t.Fatal(err)
			}
			got, perr := z.decode(t, zarrayFields(c.ZArray), enc)
			if perr != "" {
				t.Fatalf("zarr-python cannot read our %v encoding: %s", p.Names(), perr)
			}
			data, items := got.want(t)
			sameChunk(t, "zarr-python", ref, data, items)
		})
	}
}

// TestZarrPythonAgreesOnFixtures decodes every v2 fixture chunk with our
// pipeline and with zarr-python 2.13 and compares.
func TestZarrPythonAgreesOnFixtures(t *testing.T) {
	root := zarrtest.Fixtures(t)
	z := startZarrPython(t)
	for _, f := range findFiles(t, root, ".zarray") {
		rel, _ := filepath.Rel(root, filepath.Dir(f))
		t.Run(rel, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var meta struct {
				zarrayFields
				Chunks []int `json:"chunks"`
			}
			if err := json.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			meta.Shape = meta.Chunks
			meta.Compressor = withoutZstdChecksum(t, meta.Compressor)
			p := v2FixturePipeline(t, f)
			d, e, _ := dtype.ParseV2(meta.DType)
			rd, chain, _ := codec.FromV2(d, e, meta.Order[0], len(meta.Chunks), meta.Filters, meta.Compressor)
			v, ok := codec.ToV2(rd, chain, meta.Chunks)
			if !ok {
				t.Fatalf("ToV2(%s) is not ok", chainString(chain))
			}
			for _, chunk := range chunkFiles(t, filepath.Dir(f)) {
				b, err := os.ReadFile(chunk)
				if err != nil {
					t.Fatal(err)
				}
				ours, err := p.Decode(b)
				if err != nil {
					t.Fatal(err)
				}
				// As the fixture describes it, and as ToV2 describes our
				// v3 chain for it.
				ref, perr := z.decode(t, meta.zarrayFields, b)
				if perr != "" {
					t.Fatalf("%s: zarr-python: %s", chunk, perr)
				}
				data, items := ref.want(t)
				sameChunk(t, chunk, ours, data, items)
				ref, perr = z.v2Read(t, v, meta.Chunks, b)
				if perr != "" {
					t.Fatalf("%s: zarr-python with ToV2's description: %s", chunk, perr)
				}
				data, items = ref.want(t)
				sameChunk(t, chunk+" (ToV2)", ours, data, items)
			}
		})
	}
}

// v2Read reads bytes stored by a v3 chain under the v2 description ToV2
// gave, as zarr-python 2.13 would.
func (z *zarrPython) v2Read(t *testing.T, v codec.V2Chain, shape []int, stored []byte) (*v2Case, string) {
	t.Helper()
	meta := zarrayFields{DType: v.DType, Shape: shape, Order: string(v.Order), Filters: v.Filters, Compressor: v.Compressor}
	return z.decode(t, meta, stored[:len(stored)-v.DropTrailing])
}

// withoutZstdChecksum drops the "checksum" key of a zstd compressor, which
// numcodecs 0.11 rejects (the frame says whether it has a checksum).
func withoutZstdChecksum(t *testing.T, c json.RawMessage) json.RawMessage {
	var cfg map[string]any
	if json.Unmarshal(c, &cfg) != nil || cfg["id"] != "zstd" {
		return c
	}
	delete(cfg, "checksum")
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
