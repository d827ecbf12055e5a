package blosc

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// vector is one c-blosc frame from testdata/vectors.json.
type vector struct {
	Input        string `json:"input"`
	Cname        string `json:"cname"`
	Clevel       int    `json:"clevel"`
	Shuffle      int    `json:"shuffle"`
	TypeSize     int    `json:"typesize"`
	BlockSizeOpt int    `json:"blocksize_opt"`
	Via          string `json:"via"`
	SplitMode    string `json:"splitmode"`
	Offset       int    `json:"offset"`
	Length       int    `json:"length"`
	HdrFlags     uint8  `json:"hdr_flags"`
	HdrTypeSize  int    `json:"hdr_typesize"`
	HdrBlockSize int    `json:"hdr_blocksize"`

	frame []byte
}

func (v *vector) String() string {
	s := v.Input + "/" + v.Cname + "/clevel" + itoa(v.Clevel) + "/shuffle" + itoa(v.Shuffle) + "/ts" + itoa(v.TypeSize)
	if v.BlockSizeOpt != 0 {
		s += "/bs" + itoa(v.BlockSizeOpt)
	}
	if v.Via != "" {
		s += "/" + v.Via
	}
	if v.SplitMode != "" {
		s += "/split-" + v.SplitMode
	}
	return s
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

type vectorSet struct {
	CBlosc  string               `json:"cblosc"`
	Inputs  map[string]genParams `json:"inputs"`
	Vectors []*vector            `json:"vectors"`

	inputs map[string][]byte
}

var loadVectors = sync.OnceValues(func() (*vectorSet, error) {
	js, err := os.ReadFile(filepath.Join("testdata", "vectors.json"))
	if err != nil {
		return nil, err
	}
	var vs vectorSet
	if err := json.Unmarshal(js, &vs); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join("testdata", "vectors.bin.gz"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	frames, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	for _, v := range vs.Vectors {
		v.frame = frames[v.Offset : v.Offset+v.Length : v.Offset+v.Length]
	}
	vs.inputs = make(map[string][]byte)
	for name, g := range vs.Inputs {
		in, err := genInput(g)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(in)
		if hex.EncodeToString(sum[:]) != g.SHA256 {
			return nil, errors.New("generator mismatch with gen_vectors.py for input " + name)
		}
		vs.inputs[name] = in
	}
	return &vs, nil
})

func mustVectors(tb testing.TB) *vectorSet {
	tb.Helper()
	vs, err := loadVectors()
	if err != nil {
		tb.Fatalf("loading test vectors: %v", err)
	}
	return vs
}

// TestVectors decodes every frame c-blosc wrote and checks the header
// accessors and that our block size and flag choices match c-blosc's.
func TestVectors(t *testing.T) {
	vs := mustVectors(t)
	stats := map[string]int{}
	for _, v := range vs.Vectors {
		want := vs.inputs[v.Input]
		h, err := ReadHeader(v.frame)
		if err != nil {
			t.Errorf("%v: ReadHeader: %v", v, err)
			continue
		}
		got, err := Decompress(nil, v.frame, len(want))
		if err != nil {
			t.Errorf("%v: Decompress: %v", v, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%v: output differs from the input", v)
		}

		cname := v.Cname
		if cname == "lz4hc" {
			cname = "lz4"
		}
		if h.Compressor() != cname || int(h.Shuffle()) != v.Shuffle || h.TypeSize != v.HdrTypeSize || h.NBytes != len(want) {
			t.Errorf("%v: header %+v: compressor %q shuffle %d", v, h, h.Compressor(), h.Shuffle())
		}

		// c-blosc's block size heuristic and flags, except under split modes
		// Compress does not offer.
		if v.SplitMode == "" || v.SplitMode == "forward" {
			p, err := newParams(Options{Compressor: v.Cname, Level: v.Clevel, Shuffle: Shuffle(v.Shuffle),
				TypeSize: v.TypeSize, BlockSize: v.BlockSizeOpt}, len(want))
			if err != nil {
				t.Fatal(err)
			}
			if p.blocksize != v.HdrBlockSize {
				t.Errorf("%v: blocksize %d, c-blosc chose %d", v, p.blocksize, v.HdrBlockSize)
			}
			if p.flags|v.HdrFlags&flagMemcpyed != v.HdrFlags {
				t.Errorf("%v: flags %#x, c-blosc wrote %#x", v, p.flags, v.HdrFlags)
			}
		}

		switch {
		case h.Flags&flagMemcpyed != 0:
			stats["memcpyed"]++
		case h.nblocks() > 1:
			stats["multi-block"]++
		}
		if h.Flags&flagMemcpyed == 0 {
			stats["compressed "+h.Compressor()]++
			if _, n := h.blockLayout(0); n > 1 {
				stats["split"]++
			} else {
				stats["unsplit"]++
			}
		}
	}
	t.Logf("%d vectors from c-blosc %s: %v", len(vs.Vectors), vs.CBlosc, stats)
}

// TestVectorsReuseDst checks that Decompress fills a large enough dst in
// place and refuses frames above maxSize.
func TestVectorsReuseDst(t *testing.T) {
	vs := mustVectors(t)
	buf := make([]byte, 0, 1<<20)
	for _, v := range vs.Vectors {
		want := vs.inputs[v.Input]
		got, err := Decompress(buf, v.frame, -1)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%v: %v", v, err)
		}
		if len(got) > 0 && &got[:1][0] != &buf[:1][0] {
			t.Fatalf("%v: did not decode into dst", v)
		}
		if len(want) > 0 {
			if _, err := Decompress(nil, v.frame, len(want)-1); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: maxSize below nbytes: got %v", v, err)
			}
		}
	}
}

// TestVectorsTruncated checks that every proper prefix of a compressed
// frame is rejected cleanly.
func TestVectorsTruncated(t *testing.T) {
	vs := mustVectors(t)
	for i, v := range vs.Vectors {
		if i%7 != 0 { // a sample keeps this fast
			continue
		}
		for n := 0; n < len(v.frame); n += 1 + n/16 {
			if _, err := Decompress(nil, v.frame[:n], -1); err == nil {
				t.Fatalf("%v: prefix of %d/%d bytes decoded", v, n, len(v.frame))
			}
		}
	}
}
