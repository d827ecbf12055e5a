package codec

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/zarrfs/zarrfs/codec/blosc"
)

func init() {
	Register("blosc", newBloscV3)
	Register("numcodecs.blosc", newBloscNumcodecs)
}

// bloscCodec is blosc1 (v3 "blosc" and numcodecs "blosc" write the same
// frames). Decoding needs no configuration: the frame header has it all.
type bloscCodec struct{ opts blosc.Options }

// bloscShuffles maps the v3 shuffle names to the numcodecs numbers.
var bloscShuffles = map[string]blosc.Shuffle{
	"noshuffle":  blosc.NoShuffle,
	"shuffle":    blosc.ByteShuffle,
	"bitshuffle": blosc.BitShuffle,
}

var bloscNames = map[string]bool{"blosclz": true, "lz4": true, "lz4hc": true, "snappy": true, "zlib": true, "zstd": true}

// newBloscV3 reads {cname, clevel, shuffle: "noshuffle"|"shuffle"|
// "bitshuffle", typesize, blocksize}; typesize defaults to the element size
// of the serialised array.
func newBloscV3(config json.RawMessage, spec Spec) (any, error) {
	cfg := struct {
		CName     string `json:"cname"`
		CLevel    int    `json:"clevel"`
		Shuffle   string `json:"shuffle"`
		TypeSize  int    `json:"typesize"`
		BlockSize int    `json:"blocksize"`
	}{CName: "zstd", CLevel: 5, Shuffle: "noshuffle"}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	shuffle, ok := bloscShuffles[cfg.Shuffle]
	if !ok {
		return nil, configError("blosc shuffle must be noshuffle, shuffle or bitshuffle, got %q", cfg.Shuffle)
	}
	if cfg.TypeSize == 0 {
		cfg.TypeSize = itemSize(spec)
	}
	return newBlosc(cfg.CName, cfg.CLevel, shuffle, cfg.TypeSize, cfg.BlockSize)
}

// newBloscNumcodecs reads numcodecs' {cname, clevel, shuffle: -1|0|1|2,
// blocksize}. numcodecs passes the buffer's item size as typesize, and
// AUTOSHUFFLE (-1) means bitshuffle for 1-byte items, else byte shuffle.
func newBloscNumcodecs(config json.RawMessage, spec Spec) (any, error) {
	cfg := struct {
		CName     string          `json:"cname"`
		CLevel    pyInt           `json:"clevel"`
		Shuffle   shuffleSpelling `json:"shuffle"`
		TypeSize  pyInt           `json:"typesize"`
		BlockSize pyInt           `json:"blocksize"`
	}{CName: "lz4", CLevel: 5, Shuffle: 1}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	if cfg.TypeSize == 0 {
		cfg.TypeSize = pyInt(itemSize(spec))
	}
	shuffle, err := numcodecsShuffle(int(cfg.Shuffle), int(cfg.TypeSize))
	if err != nil {
		return nil, err
	}
	return newBlosc(cfg.CName, int(cfg.CLevel), shuffle, int(cfg.TypeSize), int(cfg.BlockSize))
}

// shuffleSpelling is numcodecs' blosc shuffle as writers spell it: -1
// (AUTOSHUFFLE), 0, 1 or 2 in any pyInt form, or a name in any case: GDAL
// writes "NONE", "BYTE" and "BIT" (and reads "0", "1" and "2"), v3 says
// "noshuffle", "shuffle" and "bitshuffle". numcodecs decodes whatever it
// says (a frame records how it was shuffled) and zarr-python 2 reads such
// arrays, so they must be stored, and written again the way they say.
type shuffleSpelling int

var shuffleNames = map[string]shuffleSpelling{
	"none": 0, "noshuffle": 0, "0": 0,
	"byte": 1, "shuffle": 1, "1": 1,
	"bit": 2, "bitshuffle": 2, "2": 2,
}

func (s *shuffleSpelling) UnmarshalJSON(b []byte) error {
	var name string
	if json.Unmarshal(b, &name) != nil {
		return (*pyInt)(s).UnmarshalJSON(b)
	}
	n, ok := shuffleNames[strings.ToLower(name)]
	if !ok {
		return fmt.Errorf("blosc shuffle %q is none of -1, 0, 1, 2, NONE, BYTE, BIT, noshuffle, shuffle, bitshuffle", name)
	}
	*s = n
	return nil
}

func numcodecsShuffle(s, typesize int) (blosc.Shuffle, error) {
	switch s {
	case -1:
		if typesize == 1 {
			return blosc.BitShuffle, nil
		}
		return blosc.ByteShuffle, nil
	case 0, 1, 2:
		return blosc.Shuffle(s), nil
	}
	return 0, configError("blosc shuffle must be -1, 0, 1 or 2, got %d", s)
}

// itemSize is the element size numcodecs hands blosc: 1 for bytes.
func itemSize(spec Spec) int {
	return max(spec.Type.Size, 1)
}

func newBlosc(cname string, clevel int, shuffle blosc.Shuffle, typesize, blocksize int) (*bloscCodec, error) {
	switch {
	case !bloscNames[cname]:
		return nil, configError("blosc cname %q is not one of blosclz, lz4, lz4hc, snappy, zlib, zstd", cname)
	case clevel < 0 || clevel > 9:
		return nil, configError("blosc clevel %d is outside 0..9", clevel)
	case typesize < 1:
		return nil, configError("blosc typesize %d < 1", typesize)
	case blocksize < 0:
		return nil, configError("blosc blocksize %d < 0", blocksize)
	}
	return &bloscCodec{blosc.Options{Compressor: cname, Level: clevel, Shuffle: shuffle, TypeSize: typesize, BlockSize: blocksize}}, nil
}

func (*bloscCodec) EncodedSize(int) (int, bool) { return 0, false }

func (c *bloscCodec) Encode(b []byte) ([]byte, error) {
	return blosc.Compress(b, c.opts)
}

func (c *bloscCodec) Decode(b []byte, maxSize int) ([]byte, error) {
	return c.DecodeInto(nil, b, maxSize)
}

func (c *bloscCodec) DecodeInto(dst, b []byte, maxSize int) ([]byte, error) {
	out, err := blosc.Decompress(dst, b, maxSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return out, nil
}
