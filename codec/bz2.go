package codec

import (
	"bytes"
	stdbzip2 "compress/bzip2"
	"encoding/json"

	dsbzip2 "github.com/dsnet/compress/bzip2"
)

// numcodecs "bz2": decoded with the standard library, encoded with
// github.com/dsnet/compress (the standard library has no encoder).

func init() { Register("numcodecs.bz2", newBZ2) }

type bz2Codec struct{ level int }

func newBZ2(config json.RawMessage, _ Spec) (any, error) {
	level, err := parseLevel(config, 1, 1, 9)
	if err != nil {
		return nil, err
	}
	return &bz2Codec{level}, nil
}

func (*bz2Codec) EncodedSize(int) (int, bool) { return 0, false }

func (c *bz2Codec) Encode(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := dsbzip2.NewWriter(&buf, &dsbzip2.WriterConfig{Level: c.level})
	if err != nil {
		return nil, err
	}
	return compressAll(w, &buf, b)
}

func (c *bz2Codec) Decode(b []byte, maxSize int) ([]byte, error) {
	r := stdbzip2.NewReader(bytes.NewReader(b))
	return readAllLimited(r, initialCap(0, len(b), maxSize), maxSize)
}
