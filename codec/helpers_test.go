package codec_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/dtype"
	"github.com/zarrfs/zarrfs/zarr/meta"
)

// v2Case is one chunk of numcodecs_vectors.json: a v2 array of one chunk.
type v2Case struct {
	Name   string `json:"name"`
	ZArray struct {
		DType      string            `json:"dtype"`
		Shape      []int             `json:"shape"`
		Order      string            `json:"order"`
		Filters    []json.RawMessage `json:"filters"`
		Compressor json.RawMessage   `json:"compressor"`
	} `json:"zarray"`
	Encoded  string   `json:"encoded"`
	Data     string   `json:"data"`
	Items    []string `json:"items"`
	ItemsB64 []string `json:"items_b64"`
}

type v3Case struct {
	Name     string          `json:"name"`
	DataType json.RawMessage `json:"data_type"`
	Shape    []int           `json:"shape"`
	Codecs   []meta.Codec    `json:"codecs"`
	Encoded  string          `json:"encoded"`
	Data     string          `json:"data"`
}

func loadVectors(t testing.TB) (v2 []v2Case, v3 []v3Case) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "numcodecs_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		V2 []v2Case `json:"v2"`
		V3 []v3Case `json:"v3"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.V2, doc.V3
}

func unb64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pipeline builds the pipeline of a v2 case through FromV2.
func (c *v2Case) pipeline(t testing.TB) *codec.Pipeline {
	t.Helper()
	d, e, err := dtype.ParseV2(c.ZArray.DType)
	if err != nil {
		t.Fatal(err)
	}
	rd, chain, err := codec.FromV2(d, e, c.ZArray.Order[0], len(c.ZArray.Shape), c.ZArray.Filters, c.ZArray.Compressor)
	if err != nil {
		t.Fatalf("FromV2: %v", err)
	}
	p, err := codec.NewPipeline(chain, codec.Spec{Shape: c.ZArray.Shape, Type: rd})
	if err != nil {
		t.Fatalf("NewPipeline(%s): %v", chainString(chain), err)
	}
	return p
}

// want is the decoded chunk the case expects.
func (c *v2Case) want(t testing.TB) (data []byte, items [][]byte) {
	switch {
	case c.Items != nil:
		for _, s := range c.Items {
			items = append(items, []byte(s))
		}
	case c.ItemsB64 != nil:
		for _, s := range c.ItemsB64 {
			items = append(items, unb64(t, s))
		}
	default:
		data = unb64(t, c.Data)
	}
	return data, items
}

func chainString(chain []meta.Codec) string {
	b, _ := json.Marshal(chain)
	return string(b)
}

// sameChunk compares decoded content.
func sameChunk(t testing.TB, what string, got *codec.Chunk, data []byte, items [][]byte) {
	t.Helper()
	if items != nil || got.Items != nil {
		if len(got.Items) != len(items) {
			t.Fatalf("%s: %d items, want %d", what, len(got.Items), len(items))
		}
		for i := range items {
			if !bytes.Equal(got.Items[i], items[i]) {
				t.Fatalf("%s: item %d = %q, want %q", what, i, got.Items[i], items[i])
			}
		}
		return
	}
	if !bytes.Equal(got.Data, data) {
		t.Fatalf("%s: data differs (%d bytes, want %d)\n got %x\nwant %x", what, len(got.Data), len(data), head(got.Data), head(data))
	}
}

func head(b []byte) []byte {
	if len(b) > 48 {
		return b[:48]
	}
	return b
}
