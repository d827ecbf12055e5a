package codec

import (
	"bytes"
	"encoding/json"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"slices"
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
		permute(p, dst, src, tile[byte])
		return true
	case 2:
		return permuteAs[uint16](p, dst, src)
	case 4:
		return permuteAs[uint32](p, dst, src)
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
