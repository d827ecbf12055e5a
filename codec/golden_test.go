package codec_test

import (
	"testing"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr/dtype"
)

// TestNumcodecsVectors decodes chunks that zarr-python 2.13 / numcodecs 0.11
// stored (testdata/gen_vectors.py) and compares with what zarr read back;
// then re-encodes with our encoders and decodes again.
func TestNumcodecsVectors(t *testing.T) {
	v2, v3 := loadVectors(t)
	for _, c := range v2 {
		t.Run(c.Name, func(t *testing.T) {
			p := c.pipeline(t)
			data, items := c.want(t)
			got, err := p.Decode(unb64(t, c.Encoded))
			if err != nil {
				t.Fatalf("decode %v: %v", p.Names(), err)
			}
			sameChunk(t, "decode", got, data, items)
			enc, err := p.Encode(got)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			// Without a compressor (whose output may legitimately
			// differ), we must write what numcodecs writes.
			if string(c.ZArray.Compressor) == "null" && string(enc) != string(unb64(t, c.Encoded)) {
				t.Errorf("our encoding differs from numcodecs'\n ours %x\n      %x", head(enc), head(unb64(t, c.Encoded)))
			}
			again, err := p.Decode(enc)
			if err != nil {
				t.Fatalf("decode our encoding: %v", err)
			}
			// Lossy filters are idempotent on their own output.
			sameChunk(t, "round trip", again, data, items)
		})
	}
	for _, c := range v3 {
		t.Run(c.Name, func(t *testing.T) {
			d, err := dtype.ParseV3(c.DataType)
			if err != nil {
				t.Fatal(err)
			}
			p, err := codec.NewPipeline(c.Codecs, codec.Spec{Shape: c.Shape, Type: d})
			if err != nil {
				t.Fatal(err)
			}
			enc := unb64(t, c.Encoded)
			got, err := p.Decode(enc)
			if err != nil {
				t.Fatal(err)
			}
			sameChunk(t, "decode", got, unb64(t, c.Data), nil)
			ours, err := p.Encode(got)
			if err != nil {
				t.Fatal(err)
			}
			if string(ours) != string(enc) {
				t.Fatalf("our encoding differs from the reference")
			}
		})
	}
}
