//go:build !purego

#include "textflag.h"

// func unshuffle2SSE2(dst, p0, p1 *byte, n int)
TEXT ·unshuffle2SSE2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ p0+8(FP), SI
	MOVQ p1+16(FP), DX
	MOVQ n+24(FP), CX

loop2:
	MOVOU (SI), X0
	MOVOU (DX), X1
	MOVO  X0, X2
	PUNPCKLBW X1, X0 // a0 b0 a1 b1 ... a7 b7
	PUNPCKHBW X1, X2 // a8 b8 ... a15 b15
	MOVOU X0, (DI)
	MOVOU X2, 16(DI)
	ADDQ  $16, SI
	ADDQ  $16, DX
	ADDQ  $32, DI
	DECQ  CX
	JNZ   loop2
	RET

// func unshuffle4SSE2(dst, p *byte, stride, n int)
TEXT ·unshuffle4SSE2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ n+24(FP), CX
	LEAQ (DX)(DX*2), R8 // 3*stride

loop4:
	MOVOU (SI), X0       // plane 0
	MOVOU (SI)(DX*1), X1 // plane 1
	MOVOU (SI)(DX*2), X2 // plane 2
	MOVOU (SI)(R8*1), X3 // plane 3
	// bytes: 01 pairs and 23 pairs
	MOVO  X0, X4
	PUNPCKLBW X1, X0 // 01 for elements 0-7
	PUNPCKHBW X1, X4 // 01 for elements 8-15
	MOVO  X2, X5
	PUNPCKLBW X3, X2 // 23 for elements 0-7
	PUNPCKHBW X3, X5 // 23 for elements 8-15
	// 16-bit units: whole elements
	MOVO  X0, X1
	PUNPCKLWL X2, X0 // elements 0-3
	PUNPCKHWL X2, X1 // elements 4-7
	MOVO  X4, X3
	PUNPCKLWL X5, X4 // elements 8-11
	PUNPCKHWL X5, X3 // elements 12-15
	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	MOVOU X4, 32(DI)
	MOVOU X3, 48(DI)
	ADDQ  $16, SI
	ADDQ  $64, DI
	DECQ  CX
	JNZ   loop4
	RET

// func unshuffle8SSE2(dst, p *byte, stride, n int)
TEXT ·unshuffle8SSE2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ n+24(FP), CX
	LEAQ (DX)(DX*2), R8 // 3*stride
	LEAQ (SI)(DX*4), R9 // planes 4-7 start here

loop8:
	MOVOU (SI), X0
	MOVOU (SI)(DX*1), X1
	MOVOU (SI)(DX*2), X2
	MOVOU (SI)(R8*1), X3
	MOVOU (R9), X4
	MOVOU (R9)(DX*1), X5
	MOVOU (R9)(DX*2), X6
	MOVOU (R9)(R8*1), X7
	// round 1: byte pairs 01, 23, 45, 67 (low: elements 0-7, high: 8-15)
	MOVO  X0, X8
	PUNPCKLBW X1, X0
	PUNPCKHBW X1, X8
	MOVO  X2, X9
	PUNPCKLBW X3, X2
	PUNPCKHBW X3, X9
	MOVO  X4, X10
	PUNPCKLBW X5, X4
	PUNPCKHBW X5, X10
	MOVO  X6, X11
	PUNPCKLBW X7, X6
	PUNPCKHBW X7, X11
	// round 2: 0123 and 4567 quads
	MOVO  X0, X1
	PUNPCKLWL X2, X0 // 0123, elements 0-3
	PUNPCKHWL X2, X1 // 0123, elements 4-7
	MOVO  X8, X3
	PUNPCKLWL X9, X8 // 0123, elements 8-11
	PUNPCKHWL X9, X3 // 0123, elements 12-15
	MOVO  X4, X5
	PUNPCKLWL X6, X4 // 4567, elements 0-3
	PUNPCKHWL X6, X5 // 4567, elements 4-7
	MOVO  X10, X7
	PUNPCKLWL X11, X10 // 4567, elements 8-11
	PUNPCKHWL X11, X7  // 4567, elements 12-15
	// round 3: whole 8-byte elements
	MOVO  X0, X2
	PUNPCKLLQ X4, X0 // elements 0-1
	PUNPCKHLQ X4, X2 // elements 2-3
	MOVO  X1, X6
	PUNPCKLLQ X5, X1 // elements 4-5
	PUNPCKHLQ X5, X6 // elements 6-7
	MOVO  X8, X9
	PUNPCKLLQ X10, X8 // elements 8-9
	PUNPCKHLQ X10, X9 // elements 10-11
	MOVO  X3, X11
	PUNPCKLLQ X7, X3  // elements 12-13
	PUNPCKHLQ X7, X11 // elements 14-15
	MOVOU X0, (DI)
	MOVOU X2, 16(DI)
	MOVOU X1, 32(DI)
	MOVOU X6, 48(DI)
	MOVOU X8, 64(DI)
	MOVOU X9, 80(DI)
	MOVOU X3, 96(DI)
	MOVOU X11, 112(DI)
	ADDQ  $16, SI
	ADDQ  $16, R9
	ADDQ  $128, DI
	DECQ  CX
	JNZ   loop8
	RET

// TRANSPOSE_BITS transposes the 8x8 bit matrix in each 64-bit lane of X
// (see transposeBits), with masks in X12-X14 and T as scratch.
#define TRANSPOSE_BITS(X, T) \
	MOVO X, T; PSRLQ $7, T; PXOR X, T; PAND X12, T; PXOR T, X; PSLLQ $7, T; PXOR T, X; \
	MOVO X, T; PSRLQ $14, T; PXOR X, T; PAND X13, T; PXOR T, X; PSLLQ $14, T; PXOR T, X; \
	MOVO X, T; PSRLQ $28, T; PXOR X, T; PAND X14, T; PXOR T, X; PSLLQ $28, T; PXOR T, X

// func bitRowsToPlaneSSE2(dst, rows *byte, stride, n int)
// Rebuilds 128 plane bytes per step from 16 bytes of each of the 8 bit
// rows (stride apart): a byte transpose as in unshuffle8SSE2 gathers each
// element octet's 8 row bytes into one lane, then a bit transpose per lane.
TEXT ·bitRowsToPlaneSSE2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ rows+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ n+24(FP), CX
	LEAQ (DX)(DX*2), R8
	LEAQ (SI)(DX*4), R9
	MOVQ $0x00AA00AA00AA00AA, AX
	MOVQ AX, X12
	PUNPCKLQDQ X12, X12
	MOVQ $0x0000CCCC0000CCCC, AX
	MOVQ AX, X13
	PUNPCKLQDQ X13, X13
	MOVQ $0x00000000F0F0F0F0, AX
	MOVQ AX, X14
	PUNPCKLQDQ X14, X14

loopbits:
	MOVOU (SI), X0
	MOVOU (SI)(DX*1), X1
	MOVOU (SI)(DX*2), X2
	MOVOU (SI)(R8*1), X3
	MOVOU (R9), X4
	MOVOU (R9)(DX*1), X5
	MOVOU (R9)(DX*2), X6
	MOVOU (R9)(R8*1), X7
	MOVO  X0, X8
	PUNPCKLBW X1, X0
	PUNPCKHBW X1, X8
	MOVO  X2, X9
	PUNPCKLBW X3, X2
	PUNPCKHBW X3, X9
	MOVO  X4, X10
	PUNPCKLBW X5, X4
	PUNPCKHBW X5, X10
	MOVO  X6, X11
	PUNPCKLBW X7, X6
	PUNPCKHBW X7, X11
	MOVO  X0, X1
	PUNPCKLWL X2, X0
	PUNPCKHWL X2, X1
	MOVO  X8, X3
	PUNPCKLWL X9, X8
	PUNPCKHWL X9, X3
	MOVO  X4, X5
	PUNPCKLWL X6, X4
	PUNPCKHWL X6, X5
	MOVO  X10, X7
	PUNPCKLWL X11, X10
	PUNPCKHWL X11, X7
	MOVO  X0, X2
	PUNPCKLLQ X4, X0
	PUNPCKHLQ X4, X2
	MOVO  X1, X6
	PUNPCKLLQ X5, X1
	PUNPCKHLQ X5, X6
	MOVO  X8, X9
	PUNPCKLLQ X10, X8
	PUNPCKHLQ X10, X9
	MOVO  X3, X11
	PUNPCKLLQ X7, X3
	PUNPCKHLQ X7, X11
	TRANSPOSE_BITS(X0, X15)
	MOVOU X0, (DI)
	TRANSPOSE_BITS(X2, X15)
	MOVOU X2, 16(DI)
	TRANSPOSE_BITS(X1, X15)
	MOVOU X1, 32(DI)
	TRANSPOSE_BITS(X6, X15)
	MOVOU X6, 48(DI)
	TRANSPOSE_BITS(X8, X15)
	MOVOU X8, 64(DI)
	TRANSPOSE_BITS(X9, X15)
	MOVOU X9, 80(DI)
	TRANSPOSE_BITS(X3, X15)
	MOVOU X3, 96(DI)
	TRANSPOSE_BITS(X11, X15)
	MOVOU X11, 112(DI)
	ADDQ  $16, SI
	ADDQ  $16, R9
	ADDQ  $128, DI
	DECQ  CX
	JNZ   loopbits
	RET
