package blosc

import (
	"encoding/binary"
	"fmt"
	"math"
)

// genParams are the deterministic input generators shared with
// testdata/gen_vectors.py (make_input); the two must produce identical bytes.
type genParams struct {
	Kind   string `json:"kind"`
	TS     int    `json:"ts"`
	NBytes int    `json:"nbytes"`
	Seed   uint64 `json:"seed"`
	Amp    int64  `json:"amp"`
	Step   uint64 `json:"step"`
	Shape  []int  `json:"shape"`
	SHA256 string `json:"sha256"`
}

// splitmix64 returns output number i (0-based) of splitmix64 seeded with seed.
func splitmix64(seed, i uint64) uint64 {
	z := seed + (i+1)*0x9E3779B97F4A7C15
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// walk returns a random walk whose steps are uniform in [-amp, amp].
func walk(seed uint64, amp int64, n int) []int64 {
	v := make([]int64, n)
	var acc int64
	for i := range v {
		acc += int64(splitmix64(seed, uint64(i))%uint64(2*amp+1)) - amp
		v[i] = acc
	}
	return v
}

// elementBytes lays out values as ts-byte elements; byte j of an element is
// byte j%8 of its little-endian value.
func elementBytes(values []uint64, ts int) []byte {
	out := make([]byte, len(values)*ts)
	for i, u := range values {
		for j := range ts {
			out[i*ts+j] = byte(u >> (8 * (j % 8)))
		}
	}
	return out
}

func genInput(g genParams) ([]byte, error) {
	ts := max(g.TS, 1)
	n := (g.NBytes + ts - 1) / ts
	var data []byte
	switch g.Kind {
	case "zeros":
		return make([]byte, g.NBytes), nil
	case "ramp":
		v := make([]uint64, n)
		for i := range v {
			v[i] = uint64(i) * g.Step
		}
		data = elementBytes(v, ts)
	case "walk":
		w := walk(g.Seed, g.Amp, n)
		v := make([]uint64, n)
		for i, x := range w {
			v[i] = uint64(x)
		}
		data = elementBytes(v, ts)
	case "random":
		data = make([]byte, (g.NBytes+7)/8*8)
		for k := range len(data) / 8 {
			binary.LittleEndian.PutUint64(data[8*k:], splitmix64(g.Seed, uint64(k)))
		}
	case "f32walk":
		if ts != 4 {
			return nil, fmt.Errorf("f32walk needs ts 4")
		}
		data = make([]byte, 4*n)
		for i, x := range walk(g.Seed, g.Amp, n) {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(x)*0.25))
		}
	case "vol16":
		if ts != 2 || len(g.Shape) != 3 {
			return nil, fmt.Errorf("vol16 needs ts 2 and a 3-d shape")
		}
		nx, ny, nz := g.Shape[0], g.Shape[1], g.Shape[2]
		data = make([]byte, 2*nx*ny*nz)
		i := 0
		for z := range nz {
			for y := range ny {
				for x := range nx {
					base := uint64(x*x+2*y*y+3*z*z) >> 4
					binary.LittleEndian.PutUint16(data[2*i:], uint16(base+splitmix64(g.Seed, uint64(i))%4))
					i++
				}
			}
		}
	default:
		return nil, fmt.Errorf("unknown generator kind %q", g.Kind)
	}
	return data[:min(g.NBytes, len(data))], nil
}
