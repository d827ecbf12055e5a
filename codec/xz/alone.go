package xz

import (
	"bytes"
	"encoding/binary"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// The legacy .lzma format (liblzma's "alone" format): a 13-byte header
// (properties, dictionary size, uncompressed size or all ones for
// unknown) before LZMA1 data.

// DecodeAlone decodes a .lzma file; more than maxSize bytes of output
// (maxSize >= 0) is an error.
func DecodeAlone(b []byte, maxSize int) ([]byte, error) {
	if len(b) < lzma.HeaderLen {
		return nil, corrupt("truncated .lzma header")
	}
	dict := binary.LittleEndian.Uint32(b[1:])
	if dict > MaxDict {
		return nil, corrupt(".lzma dictionary of %d bytes exceeds the %d-byte limit", dict, MaxDict)
	}
	if size := binary.LittleEndian.Uint64(b[5:]); size != ^uint64(0) && maxSize >= 0 && size > uint64(maxSize) {
		return nil, corrupt(".lzma header says %d bytes, more than %d", size, maxSize)
	}
	h := bytes.Clone(b[:lzma.HeaderLen])
	binary.LittleEndian.PutUint32(h[1:], uint32(dictFor(int(dict), maxSize)))
	r, err := lzma.ReaderConfig{DictCap: MaxDict}.NewReader(io.MultiReader(bytes.NewReader(h), bytes.NewReader(b[lzma.HeaderLen:])))
	if err != nil {
		return nil, corrupt(".lzma: %v", err)
	}
	return readAll(r, nil, maxSize)
}

// EncodeAlone writes b as a .lzma file encoded by f, an LZMA1 filter,
// with an end marker and the size unknown in the header, as liblzma does.
func EncodeAlone(b []byte, f Filter) ([]byte, error) {
	if f.ID != IDLZMA1 {
		return nil, corrupt("the .lzma format holds LZMA1 data, not %s", f.Name())
	}
	if err := CheckChain([]Filter{f}, true); err != nil {
		return nil, err
	}
	return encodeLZMA1(b, f)
}
