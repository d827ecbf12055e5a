package codec

import (
	"bytes"
	"encoding/json"
	"slices"
	"unsafe"

	"github.com/zarrfs/zarrfs/zarr/nd"
)

func init() { Register("transpose", newTranspose) }

// transposeCodec is the v3 "transpose" codec: encoded axis i is decoded
// axis order[i].
type transposeCodec struct {
	dec, enc Spec
	order    []int
	// Plans for each direction, made once from the chunk shape.
	encPlan, decPlan permPlan
}

func newTranspose(config json.RawMessage, spec Spec) (any, error) {
	var cfg struct {
		Order json.RawMessage `json:"order"`
	}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	order, err := parseOrder(cfg.Order, len(spec.Shape))
	if err != nil {
		return nil, err
	}
	enc := spec
	enc.Shape = make([]int, len(order))
	for i, a := range order {
		enc.Shape[i] = spec.Shape[a]
	}
	return &transposeCodec{
		dec:     spec,
		enc:     enc,
		order:   order,
		encPlan: makePermPlan(spec.Shape, order),
		decPlan: makePermPlan(enc.Shape, invertPerm(order)),
	}, nil
}

// parseOrder reads a transpose order: a permutation of 0..ndim-1, or the
// legacy strings "C" (identity) and "F" (reversed).
func parseOrder(raw json.RawMessage, ndim int) ([]int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, configError("transpose needs an order")
	}
	order := make([]int, ndim)
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, configError("transpose order: %v", err)
		}
		for i := range order {
			switch s {
			case "C":
				order[i] = i
			case "F":
				order[i] = ndim - 1 - i
			default:
				return nil, configError("transpose order must be a permutation, \"C\" or \"F\", got %q", s)
			}
		}
		return order, nil
	}
	if err := json.Unmarshal(raw, &order); err != nil {
		return nil, configError("transpose order: %v", err)
	}
	if len(order) != ndim {
		return nil, configError("transpose order %v has %d axes, the chunk has %d", order, len(order), ndim)
	}
	seen := make([]bool, ndim)
	for _, a := range order {
		if a < 0 || a >= ndim || seen[a] {
			return nil, configError("transpose order %v is not a permutation of 0..%d", order, ndim-1)
		}
		seen[a] = true
	}
	return order, nil
}

func invertPerm(p []int) []int {
	inv := make([]int, len(p))
	for i, a := range p {
		inv[a] = i
	}
	return inv
}

func (t *transposeCodec) EncodedSpec() Spec { return t.enc }

func (t *transposeCodec) Encode(c *Chunk) (*Chunk, error) {
	if err := c.Check(t.dec); err != nil {
		return nil, err
	}
	return t.encPlan.apply(c, t.enc.Shape), nil
}

func (t *transposeCodec) Decode(c *Chunk) (*Chunk, error) {
	if err := c.Check(t.enc); err != nil {
		return nil, err
	}
	return t.decPlan.apply(c, t.dec.Shape), nil
}

// permPlan is a permutation of a source shape simplified for copying:
// size-1 axes dropped, runs of axes that stay adjacent merged, and a
// trailing axis that stays last folded into the unit of copying.
type permPlan struct {
	identity bool
	unit     int   // elements per copied unit
	shape    []int // simplified source shape, in units
	perm     []int // output axis k is source axis perm[k]
}

func makePermPlan(srcShape, perm []int) permPlan {
	// Drop size-1 axes, renumbering the rest.
	newAxis := make([]int, len(srcShape))
	var shape []int
	for a, d := range srcShape {
		newAxis[a] = -1
		if d != 1 {
			newAxis[a] = len(shape)
			shape = append(shape, d)
		}
	}
	var p []int
	for _, a := range perm {
		if newAxis[a] >= 0 {
			p = append(p, newAxis[a])
		}
	}
	// Merge output axes that are consecutive source axes.
	type run struct{ start, n int }
	var runs []run // in output order
	for _, a := range p {
		if k := len(runs) - 1; k >= 0 && runs[k].start+runs[k].n == a {
			runs[k].n++
		} else {
			runs = append(runs, run{a, 1})
		}
	}
	bySource := slices.Clone(runs)
	slices.SortFunc(bySource, func(x, y run) int { return x.start - y.start })
	plan := permPlan{unit: 1}
	rank := map[int]int{}
	for i, r := range bySource {
		rank[r.start] = i
		plan.shape = append(plan.shape, nd.Size(shape[r.start:r.start+r.n]))
	}
	for _, r := range runs {
		plan.perm = append(plan.perm, rank[r.start])
	}
	n := len(plan.perm)
	if n > 0 && plan.perm[n-1] == n-1 {
		plan.unit = plan.shape[n-1]
		plan.shape, plan.perm = plan.shape[:n-1], plan.perm[:n-1]
		n--
	}
	plan.identity = n <= 1 // after merging, one axis can only be the identity
	return plan
}

// apply permutes c into a new chunk of shape outShape (the identity shares
// c's memory).
func (p *permPlan) apply(c *Chunk, outShape []int) *Chunk {
	out := &Chunk{Shape: outShape, Type: c.Type}
	if p.identity {
		out.Data, out.Items = c.Data, c.Items
		return out
	}
	if c.Items != nil || c.Type.Variable() {
		out.Items = make([][]byte, len(c.Items))
		if p.unit == 1 {
			permute(p, out.Items, c.Items, tile[[]byte])
		} else {
			permuteUnits(p, out.Items, c.Items, p.unit)
		}
		return out
	}
	out.Data = make([]byte, len(c.Data))
	ub := p.unit * c.Type.Size
	if !permuteWords(p, out.Data, c.Data, ub) {
		permuteUnits(p, out.Data, c.Data, ub)
	}
	return out
}

// permuteWords moves units of ub bytes as machine words when ub is a word
// size and the buffers are aligned for it.
func permuteWords(p *permPlan, dst, src []byte, ub int) bool {
	switch ub {
	case 1:
		permute(p, dst, src, tileLanes(1))
		return true
	case 2:
		permute(p, dst, src, tileLanes(2))
		return true
	case 4:
		permute(p, dst, src, tileLanes(4))
		return true
	case 8:
		return permuteAs[uint64](p, dst, src)
	case 16:
		return permuteAs[[2]uint64](p, dst, src)
	}
	return false
}

func permuteAs[T any](p *permPlan, dst, src []byte) bool {
	d, ok1 := asWords[T](dst)
	s, ok2 := asWords[T](src)
	if !ok1 || !ok2 {
		return false
	}
	permute(p, d, s, tile[T])
	return true
}

// permuteUnits is the general case: units of u consecutive values.
func permuteUnits[T any](p *permPlan, dst, src []T, u int) {
	permute(p, dst, src, func(dst, src []T, dBase, dStride, sBase, sStride, rows, cols int) {
		for r := 0; r < rows; r++ {
			d := dBase + r*dStride
			for c := 0; c < cols; c++ {
				s := sBase + r + c*sStride
				copy(dst[(d+c)*u:(d+c+1)*u], src[s*u:(s+1)*u])
			}
		}
	})
}

// tileFunc moves a rows x cols block: dst[dBase + r*dStride + c] =
// src[sBase + r + c*sStride], in units.
type tileFunc[T any] func(dst, src []T, dBase, dStride, sBase, sStride, rows, cols int)

const tileSize = 8

// tile is tileFunc in cache-sized blocks for units that are single values.
func tile[T any](dst, src []T, dBase, dStride, sBase, sStride, rows, cols int) {
	for r0 := 0; r0 < rows; r0 += tileSize {
		r1 := min(r0+tileSize, rows)
		for c0 := 0; c0 < cols; c0 += tileSize {
			c1 := min(c0+tileSize, cols)
			for r := r0; r < r1; r++ {
				d := dst[dBase+r*dStride+c0 : dBase+r*dStride+c1]
				s := sBase + r + c0*sStride
				for c := range d {
					d[c] = src[s]
					s += sStride
				}
			}
		}
	}
}

// tileLanes is tileFunc over byte slices for units of ub = 1, 2 or 4
// bytes (indices in units): it moves square blocks of as many units as a
// 64-bit word holds, loading each block's source columns as words and
// transposing their lanes with shifts and masks, several times faster than
// moving one unit at a time. Rows and columns left over at the edges are
// moved one unit at a time.
func tileLanes(ub int) tileFunc[byte] {
	n := 8 / ub // units per word, and the block's side
	return func(dst, src []byte, dBase, dStride, sBase, sStride, rows, cols int) {
		if rows == 0 || cols == 0 {
			return
		}
		// The blocks' words lie within the block's first and last units:
		// bound those once, so that the words can be moved unchecked.
		_ = src[sBase*ub : (sBase+rows-1+(cols-1)*sStride+1)*ub]
		_ = dst[dBase*ub : (dBase+(rows-1)*dStride+cols)*ub]
		rn, cn := rows-rows%n, cols-cols%n
		sp, dp := unsafe.Pointer(unsafe.SliceData(src)), unsafe.Pointer(unsafe.SliceData(dst))
		ss, ds := sStride*ub, dStride*ub
		for cb := 0; cb < cn; cb += laneTileCols {
			ce := min(cb+laneTileCols, cn)
			for r0 := 0; r0 < rn; r0 += n {
				for c0 := cb; c0 < ce; c0 += n {
					s := unsafe.Add(sp, (sBase+r0+c0*sStride)*ub)
					d := unsafe.Add(dp, (dBase+r0*dStride+c0)*ub)
					switch ub {
					case 1:
						block8x1(d, ds, s, ss)
					case 2:
						block4x2(d, ds, s, ss)
					case 4:
						block2x4(d, ds, s, ss)
					}
				}
			}
		}
		moveUnits(dst, src, ub, dBase, dStride, sBase, sStride, rn, rows, 0, cols)
		moveUnits(dst, src, ub, dBase, dStride, sBase, sStride, 0, rn, cn, cols)
	}
}

// laneTileCols bounds the columns of one pass of tileLanes: the source
// rows it reads, often a power of two apart, then stay in the CPU's cache
// from one row of blocks to the next.
const laneTileCols = 64

const (
	lanes8  = 0x00ff00ff00ff00ff
	lanes16 = 0x0000ffff0000ffff
	lanes32 = 0x00000000ffffffff
)

// zip interleaves the lanes of width shift bits of x and y: lo holds the
// even lanes of both, hi the odd ones.
func zip(x, y, mask uint64, shift uint) (lo, hi uint64) {
	return x&mask | (y&mask)<<shift, (x>>shift)&mask | y&^mask
}

// word and setWord access the (possibly unaligned) 8 bytes at p+off in
// the machine's byte order, which lanes keep: a unit's bytes move
// together.
func word(p unsafe.Pointer, off int) uint64 { return *(*uint64)(unsafe.Add(p, off)) }

func setWord(p unsafe.Pointer, off int, w uint64) { *(*uint64)(unsafe.Add(p, off)) = w }

// block2x4, block4x2 and block8x1 transpose one square block of 4-, 2-
// and 1-byte units: the word at s+i*ss (the block's source units (i, 0..))
// becomes lane i of the words at d+j*ds. Strides are in bytes.
func block2x4(d unsafe.Pointer, ds int, s unsafe.Pointer, ss int) {
	w0, w1 := zip(word(s, 0), word(s, ss), lanes32, 32)
	setWord(d, 0, w0)
	setWord(d, ds, w1)
}

func block4x2(d unsafe.Pointer, ds int, s unsafe.Pointer, ss int) {
	t0, t1 := zip(word(s, 0), word(s, ss), lanes16, 16)
	t2, t3 := zip(word(s, 2*ss), word(s, 3*ss), lanes16, 16)
	w0, w2 := zip(t0, t2, lanes32, 32)
	w1, w3 := zip(t1, t3, lanes32, 32)
	for i, w := range [4]uint64{w0, w1, w2, w3} {
		setWord(d, i*ds, w)
	}
}

func block8x1(d unsafe.Pointer, ds int, s unsafe.Pointer, ss int) {
	e0, o0 := zip(word(s, 0), word(s, ss), lanes8, 8)
	e1, o1 := zip(word(s, 2*ss), word(s, 3*ss), lanes8, 8)
	e2, o2 := zip(word(s, 4*ss), word(s, 5*ss), lanes8, 8)
	e3, o3 := zip(word(s, 6*ss), word(s, 7*ss), lanes8, 8)
	f0, g0 := zip(e0, e1, lanes16, 16) // lanes 0 and 4 of rows 0-3; 2 and 6
	f1, g1 := zip(e2, e3, lanes16, 16) // the same of rows 4-7
	h0, i0 := zip(o0, o1, lanes16, 16) // lanes 1 and 5; 3 and 7
	h1, i1 := zip(o2, o3, lanes16, 16)
	w0, w4 := zip(f0, f1, lanes32, 32)
	w2, w6 := zip(g0, g1, lanes32, 32)
	w1, w5 := zip(h0, h1, lanes32, 32)
	w3, w7 := zip(i0, i1, lanes32, 32)
	for i, w := range [8]uint64{w0, w1, w2, w3, w4, w5, w6, w7} {
		setWord(d, i*ds, w)
	}
}

// moveUnits moves the units of rows [r0, r1) and columns [c0, c1) of a
// tileFunc block one at a time.
func moveUnits(dst, src []byte, ub, dBase, dStride, sBase, sStride, r0, r1, c0, c1 int) {
	for r := r0; r < r1; r++ {
		for c := c0; c < c1; c++ {
			d, s := (dBase+r*dStride+c)*ub, (sBase+r+c*sStride)*ub
			copy(dst[d:d+ub], src[s:s+ub])
		}
	}
}

// permute runs f over every 2-D block of the permutation. The block is
// spanned by the output's last axis and the output axis that is the
// source's last (contiguous) axis; the other output axes are iterated.
func permute[T any](p *permPlan, dst, src []T, f tileFunc[T]) {
	if len(dst) == 0 {
		return
	}
	n := len(p.perm)
	srcStride := make([]int, n)
	s := 1
	for a := n - 1; a >= 0; a-- {
		srcStride[a] = s
		s *= p.shape[a]
	}
	outShape := make([]int, n)
	dstStride := make([]int, n)
	d := 1
	for k := n - 1; k >= 0; k-- {
		outShape[k] = p.shape[p.perm[k]]
		dstStride[k] = d
		d *= outShape[k]
	}
	pAxis := slices.Index(p.perm, n-1) // output axis of the source's last axis
	last := n - 1
	rows, cols := outShape[pAxis], outShape[last]
	rowStride, colStride := dstStride[pAxis], srcStride[p.perm[last]]
	// Odometer over the remaining output axes.
	var outer []int
	for k := 0; k < n; k++ {
		if k != pAxis && k != last {
			outer = append(outer, k)
		}
	}
	idx := make([]int, len(outer))
	dBase, sBase := 0, 0
	for {
		f(dst, src, dBase, rowStride, sBase, colStride, rows, cols)
		j := len(outer) - 1
		for ; j >= 0; j-- {
			k := outer[j]
			idx[j]++
			dBase += dstStride[k]
			sBase += srcStride[p.perm[k]]
			if idx[j] < outShape[k] {
				break
			}
			dBase -= idx[j] * dstStride[k]
			sBase -= idx[j] * srcStride[p.perm[k]]
			idx[j] = 0
		}
		if j < 0 {
			return
		}
	}
}
