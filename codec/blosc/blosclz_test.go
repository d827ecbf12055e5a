package blosc

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestBlosclzDecodeTokens(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		size int
		want string // output, or "error: substring"
	}{
		{"literals", []byte{2, 'a', 'b', 'c'}, 3, "abc"},
		{"first byte masked", []byte{0x20 | 2, 'a', 'b', 'c'}, 3, "abc"},
		{"run", []byte{0, 'a', 1 << 5, 0, 0, 'b'}, 5, "aaaab"},                  // len 3, dist 1
		{"overlap", []byte{1, 'a', 'b', 3 << 5, 1, 0, 'c'}, 8, "abababac"},      // len 5, dist 2
		{"extended", []byte{0, 'x', 7 << 5, 2, 0, 0, 'y'}, 13, "xxxxxxxxxxxxy"}, // len 9+2=11
		{"extended 255", []byte{0, 'x', 7 << 5, 255, 1, 0, 0, 'y'}, 2 + 9 + 256, strings.Repeat("x", 1+9+256) + "y"},
		{"ends after match", []byte{0, 'a', 1 << 5, 0}, 4, "aaaa"},
		{"distance before start", []byte{0, 'a', 1 << 5, 1, 0, 'b'}, 10, "error: before the start"},
		{"literal overruns input", []byte{5, 'a'}, 10, "error: overruns input"},
		{"literal overruns output", []byte{5, 'a', 'b', 'c', 'd', 'e', 'f'}, 3, "error: overruns output"},
		{"match overruns output", []byte{0, 'a', 7 << 5, 200, 0}, 20, "error: exceeds output"},
		{"truncated distance", []byte{0, 'a', 1 << 5}, 10, "error: truncated match distance"},
		{"truncated far", []byte{0, 'a', 1<<5 | 31, 255, 0}, 10, "error: truncated far"},
		{"empty", nil, 10, "error: empty"},
	}
	for _, c := range cases {
		dst := make([]byte, c.size)
		n, err := blosclzDecode(dst, c.in)
		if e, ok := strings.CutPrefix(c.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), e) {
				t.Errorf("%s: err = %v, want %q", c.name, err, e)
			}
			continue
		}
		if err != nil || string(dst[:n]) != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, dst[:n], err, c.want)
		}
	}
}

// TestBlosclzFarMatch checks the 16-bit distance form on both sides.
func TestBlosclzFarMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	pattern := make([]byte, 20000)
	for i := range pattern {
		pattern[i] = byte(rng.Uint32())
	}
	src := append(bytes.Clone(pattern), pattern...) // repeats at distance 20000
	for _, level := range []int{1, 5, 9} {
		enc := new(blzEncoder)
		dst := make([]byte, len(src))
		n := enc.encode(dst, src, level)
		if n == 0 || n > len(pattern)+len(pattern)/16 {
			t.Fatalf("level %d: encoded %d bytes, want about %d", level, n, len(pattern))
		}
		out := make([]byte, len(src))
		if m, err := blosclzDecode(out, dst[:n]); err != nil || m != len(src) || !bytes.Equal(out, src) {
			t.Fatalf("level %d: round trip: n=%d err=%v", level, m, err)
		}
	}
	// Hand-made far match: distance 8192+5 from a 16-bit offset of 5.
	in := []byte{31}
	in = append(in, bytes.Repeat([]byte{'q'}, 32)...)
	for range 8192/32 + 1 {
		in = append(in, 31)
		in = append(in, bytes.Repeat([]byte{'z'}, 32)...)
	}
	in = append(in, 1<<5|31, 255, 0, 5, 0, '!')
	prefix := 32 + (8192/32+1)*32
	dst := make([]byte, prefix+4)
	n, err := blosclzDecode(dst, in)
	if err != nil || n != prefix+4 {
		t.Fatalf("far match: n=%d err=%v", n, err)
	}
	if got := string(dst[prefix : prefix+3]); got != string(dst[prefix-8197:prefix-8197+3]) {
		t.Fatalf("far match copied %q", got)
	}
}

// TestBlosclzEncodeShapes round-trips typical byte-plane contents.
func TestBlosclzEncodeShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	shapes := map[string][]byte{
		"zeros":  make([]byte, 100000),
		"short":  []byte("abababababababababab"),
		"cycle":  bytes.Repeat([]byte("abcdefg"), 10000),
		"random": nil,
		"text":   []byte(strings.Repeat("the quick brown fox jumps over the lazy dog; ", 500)),
	}
	r := make([]byte, 5000)
	for i := range r {
		r[i] = byte(rng.Uint32())
	}
	shapes["random"] = r
	for name, src := range shapes {
		for level := 1; level <= 9; level++ {
			enc := new(blzEncoder)
			dst := make([]byte, len(src)-1)
			n := enc.encode(dst, src, level)
			if name == "random" {
				if n != 0 {
					t.Errorf("random data compressed to %d of %d bytes", n, len(src))
				}
				continue
			}
			if n == 0 {
				t.Errorf("%s level %d: not compressed", name, level)
				continue
			}
			out := make([]byte, len(src))
			m, err := blosclzDecode(out, dst[:n])
			if err != nil || m != len(src) || !bytes.Equal(out, src) {
				t.Errorf("%s level %d: round trip failed: %v", name, level, err)
			}
			if !endsInLiteral(dst[:n]) {
				t.Errorf("%s level %d: stream does not end with literals", name, level)
			}
		}
	}
}

// endsInLiteral walks the tokens of a valid stream and reports whether the
// last one is a literal run, which c-blosc's decoder needs.
func endsInLiteral(s []byte) bool {
	ip, ctrl, lit := 1, int(s[0]&31), false
	for {
		if ctrl < 32 {
			ip += ctrl + 1
			lit = true
		} else {
			if ctrl>>5 == 7 {
				for s[ip] == 255 {
					ip++
				}
				ip++
			}
			if ctrl&31 == 31 && s[ip] == 255 {
				ip += 2
			}
			ip++
			lit = false
		}
		if ip >= len(s) {
			return lit
		}
		ctrl = int(s[ip])
		ip++
	}
}
