// Package blosc reads and writes Blosc version 1 frames, the format of
// c-blosc 1.x that Zarr's "blosc" compressor (v2) and codec (v3) store.
//
// A frame is a 16-byte header followed either by the raw data (a "memcpyed"
// frame) or by a table of block offsets and the blocks. Each block is
// optionally byte- or bit-shuffled and then compressed, as a whole or as one
// stream per byte of the element type ("splits"), with BloscLZ, LZ4 (and
// LZ4HC), Snappy, zlib or Zstandard.
//
// Decompress accepts every frame c-blosc 1.x writes and rejects malformed
// input with an error wrapping ErrCorrupt or ErrUnsupported; it never
// panics on hostile input and allocates at most a small multiple of the
// frame's declared size, which callers bound with maxSize. Compress writes
// frames c-blosc reads, choosing block sizes and splits as c-blosc 1.21
// does. Large frames are processed block-parallel on GOMAXPROCS goroutines.
//
// Everything is pure Go. BloscLZ is implemented here; the other codecs come
// from github.com/pierrec/lz4/v4 and github.com/klauspost/compress. See
// NOTICE for the formats' origins and licences.
package blosc
