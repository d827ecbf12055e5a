package xz_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zarrfs/zarrfs/codec/xz"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// spec is a filter as testdata/gen_vectors.py writes it (every option
// explicit) and as Python's lzma module takes it.
type spec struct {
	ID          uint64 `json:"id"`
	Dist        int    `json:"dist,omitempty"`
	StartOffset uint32 `json:"start_offset,omitempty"`
	DictSize    int    `json:"dict_size,omitempty"`
	LC          *int   `json:"lc,omitempty"`
	LP          *int   `json:"lp,omitempty"`
	PB          *int   `json:"pb,omitempty"`
}

func chainOf(specs []spec) []xz.Filter {
	chain := make([]xz.Filter, len(specs))
	for i, s := range specs {
		f := xz.Filter{ID: s.ID, Distance: s.Dist, StartOffset: s.StartOffset, DictSize: s.DictSize}
		if s.LC != nil {
			f.LC, f.LP, f.PB = *s.LC, *s.LP, *s.PB
		}
		chain[i] = f
	}
	return chain
}

type vector struct {
	Name     string
	Format   string
	Filters  []spec
	Input    int
	Want     []byte
	Encoded  []byte
	inputBuf []byte
}

func vectors(t testing.TB) []vector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Inputs [][]byte
		Cases  []vector
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	for i := range file.Cases {
		c := &file.Cases[i]
		if c.Input >= 0 {
			c.Want = file.Inputs[c.Input]
		}
		c.inputBuf = c.Want
	}
	return file.Cases
}

func decode(c vector, maxSize int) ([]byte, error) {
	if c.Format == "raw" {
		return xz.DecodeRaw(c.Encoded, chainOf(c.Filters), maxSize)
	}
	return xz.Decode(c.Encoded, maxSize)
}

// TestVectors: every chain liblzma writes for Python decodes to its input.
func TestVectors(t *testing.T) {
	for _, c := range vectors(t) {
		got, err := decode(c, 1<<20)
		if err != nil || !bytes.Equal(got, c.Want) {
			t.Errorf("%s: %v; decoded %d bytes, want %d", c.Name, err, len(got), len(c.Want))
		}
		if len(c.Want) > 0 {
			if _, err := decode(c, len(c.Want)-1); !errors.Is(err, xz.ErrCorrupt) {
				t.Errorf("%s with a bound one byte short: %v, want ErrCorrupt", c.Name, err)
			}
		}
	}
}

// TestEncodeRoundTrip: what Encode and EncodeRaw write decodes to the input.
func TestEncodeRoundTrip(t *testing.T) {
	for _, c := range vectors(t) {
		if c.Filters == nil {
			continue
		}
		chain := chainOf(c.Filters)
		var enc, got []byte
		var err error
		if c.Format == "raw" {
			if enc, err = xz.EncodeRaw(c.Want, chain); err == nil {
				got, err = xz.DecodeRaw(enc, chain, len(c.Want))
			}
		} else {
			for _, check := range []byte{xz.CheckNone, xz.CheckCRC32, xz.CheckCRC64, xz.CheckSHA256} {
				if enc, err = xz.Encode(c.Want, chain, check); err == nil {
					got, err = xz.Decode(enc, len(c.Want))
				}
				if err != nil || !bytes.Equal(got, c.Want) {
					break
				}
			}
		}
		if err != nil || !bytes.Equal(got, c.Want) {
			t.Errorf("%s: %v; round trip gave %d bytes, want %d", c.Name, err, len(got), len(c.Want))
		}
	}
}

// liblzma runs testdata/liblzma.py, Python's lzma module.
type liblzma struct {
	in  io.Writer
	out *bufio.Reader
}

func startLiblzma(t *testing.T) *liblzma {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIP: -short: not running Python's lzma")
	}
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import lzma").Run(); err != nil {
		zarrtest.Missing(t, "%s with the lzma module is not available: %v", python, err)
	}
	in, out := zarrtest.StartPython(t, filepath.Join("testdata", "liblzma.py"))
	return &liblzma{in: in, out: out}
}

func (l *liblzma) do(t *testing.T, op, format string, specs []spec, data []byte) ([]byte, string) {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"op": op, "format": format, "filters": specs, "data": data})
	if _, err := l.in.Write(append(req, '\n')); err != nil {
		t.Fatal(err)
	}
	line, err := l.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Data  []byte
		Error string
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Data, resp.Error
}

// code returns n random bytes with an instruction that some BCJ filter
// converts every few bytes, as testdata/gen_vectors.py makes them.
func code(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for i := 0; i+16 <= n; i += 4 + r.IntN(12) {
		switch r.IntN(6) {
		case 0:
			b[i] = 0xe8 + byte(r.IntN(2))
			b[i+4] = []byte{0, 0xff}[r.IntN(2)]
		case 1:
			b[i+3] = 0xeb
		case 2:
			b[i+1], b[i+3] = 0xf0|byte(r.IntN(8)), 0xf8|byte(r.IntN(8))
		case 3:
			b[i], b[i+3] = 0x48|byte(r.IntN(4)), b[i+3]&^3|1
		case 4:
			b[i], b[i+1] = 0x40, b[i+1]&0x3f
		case 5: // IA-64 template 0x10: slot 2 (bits 87..127) a branch
			i &^= 15
			b[i] = 0x10 | b[i]&0xe0
			b[i+12] &^= 7                 // btype 0: slot bits 9..11
			b[i+15] = 0x50 | b[i+15]&0x0f // opcode 5: slot bits 37..40
		}
	}
	return b
}

// TestAgainstLiblzma: on random machine-code-like inputs and with start
// offsets, every filter decodes what liblzma encodes, and liblzma decodes
// what this package encodes, raw and in the container.
func TestAgainstLiblzma(t *testing.T) {
	l := startLiblzma(t)
	r := rand.New(rand.NewPCG(1, 2))
	three := 3
	lzma2 := spec{ID: xz.IDLZMA2, DictSize: 1 << 16, LC: &three, LP: new(int), PB: new(int)}
	*lzma2.PB = 2
	lzma1 := lzma2
	lzma1.ID = xz.IDLZMA1
	var chains [][]spec
	for _, id := range []uint64{xz.IDX86, xz.IDPowerPC, xz.IDIA64, xz.IDARM, xz.IDARMThumb, xz.IDSPARC} {
		chains = append(chains,
			[]spec{{ID: id}, lzma2},
			[]spec{{ID: id, StartOffset: uint32(r.IntN(1<<20)) &^ 15}, lzma2},
			[]spec{{ID: xz.IDDelta, Dist: 1 + r.IntN(256)}, {ID: id}, lzma1})
	}
	for round := range 4 {
		for _, specs := range chains {
			data := code(r, 1000+r.IntN(20000))
			chain := chainOf(specs)
			format := "xz"
			if specs[len(specs)-1].ID == xz.IDLZMA1 || round%2 == 1 {
				format = "raw"
			}
			enc, errText := l.do(t, "encode", format, specs, data)
			if errText != "" {
				t.Fatalf("liblzma encodes %v: %s", specs, errText)
			}
			var got []byte
			var err error
			if format == "raw" {
				got, err = xz.DecodeRaw(enc, chain, len(data))
			} else {
				got, err = xz.Decode(enc, len(data))
			}
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s %v: decoding liblzma's %d bytes: %v (equal: %v)", format, specs, len(enc), err, bytes.Equal(got, data))
			}
			if format == "raw" {
				enc, err = xz.EncodeRaw(data, chain)
			} else {
				enc, err = xz.Encode(data, chain, xz.CheckCRC32)
			}
			if err != nil {
				t.Fatal(err)
			}
			if back, errText := l.do(t, "decode", format, specs, enc); errText != "" || !bytes.Equal(back, data) {
				t.Errorf("%s %v: liblzma decodes ours: %s (equal: %v)", format, specs, errText, bytes.Equal(back, data))
			}
		}
	}
}

// TestRefused: hostile or unsupported streams give errors, not panics or
// large allocations.
func TestRefused(t *testing.T) {
	data := bytes.Repeat([]byte("zarr"), 300)
	chain := []xz.Filter{{ID: xz.IDDelta, Distance: 4}, {ID: xz.IDLZMA2, DictSize: 1 << 20, LC: 3, PB: 2}}
	good, err := xz.Encode(data, chain, xz.CheckCRC64)
	if err != nil {
		t.Fatal(err)
	}
	// The block header starts at 12; its filter flags hold the delta
	// filter (03 01 03) then LZMA2 (21 01 dict).
	hdr := 12
	hdrSize := (int(good[hdr]) + 1) * 4
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		h := b[hdr : hdr+hdrSize-4]
		binary.LittleEndian.PutUint32(b[hdr+hdrSize-4:], crc32.ChecksumIEEE(h))
		return b
	}
	at := bytes.Index(good[hdr:hdr+hdrSize], []byte{0x21, 1}) + hdr
	cases := map[string][]byte{
		"a 4 GiB dictionary":      mutate(func(b []byte) { b[at+2] = 40 }),
		"a 128 MiB dictionary":    mutate(func(b []byte) { b[at+2] = 32 }),
		"an ARM64 filter":         mutate(func(b []byte) { b[at-3] = 0x0a }),
		"LZMA2 first":             mutate(func(b []byte) { b[at-3] = 0x21 }),
		"a flipped data byte":     func() []byte { b := bytes.Clone(good); b[hdr+hdrSize+10] ^= 0x40; return b }(),
		"a flipped check byte":    func() []byte { b := bytes.Clone(good); b[len(b)-12-8-2] ^= 1; return b }(),
		"truncated":               good[:len(good)-1],
		"trailing garbage":        append(bytes.Clone(good), 1, 2, 3, 4),
		"padding of 3 zero bytes": append(bytes.Clone(good), 0, 0, 0),
		"not xz":                  []byte("hello, world"),
	}
	for name, b := range cases {
		if out, err := xz.Decode(b, len(data)); err == nil {
			t.Errorf("%s: decoded %d bytes without an error", name, len(out))
		}
	}
	if out, err := xz.Decode(append(bytes.Clone(good), 0, 0, 0, 0), len(data)); err != nil || !bytes.Equal(out, data) {
		t.Errorf("with 4 bytes of stream padding: %v", err)
	}
	for _, bad := range [][]xz.Filter{
		nil,
		{{ID: xz.IDLZMA1, DictSize: 1 << 20}},
		{{ID: xz.IDDelta, Distance: 0}, chain[1]},
		{{ID: xz.IDDelta, Distance: 1}, {ID: xz.IDX86}, {ID: xz.IDARM}, {ID: xz.IDSPARC}, chain[1]},
		{{ID: 0x0a}, chain[1]},
		{{ID: xz.IDLZMA2, DictSize: 1 << 30}},
		{{ID: xz.IDLZMA2, DictSize: 1 << 20, LC: 4, LP: 1}},
	} {
		if _, err := xz.Encode(data, bad, xz.CheckNone); !errors.Is(err, xz.ErrUnsupported) {
			t.Errorf("Encode with %v: %v, want ErrUnsupported", bad, err)
		}
	}
}

// FuzzDecode: any input decodes or fails, within the bound, without a
// panic; what decodes re-encodes to the same data.
func FuzzDecode(f *testing.F) {
	for _, c := range vectors(f) {
		if c.Format == "xz" {
			f.Add(c.Encoded)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := xz.Decode(b, 1<<16)
		if err != nil {
			return
		}
		if len(out) > 1<<16 {
			t.Fatalf("decoded %d bytes past the bound", len(out))
		}
		chain := []xz.Filter{{ID: xz.IDX86}, {ID: xz.IDLZMA2, DictSize: 1 << 16, LC: 3, PB: 2}}
		enc, err := xz.Encode(out, chain, xz.CheckCRC32)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := xz.Decode(enc, len(out)); err != nil || !bytes.Equal(back, out) {
			t.Fatalf("re-encoded: %v", err)
		}
	})
}

// FuzzDecodeRaw: raw data with any of the chains Python can write decodes
// or fails without a panic.
func FuzzDecodeRaw(f *testing.F) {
	chains := [][]xz.Filter{}
	for _, c := range vectors(f) {
		if c.Format == "raw" {
			f.Add(uint8(len(chains)), c.Encoded)
			chains = append(chains, chainOf(c.Filters))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		chain := chains[int(which)%len(chains)]
		out, err := xz.DecodeRaw(b, chain, 1<<16)
		if err == nil && len(out) > 1<<16 {
			t.Fatalf("decoded %d bytes past the bound", len(out))
		}
	})
}

// BenchmarkDecode measures decoding a GDAL-style chunk (delta, LZMA2) of
// 1 MiB of smooth numbers.
func BenchmarkDecode(b *testing.B) {
	data := make([]byte, 1<<20)
	for i := 4; i < len(data); i += 4 {
		binary.LittleEndian.PutUint32(data[i:], binary.LittleEndian.Uint32(data[i-4:])+uint32(i%7))
	}
	enc, err := xz.Encode(data, []xz.Filter{{ID: xz.IDDelta, Distance: 1}, {ID: xz.IDLZMA2, DictSize: 8 << 20, LC: 3, PB: 2}}, xz.CheckCRC64)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := xz.Decode(enc, len(data)); err != nil {
			b.Fatal(err)
		}
	}
}
