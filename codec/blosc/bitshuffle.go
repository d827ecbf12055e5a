package blosc

// Bitshuffle (the bitshuffle library's bit-transpose-within-elements, as used
// by c-blosc): a block of n elements of ts bytes becomes 8*ts rows of n bits.
// Row 8*j+k holds bit k of byte j of every element, element i at bit i%8 of
// byte i/8 of the row. c-blosc only transposes when n is a multiple of 8;
// otherwise the block is copied unchanged. Trailing len%ts bytes are copied.
//
// The transform is done as a byte shuffle (planes of byte j) followed by an
// 8x8 bit transpose of every 8 bytes of a plane, which is how the kernels
// below stay word-at-a-time.

// bitShuffled reports whether a block of bsize bytes is actually
// bit-transposed, as opposed to stored unchanged.
func bitShuffled(bsize, ts int) bool {
	n := bsize / ts
	return n > 0 && n%8 == 0
}

// transposeBits transposes the 8x8 bit matrix in x whose row r is byte r:
// bit c of byte r moves to bit r of byte c (Hacker's Delight, 7-3).
func transposeBits(x uint64) uint64 {
	t := (x ^ x>>7) & 0x00AA00AA00AA00AA
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000CCCC0000CCCC
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000F0F0F0F0
	return x ^ t ^ t<<28
}

// bitshuffle writes the bit-shuffled form of src to dst. tmp must be at least
// len(src) long when ts > 1.
func bitshuffle(dst, src, tmp []byte, ts int) {
	if !bitShuffled(len(src), ts) {
		copy(dst, src)
		return
	}
	n := len(src) / ts
	planes := src[:n*ts]
	if ts > 1 {
		planes = tmp[:n*ts]
		shuffle(planes, src[:n*ts], ts)
	}
	for j := range ts {
		planeToBitRows(dst[j*n:j*n+n], planes[j*n:j*n+n])
	}
	copy(dst[n*ts:], src[n*ts:])
}

// bitunshuffle reverses bitshuffle. tmp must be at least len(src) long when
// ts > 1.
func bitunshuffle(dst, src, tmp []byte, ts int) {
	if !bitShuffled(len(src), ts) {
		copy(dst, src)
		return
	}
	n := len(src) / ts
	planes := dst[:n*ts]
	if ts > 1 {
		planes = tmp[:n*ts]
	}
	for j := range ts {
		bitRowsToPlane(planes[j*n:j*n+n], src[j*n:j*n+n])
	}
	if ts > 1 {
		unshuffle(dst[:n*ts], planes, ts)
	}
	copy(dst[n*ts:], src[n*ts:])
}

// bitRowsToPlane rebuilds one byte plane of n bytes from its 8 bit rows of
// n/8 bytes each, stored consecutively in rows.
func bitRowsToPlane(plane, rows []byte) {
	nb := len(plane) / 8
	g0 := bitRowsToPlaneSIMD(plane, rows) // octets done by a vector kernel
	g := nb &^ 7
	r0, r1, r2, r3 := rows[g0:g], rows[nb+g0:nb+g], rows[2*nb+g0:2*nb+g], rows[3*nb+g0:3*nb+g]
	r4, r5, r6, r7 := rows[4*nb+g0:4*nb+g], rows[5*nb+g0:5*nb+g], rows[6*nb+g0:6*nb+g], rows[7*nb+g0:7*nb+g]
	out := plane[8*g0 : 8*g]
	// 64 elements per step: one word from each row, a byte transpose to
	// regroup them by element octet, then a bit transpose per octet.
	for len(r0) >= 8 && len(r1) >= 8 && len(r2) >= 8 && len(r3) >= 8 &&
		len(r4) >= 8 && len(r5) >= 8 && len(r6) >= 8 && len(r7) >= 8 && len(out) >= 64 {
		a0, a1, a2, a3, a4, a5, a6, a7 := transpose8(le.Uint64(r0), le.Uint64(r1), le.Uint64(r2), le.Uint64(r3),
			le.Uint64(r4), le.Uint64(r5), le.Uint64(r6), le.Uint64(r7))
		le.PutUint64(out, transposeBits(a0))
		le.PutUint64(out[8:], transposeBits(a1))
		le.PutUint64(out[16:], transposeBits(a2))
		le.PutUint64(out[24:], transposeBits(a3))
		le.PutUint64(out[32:], transposeBits(a4))
		le.PutUint64(out[40:], transposeBits(a5))
		le.PutUint64(out[48:], transposeBits(a6))
		le.PutUint64(out[56:], transposeBits(a7))
		r0, r1, r2, r3, r4, r5, r6, r7 = r0[8:], r1[8:], r2[8:], r3[8:], r4[8:], r5[8:], r6[8:], r7[8:]
		out = out[64:]
	}
	for ; g < nb; g++ {
		var x uint64
		for k := range 8 {
			x |= uint64(rows[k*nb+g]) << (8 * k)
		}
		le.PutUint64(plane[8*g:], transposeBits(x))
	}
}

// planeToBitRows is the inverse of bitRowsToPlane.
func planeToBitRows(rows, plane []byte) {
	nb := len(plane) / 8
	g := nb &^ 7
	r0, r1, r2, r3 := rows[:g], rows[nb:nb+g], rows[2*nb:2*nb+g], rows[3*nb:3*nb+g]
	r4, r5, r6, r7 := rows[4*nb:4*nb+g], rows[5*nb:5*nb+g], rows[6*nb:6*nb+g], rows[7*nb:7*nb+g]
	in := plane[:8*g]
	for len(r0) >= 8 && len(r1) >= 8 && len(r2) >= 8 && len(r3) >= 8 &&
		len(r4) >= 8 && len(r5) >= 8 && len(r6) >= 8 && len(r7) >= 8 && len(in) >= 64 {
		a0, a1, a2, a3, a4, a5, a6, a7 := transpose8(
			transposeBits(le.Uint64(in)), transposeBits(le.Uint64(in[8:])),
			transposeBits(le.Uint64(in[16:])), transposeBits(le.Uint64(in[24:])),
			transposeBits(le.Uint64(in[32:])), transposeBits(le.Uint64(in[40:])),
			transposeBits(le.Uint64(in[48:])), transposeBits(le.Uint64(in[56:])))
		le.PutUint64(r0, a0)
		le.PutUint64(r1, a1)
		le.PutUint64(r2, a2)
		le.PutUint64(r3, a3)
		le.PutUint64(r4, a4)
		le.PutUint64(r5, a5)
		le.PutUint64(r6, a6)
		le.PutUint64(r7, a7)
		r0, r1, r2, r3, r4, r5, r6, r7 = r0[8:], r1[8:], r2[8:], r3[8:], r4[8:], r5[8:], r6[8:], r7[8:]
		in = in[64:]
	}
	for ; g < nb; g++ {
		x := transposeBits(le.Uint64(plane[8*g:]))
		for k := range 8 {
			rows[k*nb+g] = byte(x >> (8 * k))
		}
	}
}
