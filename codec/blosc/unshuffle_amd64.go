//go:build !purego

package blosc

// SSE2 (part of every amd64 CPU) interleaves 16 elements per step; the
// scalar kernels reach about a third of its speed, and unshuffling was the
// largest cost of decoding 2-byte data with fast codecs.

// unshuffle2SSE2 interleaves planes p0 and p1 (16*n bytes each) into dst.
//
//go:noescape
func unshuffle2SSE2(dst, p0, p1 *byte, n int)

// unshuffle4SSE2 interleaves the four planes starting at p, stride apart
// (16*n bytes each), into dst.
//
//go:noescape
func unshuffle4SSE2(dst, p *byte, stride, n int)

// unshuffle8SSE2 is unshuffle4SSE2 for eight planes.
//
//go:noescape
func unshuffle8SSE2(dst, p *byte, stride, n int)

// bitRowsToPlaneSSE2 rebuilds 128*n bytes of a byte plane from its eight
// bit rows, which start at rows, stride apart.
//
//go:noescape
func bitRowsToPlaneSSE2(dst, rows *byte, stride, n int)

// bitRowsToPlaneSIMD rebuilds the first 8*(nb&^15) bytes of plane from its
// bit rows (nb = len(plane)/8 bytes each) and returns how many row bytes
// (element octets) it did.
func bitRowsToPlaneSIMD(plane, rows []byte) int {
	nb := len(plane) / 8
	g16 := nb &^ 15
	if g16 == 0 || len(rows) < 8*nb {
		return 0
	}
	bitRowsToPlaneSSE2(&plane[0], &rows[0], nb, g16/16)
	return g16
}

// unshuffleSIMD unshuffles the first n16 = n&^15 elements when ts is 2, 4
// or 8 and returns how many it did.
func unshuffleSIMD(dst, src []byte, n, ts int) int {
	n16 := n &^ 15
	if n16 == 0 || len(src) < ts*n || len(dst) < ts*n16 {
		return 0
	}
	switch ts {
	case 2:
		unshuffle2SSE2(&dst[0], &src[0], &src[n], n16/16)
	case 4:
		unshuffle4SSE2(&dst[0], &src[0], n, n16/16)
	case 8:
		unshuffle8SSE2(&dst[0], &src[0], n, n16/16)
	default:
		return 0
	}
	return n16
}
