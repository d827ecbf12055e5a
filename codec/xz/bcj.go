package xz

import "encoding/binary"

// The branch/call/jump (BCJ) filters of liblzma: each rewrites the
// relative target addresses of one processor's call or branch
// instructions as absolute ones, which compress better, and back. They
// convert a buffer in place, pos being the position of its first byte in
// the filtered data (the filter's start offset plus what came before);
// bytes too close to the end to hold a whole instruction stay as they are,
// as liblzma leaves them at the end of its output.

// bcj is one BCJ filter: it converts buf, encoding or decoding.
type bcj func(buf []byte, pos uint32, encode bool)

// bcjFilters are the BCJ filters by xz filter id.
var bcjFilters = map[uint64]bcj{
	IDX86:      x86,
	IDPowerPC:  powerPC,
	IDIA64:     ia64,
	IDARM:      arm,
	IDARMThumb: armThumb,
	IDSPARC:    sparc,
}

// relocate converts a target address read at pos: relative to absolute
// when encoding, back when decoding.
func relocate(v, pos uint32, encode bool) uint32 {
	if encode {
		return v + pos
	}
	return v - pos
}

// x86 converts the 32-bit displacements of E8 (call) and E9 (jmp)
// instructions. Whether a byte E8/E9 starts an instruction is guessed from
// the bytes around it: prevMask records which of the previous bytes were
// E8/E9 opcodes that were not converted (bit k: k+1 bytes back) and, in
// bit 4, whether such an opcode's displacement looked like one (its high
// byte 00 or FF).
func x86(buf []byte, pos uint32, encode bool) {
	if len(buf) < 5 {
		return
	}
	allowed := [8]bool{true, true, true, false, true, false, false, false}
	bitNumber := [8]uint32{0, 1, 2, 2, 3, 3, 3, 3}
	isDisplacementByte := func(b byte) bool { return b == 0 || b == 0xff }
	var prevMask uint32
	prevPos := pos - 5
	for i := 0; i <= len(buf)-5; {
		b := buf[i]
		if b != 0xe8 && b != 0xe9 {
			i++
			continue
		}
		here := pos + uint32(i)
		if gap := here - prevPos; gap > 5 {
			prevMask = 0
		} else {
			for range gap {
				prevMask = (prevMask & 0x77) << 1
			}
		}
		prevPos = here
		b = buf[i+4]
		if !isDisplacementByte(b) || !allowed[(prevMask>>1)&7] || prevMask>>1 >= 0x10 {
			i++
			prevMask |= 1
			if isDisplacementByte(b) {
				prevMask |= 0x10
			}
			continue
		}
		src := binary.LittleEndian.Uint32(buf[i+1:])
		var dest uint32
		for {
			dest = relocate(src, here+5, encode)
			if prevMask == 0 {
				break
			}
			shift := 24 - 8*bitNumber[(prevMask>>1)&7]
			if !isDisplacementByte(byte(dest >> shift)) {
				break
			}
			src = dest ^ (1<<(shift+8) - 1)
		}
		// The high byte repeats bit 24, as a sign extension.
		dest = dest&0x00ffffff | -(dest>>24&1)<<24
		binary.LittleEndian.PutUint32(buf[i+1:], dest)
		i += 5
		prevMask = 0
	}
}

// powerPC converts the targets of big-endian "bl" instructions (opcode 18
// with AA=0, LK=1).
func powerPC(buf []byte, pos uint32, encode bool) {
	for i := 0; i+4 <= len(buf); i += 4 {
		w := binary.BigEndian.Uint32(buf[i:])
		if w>>26 != 0x12 || w&3 != 1 {
			continue
		}
		dest := relocate(w&0x03fffffc, pos+uint32(i), encode)
		binary.BigEndian.PutUint32(buf[i:], 0x48000000|dest&0x03ffffff|w&3)
	}
}

// arm converts the targets of little-endian BL instructions (condition
// "always"): a 24-bit word offset from the instruction's address + 8.
func arm(buf []byte, pos uint32, encode bool) {
	for i := 0; i+4 <= len(buf); i += 4 {
		if buf[i+3] != 0xeb {
			continue
		}
		src := (uint32(buf[i+2])<<16 | uint32(buf[i+1])<<8 | uint32(buf[i])) << 2
		dest := relocate(src, pos+uint32(i)+8, encode) >> 2
		buf[i], buf[i+1], buf[i+2] = byte(dest), byte(dest>>8), byte(dest>>16)
	}
}

// armThumb converts the targets of Thumb BL instruction pairs: a 22-bit
// halfword offset from the pair's address + 4, split over two halfwords.
func armThumb(buf []byte, pos uint32, encode bool) {
	for i := 0; i+4 <= len(buf); i += 2 {
		if buf[i+1]&0xf8 != 0xf0 || buf[i+3]&0xf8 != 0xf8 {
			continue
		}
		src := (uint32(buf[i+1]&7)<<19 | uint32(buf[i])<<11 | uint32(buf[i+3]&7)<<8 | uint32(buf[i+2])) << 1
		dest := relocate(src, pos+uint32(i)+4, encode) >> 1
		buf[i+1] = 0xf0 | byte(dest>>19&7)
		buf[i] = byte(dest >> 11)
		buf[i+3] = 0xf8 | byte(dest>>8&7)
		buf[i+2] = byte(dest)
		i += 2
	}
}

// sparc converts the targets of big-endian "call" instructions whose
// 30-bit displacement fits in 23 bits (sign-extended).
func sparc(buf []byte, pos uint32, encode bool) {
	for i := 0; i+4 <= len(buf); i += 4 {
		if !(buf[i] == 0x40 && buf[i+1]&0xc0 == 0) && !(buf[i] == 0x7f && buf[i+1]&0xc0 == 0xc0) {
			continue
		}
		src := binary.BigEndian.Uint32(buf[i:]) << 2
		dest := relocate(src, pos+uint32(i), encode) >> 2
		dest = -(dest>>22&1)<<22&0x3fffffff | dest&0x3fffff | 0x40000000
		binary.BigEndian.PutUint32(buf[i:], dest)
	}
}

// ia64Branches says, by the template of a 16-byte IA-64 bundle, which of
// its three 41-bit slots hold branch instructions (bit k: slot k).
var ia64Branches = [32]uint32{
	0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0,
	4, 4, 6, 6, 0, 0, 7, 7,
	4, 4, 0, 0, 4, 4, 0, 0,
}

// ia64 converts the 21-bit bundle offsets of IP-relative branches (opcode
// 5, btype 0) in the branch slots of each bundle.
func ia64(buf []byte, pos uint32, encode bool) {
	for i := 0; i+16 <= len(buf); i += 16 {
		mask := ia64Branches[buf[i]&0x1f]
		for slot, bitPos := 0, 5; slot < 3; slot, bitPos = slot+1, bitPos+41 {
			if mask>>slot&1 == 0 {
				continue
			}
			at, shift := i+bitPos>>3, uint(bitPos&7)
			var instr uint64
			for j := range 6 {
				instr |= uint64(buf[at+j]) << (8 * j)
			}
			norm := instr >> shift
			if norm>>37&0xf != 5 || norm>>9&7 != 0 {
				continue
			}
			src := uint32(norm>>13&0xfffff) | uint32(norm>>36&1)<<20
			dest := relocate(src<<4, pos+uint32(i), encode) >> 4
			norm &^= 0x8fffff << 13
			norm |= uint64(dest&0xfffff)<<13 | uint64(dest&0x100000)<<(36-20)
			instr = instr&(1<<shift-1) | norm<<shift
			for j := range 6 {
				buf[at+j] = byte(instr >> (8 * j))
			}
		}
	}
}

// delta converts bytes to (encode) or from their difference to the byte
// distance bytes earlier; bytes before the start count as zero.
func delta(buf []byte, distance int, encode bool) {
	if encode {
		for i := len(buf) - 1; i >= distance; i-- {
			buf[i] -= buf[i-distance]
		}
		return
	}
	for i := distance; i < len(buf); i++ {
		buf[i] += buf[i-distance]
	}
}
