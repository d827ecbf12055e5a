package blosc

import "encoding/binary"

// Byte shuffle: a block of n = len/ts elements is stored as ts planes of n
// bytes, plane j holding byte j of every element; the len%ts trailing bytes
// are copied unchanged. The kernels below move 8 elements at a time through
// 64-bit words instead of byte by byte: 2-byte types with bit spreading,
// typesizes that are multiples of 4 or 8 with in-register byte transposes.

var le = binary.LittleEndian

// shuffle writes the byte-shuffled form of src (one block) to dst.
func shuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	done := 0 // elements handled by a fast kernel
	switch {
	case ts == 1:
		copy(dst, src)
		return
	case ts == 2:
		done = shuffle2(dst, src, n)
	case ts%8 == 0:
		done = shuffle8x(dst, src, n, ts)
	case ts%4 == 0:
		done = shuffle4x(dst, src, n, ts)
	}
	for j := range ts {
		plane := dst[j*n : j*n+n]
		for i := done; i < n; i++ {
			plane[i] = src[i*ts+j]
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// unshuffle reverses shuffle.
func unshuffle(dst, src []byte, ts int) {
	if ts == 1 {
		copy(dst, src)
		return
	}
	n := len(src) / ts
	done := unshuffleSIMD(dst, src, n, ts) // elements handled by a fast kernel
	if done == 0 {
		switch {
		case ts == 2:
			done = unshuffle2(dst, src, n)
		case ts%8 == 0:
			done = unshuffle8x(dst, src, n, ts)
		case ts%4 == 0:
			done = unshuffle4x(dst, src, n, ts)
		}
	}
	for j := range ts {
		plane := src[j*n : j*n+n]
		for i := done; i < n; i++ {
			dst[i*ts+j] = plane[i]
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// spreadBytes moves the 4 bytes of x to the even byte positions of a word.
func spreadBytes(x uint32) uint64 {
	v := uint64(x)
	v = (v | v<<16) & 0x0000FFFF0000FFFF
	return (v | v<<8) & 0x00FF00FF00FF00FF
}

// gatherBytes is the inverse of spreadBytes: it collects the even bytes.
func gatherBytes(v uint64) uint32 {
	v &= 0x00FF00FF00FF00FF
	v = (v | v>>8) & 0x0000FFFF0000FFFF
	return uint32(v | v>>16)
}

// The kernels advance slices instead of indexing so the compiler can drop
// most bounds checks.

func unshuffle2(dst, src []byte, n int) int {
	n8 := n &^ 7
	p0, p1, o := src[:n8], src[n:n+n8], dst[:2*n8]
	for len(p0) >= 8 && len(p1) >= 8 && len(o) >= 16 {
		a, b := le.Uint64(p0), le.Uint64(p1)
		le.PutUint64(o, spreadBytes(uint32(a))|spreadBytes(uint32(b))<<8)
		le.PutUint64(o[8:], spreadBytes(uint32(a>>32))|spreadBytes(uint32(b>>32))<<8)
		p0, p1, o = p0[8:], p1[8:], o[16:]
	}
	return n8
}

func shuffle2(dst, src []byte, n int) int {
	n8 := n &^ 7
	p0, p1, s := dst[:n8], dst[n:n+n8], src[:2*n8]
	for len(p0) >= 8 && len(p1) >= 8 && len(s) >= 16 {
		x, y := le.Uint64(s), le.Uint64(s[8:])
		le.PutUint64(p0, uint64(gatherBytes(x))|uint64(gatherBytes(y))<<32)
		le.PutUint64(p1, uint64(gatherBytes(x>>8))|uint64(gatherBytes(y>>8))<<32)
		p0, p1, s = p0[8:], p1[8:], s[16:]
	}
	return n8
}

// transpose4 transposes the 4x4 byte matrices held in the low and the high
// halves of the rows a0..a3 (byte c of row r swaps with byte r of row c).
func transpose4(a0, a1, a2, a3 uint64) (uint64, uint64, uint64, uint64) {
	const m16, m8 = 0x0000FFFF0000FFFF, 0x00FF00FF00FF00FF
	t := (a0>>16 ^ a2) & m16
	a0, a2 = a0^t<<16, a2^t
	t = (a1>>16 ^ a3) & m16
	a1, a3 = a1^t<<16, a3^t
	t = (a0>>8 ^ a1) & m8
	a0, a1 = a0^t<<8, a1^t
	t = (a2>>8 ^ a3) & m8
	a2, a3 = a2^t<<8, a3^t
	return a0, a1, a2, a3
}

// unshuffle4x handles typesizes that are multiples of 4: four planes by
// eight elements per step.
func unshuffle4x(dst, src []byte, n, ts int) int {
	n8 := n &^ 7
	if n8 == 0 {
		return 0
	}
	for j := 0; j < ts; j += 4 {
		p := src[j*n : (j+4)*n]
		p0, p1, p2, p3 := p[:n8], p[n:n+n8], p[2*n:2*n+n8], p[3*n:3*n+n8]
		o := dst[j:]
		for len(p0) >= 8 && len(p1) >= 8 && len(p2) >= 8 && len(p3) >= 8 {
			a0, a1, a2, a3 := transpose4(le.Uint64(p0), le.Uint64(p1), le.Uint64(p2), le.Uint64(p3))
			// Row c now holds element c (low half) and element 4+c (high half).
			if ts == 4 {
				o := o[:32]
				le.PutUint64(o, a0&0xFFFFFFFF|a1<<32)
				le.PutUint64(o[8:], a2&0xFFFFFFFF|a3<<32)
				le.PutUint64(o[16:], a0>>32|a1&^0xFFFFFFFF)
				le.PutUint64(o[24:], a2>>32|a3&^0xFFFFFFFF)
			} else {
				le.PutUint32(o, uint32(a0))
				le.PutUint32(o[ts:], uint32(a1))
				le.PutUint32(o[2*ts:], uint32(a2))
				le.PutUint32(o[3*ts:], uint32(a3))
				le.PutUint32(o[4*ts:], uint32(a0>>32))
				le.PutUint32(o[5*ts:], uint32(a1>>32))
				le.PutUint32(o[6*ts:], uint32(a2>>32))
				le.PutUint32(o[7*ts:], uint32(a3>>32))
			}
			o = o[min(8*ts, len(o)):]
			p0, p1, p2, p3 = p0[8:], p1[8:], p2[8:], p3[8:]
		}
	}
	return n8
}

func shuffle4x(dst, src []byte, n, ts int) int {
	n8 := n &^ 7
	if n8 == 0 {
		return 0
	}
	for j := 0; j < ts; j += 4 {
		p := dst[j*n : (j+4)*n]
		p0, p1, p2, p3 := p[:n8], p[n:n+n8], p[2*n:2*n+n8], p[3*n:3*n+n8]
		s := src[j:]
		for len(p0) >= 8 && len(p1) >= 8 && len(p2) >= 8 && len(p3) >= 8 {
			a0, a1, a2, a3 := transpose4(
				uint64(le.Uint32(s))|uint64(le.Uint32(s[4*ts:]))<<32,
				uint64(le.Uint32(s[ts:]))|uint64(le.Uint32(s[5*ts:]))<<32,
				uint64(le.Uint32(s[2*ts:]))|uint64(le.Uint32(s[6*ts:]))<<32,
				uint64(le.Uint32(s[3*ts:]))|uint64(le.Uint32(s[7*ts:]))<<32)
			le.PutUint64(p0, a0)
			le.PutUint64(p1, a1)
			le.PutUint64(p2, a2)
			le.PutUint64(p3, a3)
			s = s[min(8*ts, len(s)):]
			p0, p1, p2, p3 = p0[8:], p1[8:], p2[8:], p3[8:]
		}
	}
	return n8
}

// transpose8 transposes the 8x8 byte matrix whose rows are a0..a7.
func transpose8(a0, a1, a2, a3, a4, a5, a6, a7 uint64) (uint64, uint64, uint64, uint64, uint64, uint64, uint64, uint64) {
	const m32, m16, m8 = 0x00000000FFFFFFFF, 0x0000FFFF0000FFFF, 0x00FF00FF00FF00FF
	t := (a0>>32 ^ a4) & m32
	a0, a4 = a0^t<<32, a4^t
	t = (a1>>32 ^ a5) & m32
	a1, a5 = a1^t<<32, a5^t
	t = (a2>>32 ^ a6) & m32
	a2, a6 = a2^t<<32, a6^t
	t = (a3>>32 ^ a7) & m32
	a3, a7 = a3^t<<32, a7^t
	a0, a1, a2, a3 = transpose4(a0, a1, a2, a3)
	a4, a5, a6, a7 = transpose4(a4, a5, a6, a7)
	return a0, a1, a2, a3, a4, a5, a6, a7
}

// unshuffle8x handles typesizes that are multiples of 8: eight planes by
// eight elements per step.
func unshuffle8x(dst, src []byte, n, ts int) int {
	n8 := n &^ 7
	if n8 == 0 {
		return 0
	}
	for j := 0; j < ts; j += 8 {
		p := src[j*n : (j+8)*n]
		p0, p1, p2, p3 := p[:n8], p[n:n+n8], p[2*n:2*n+n8], p[3*n:3*n+n8]
		p4, p5, p6, p7 := p[4*n:4*n+n8], p[5*n:5*n+n8], p[6*n:6*n+n8], p[7*n:7*n+n8]
		o := dst[j:]
		for len(p0) >= 8 && len(p1) >= 8 && len(p2) >= 8 && len(p3) >= 8 &&
			len(p4) >= 8 && len(p5) >= 8 && len(p6) >= 8 && len(p7) >= 8 {
			a0, a1, a2, a3, a4, a5, a6, a7 := transpose8(le.Uint64(p0), le.Uint64(p1), le.Uint64(p2), le.Uint64(p3),
				le.Uint64(p4), le.Uint64(p5), le.Uint64(p6), le.Uint64(p7))
			if ts == 8 {
				o := o[:64]
				le.PutUint64(o, a0)
				le.PutUint64(o[8:], a1)
				le.PutUint64(o[16:], a2)
				le.PutUint64(o[24:], a3)
				le.PutUint64(o[32:], a4)
				le.PutUint64(o[40:], a5)
				le.PutUint64(o[48:], a6)
				le.PutUint64(o[56:], a7)
			} else {
				le.PutUint64(o, a0)
				le.PutUint64(o[ts:], a1)
				le.PutUint64(o[2*ts:], a2)
				le.PutUint64(o[3*ts:], a3)
				le.PutUint64(o[4*ts:], a4)
				le.PutUint64(o[5*ts:], a5)
				le.PutUint64(o[6*ts:], a6)
				le.PutUint64(o[7*ts:], a7)
			}
			o = o[min(8*ts, len(o)):]
			p0, p1, p2, p3, p4, p5, p6, p7 = p0[8:], p1[8:], p2[8:], p3[8:], p4[8:], p5[8:], p6[8:], p7[8:]
		}
	}
	return n8
}

func shuffle8x(dst, src []byte, n, ts int) int {
	n8 := n &^ 7
	if n8 == 0 {
		return 0
	}
	for j := 0; j < ts; j += 8 {
		p := dst[j*n : (j+8)*n]
		p0, p1, p2, p3 := p[:n8], p[n:n+n8], p[2*n:2*n+n8], p[3*n:3*n+n8]
		p4, p5, p6, p7 := p[4*n:4*n+n8], p[5*n:5*n+n8], p[6*n:6*n+n8], p[7*n:7*n+n8]
		s := src[j:]
		for len(p0) >= 8 && len(p1) >= 8 && len(p2) >= 8 && len(p3) >= 8 &&
			len(p4) >= 8 && len(p5) >= 8 && len(p6) >= 8 && len(p7) >= 8 {
			a0, a1, a2, a3, a4, a5, a6, a7 := transpose8(le.Uint64(s), le.Uint64(s[ts:]), le.Uint64(s[2*ts:]), le.Uint64(s[3*ts:]),
				le.Uint64(s[4*ts:]), le.Uint64(s[5*ts:]), le.Uint64(s[6*ts:]), le.Uint64(s[7*ts:]))
			le.PutUint64(p0, a0)
			le.PutUint64(p1, a1)
			le.PutUint64(p2, a2)
			le.PutUint64(p3, a3)
			le.PutUint64(p4, a4)
			le.PutUint64(p5, a5)
			le.PutUint64(p6, a6)
			le.PutUint64(p7, a7)
			s = s[min(8*ts, len(s)):]
			p0, p1, p2, p3, p4, p5, p6, p7 = p0[8:], p1[8:], p2[8:], p3[8:], p4[8:], p5[8:], p6[8:], p7[8:]
		}
	}
	return n8
}
