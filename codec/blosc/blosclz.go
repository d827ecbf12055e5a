package blosc

import (
	"fmt"
	"math/bits"
)

// blosclz is c-blosc's FastLZ-derived LZ77 format. A stream is a sequence of
// tokens, each starting with a control byte ctrl:
//
//   - ctrl < 32: a literal run of ctrl+1 bytes follows.
//   - otherwise a match of length (ctrl>>5)+2; when ctrl>>5 == 7 the length
//     is extended by the following bytes, each added, until one is not 255.
//     Then a byte code: the match starts ((ctrl&31)<<8)+code+1 bytes back.
//     When code == 255 and ctrl&31 == 31 (a distance of 8192, which the
//     short form cannot mean), a 16-bit big-endian value v follows and the
//     match starts v+8192 bytes back. Matches may overlap their output.
//
// The first control byte is read modulo 32 (FastLZ stores its level in the
// top bits), so a stream always starts with literals.
const (
	blzMaxLiteral     = 32
	blzMaxNear        = 8191                    // longest distance of the 2-byte form
	blzMaxFar         = blzMaxNear + 1 + 0xFFFF // longest distance of the 4-byte form
	blzMinFarMatch    = 7                       // a far match costs 4+ bytes; shorter ones do not pay
	blzMinInput       = 16                      // shorter splits are stored raw
	blzMinMatch       = 4
	blzLiteralTail    = 8 // no match starts this close to the end (keeps 4-byte loads in bounds)
	blzMaxTableLog    = 16
	blzMinTableLog    = 10
	blzHashMultiplier = 2654435761
)

func blzError(format string, args ...any) error {
	return fmt.Errorf("blosclz: "+format, args...)
}

// blosclzDecode decodes src into dst and returns the number of bytes written.
// It never writes past len(dst); output that does not fit is an error.
// Tokens far enough from the ends of src and dst are copied 8 bytes at a
// time, possibly writing garbage past the token that later tokens overwrite.
func blosclzDecode(dst, src []byte) (int, error) {
	if len(src) == 0 {
		return 0, blzError("empty input")
	}
	ip, op := 1, 0
	ctrl := int(src[0] & 31)
	for {
		if ctrl < 32 {
			n := ctrl + 1
			if n > len(src)-ip {
				return op, blzError("literal run of %d at input %d overruns input of %d", n, ip, len(src))
			}
			if n > len(dst)-op {
				return op, blzError("literal run of %d at output %d overruns output of %d", n, op, len(dst))
			}
			if ip+blzMaxLiteral <= len(src) && op+blzMaxLiteral <= len(dst) {
				d, s := dst[op:op+blzMaxLiteral], src[ip:ip+blzMaxLiteral]
				le.PutUint64(d, le.Uint64(s))
				le.PutUint64(d[8:], le.Uint64(s[8:]))
				le.PutUint64(d[16:], le.Uint64(s[16:]))
				le.PutUint64(d[24:], le.Uint64(s[24:]))
			} else {
				copy(dst[op:op+n], src[ip:ip+n])
			}
			op += n
			ip += n
		} else {
			length := ctrl>>5 + 2
			if ctrl>>5 == 7 {
				for {
					if ip >= len(src) {
						return op, blzError("truncated match length at input %d", ip)
					}
					c := src[ip]
					ip++
					length += int(c)
					if length > len(dst) {
						return op, blzError("match length %d exceeds output of %d", length, len(dst))
					}
					if c != 255 {
						break
					}
				}
			}
			if ip >= len(src) {
				return op, blzError("truncated match distance at input %d", ip)
			}
			code := int(src[ip])
			ip++
			dist := (ctrl&31)<<8 + code + 1
			if dist == blzMaxNear+1 {
				if len(src)-ip < 2 {
					return op, blzError("truncated far distance at input %d", ip)
				}
				dist = int(src[ip])<<8 | int(src[ip+1]) + blzMaxNear + 1
				ip += 2
			}
			if dist > op {
				return op, blzError("match distance %d at output %d reaches before the start", dist, op)
			}
			if length > len(dst)-op {
				return op, blzError("match of %d at output %d overruns output of %d", length, op, len(dst))
			}
			copyMatch(dst, op, dist, length)
			op += length
		}
		if ip >= len(src) {
			return op, nil
		}
		ctrl = int(src[ip])
		ip++
	}
}

// copyMatch copies length bytes starting dist bytes before op to op. The
// regions may overlap, which repeats the last dist bytes.
func copyMatch(dst []byte, op, dist, length int) {
	ref := op - dist
	end := op + length
	switch {
	case dist >= 8 && end+8 <= len(dst):
		// Each 8-byte step reads bytes at least 8 behind, already final.
		for op < end {
			le.PutUint64(dst[op:], le.Uint64(dst[ref:]))
			op += 8
			ref += 8
		}
	case dist == 1 && end+8 <= len(dst):
		v := uint64(dst[ref]) * 0x0101010101010101
		for ; op < end; op += 8 {
			le.PutUint64(dst[op:], v)
		}
	case dist >= length:
		copy(dst[op:end], dst[ref:])
	default:
		// Copy the growing already-written window: O(log) copy calls.
		for op < end {
			op += copy(dst[op:end], dst[ref:op])
		}
	}
}

// blzEncoder holds the hash table of a blosclz compressor. It is pooled.
type blzEncoder struct {
	table []int32 // position+1 of the last 4-byte sequence with this hash; 0 = none
}

// blzParams maps a clevel to the table size limit and to how quickly the
// search skips ahead through data that does not match: after 1<<skipLog
// failed probes the step grows by one (as LZ4 does).
func blzParams(level int) (maxLog, skipLog uint) {
	switch {
	case level <= 3:
		return 12, 5
	case level <= 6:
		return 14, 6
	}
	return blzMaxTableLog, 62 // never skip
}

// encode compresses src into dst and returns the compressed length, or 0
// when the result would not fit in dst (the caller then stores src raw).
func (e *blzEncoder) encode(dst, src []byte, level int) int {
	n := len(src)
	if n < blzMinInput {
		return 0
	}
	maxLog, skipLog := blzParams(level)
	tableLog := uint(bits.Len(uint(n)))
	tableLog = max(min(tableLog, maxLog), blzMinTableLog)
	if cap(e.table) < 1<<tableLog {
		e.table = make([]int32, 1<<blzMaxTableLog)
	}
	table := e.table[:1<<tableLog]
	clear(table)
	shift := 32 - tableLog
	hash := func(p int) uint32 { return le.Uint32(src[p:]) * blzHashMultiplier >> shift }

	ipLimit := n - blzLiteralTail // last position where a match may start
	matchEnd := n - 1             // so the stream ends in literals, which c-blosc requires
	op, anchor, ip, misses := 0, 0, 0, 0
	for ip < ipLimit {
		seq := le.Uint32(src[ip:])
		h := seq * blzHashMultiplier >> shift
		cand := int(table[h]) - 1
		table[h] = int32(ip + 1)
		if cand < 0 || ip-cand > blzMaxFar || le.Uint32(src[cand:]) != seq {
			ip += 1 + misses>>skipLog
			misses++
			continue
		}
		length := blzMinMatch + matchLen(src[cand+blzMinMatch:], src[ip+blzMinMatch:matchEnd])
		if ip-cand > blzMaxNear && length < blzMinFarMatch {
			ip++
			continue
		}
		for ip > anchor && cand > 0 && src[ip-1] == src[cand-1] {
			ip--
			cand--
			length++
		}
		if op = emitLiterals(dst, op, src[anchor:ip]); op < 0 {
			return 0
		}
		if op = emitMatch(dst, op, ip-cand, length); op < 0 {
			return 0
		}
		ip += length
		anchor, misses = ip, 0
		// Index the end of the match so that the next search can find it.
		if ip < ipLimit {
			table[hash(ip-2)] = int32(ip - 1)
			table[hash(ip-1)] = int32(ip)
		}
	}
	if op = emitLiterals(dst, op, src[anchor:]); op < 0 {
		return 0
	}
	return op
}

// matchLen returns the length of the common prefix of a and b; len(a) >= len(b).
func matchLen(a, b []byte) int {
	n := 0
	for len(b)-n >= 8 {
		if x := le.Uint64(a[n:]) ^ le.Uint64(b[n:]); x != 0 {
			return n + bits.TrailingZeros64(x)>>3
		}
		n += 8
	}
	for n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// emitLiterals writes lit as literal tokens and returns the new output
// position, or -1 if dst is too small.
func emitLiterals(dst []byte, op int, lit []byte) int {
	if len(lit)+(len(lit)+blzMaxLiteral-1)/blzMaxLiteral > len(dst)-op {
		return -1
	}
	for len(lit) > 0 {
		k := min(len(lit), blzMaxLiteral)
		dst[op] = byte(k - 1)
		op++
		op += copy(dst[op:], lit[:k])
		lit = lit[k:]
	}
	return op
}

// emitMatch writes a match token and returns the new output position, or -1
// if dst is too small. length >= 3 and 1 <= dist <= blzMaxFar.
func emitMatch(dst []byte, op, dist, length int) int {
	l := length - 2
	far := dist > blzMaxNear
	need := 2 + (l+1)/255 + 1 // generous: control, extension bytes, code
	if far {
		need += 2
	}
	if need > len(dst)-op {
		return -1
	}
	var d int
	if far {
		d = 31<<8 | 255
	} else {
		d = dist - 1
	}
	dst[op] = byte(min(l, 7)<<5 | d>>8)
	op++
	if l >= 7 {
		for l -= 7; l >= 255; l -= 255 {
			dst[op] = 255
			op++
		}
		dst[op] = byte(l)
		op++
	}
	dst[op] = byte(d)
	op++
	if far {
		v := dist - blzMaxNear - 1
		dst[op] = byte(v >> 8)
		dst[op+1] = byte(v)
		op += 2
	}
	return op
}
