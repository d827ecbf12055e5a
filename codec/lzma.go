package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/zarrfs/zarrfs/codec/xz"
)

// numcodecs "lzma", Python's lzma module: xz (the default, with CRC64 and
// preset 6), the legacy .lzma format and raw data, with the filter chains
// Python takes (delta and the BCJ filters before LZMA2 or LZMA1), through
// codec/xz. An xz stream names its own chain, so any that liblzma writes
// decodes whatever the configuration says: GDAL writes delta + LZMA2
// streams under {"id": "lzma", "preset": 6, "delta": 1}.

func init() { Register("numcodecs.lzma", newLZMA) }

// Python lzma constants.
const (
	lzmaFormatAuto  = 0
	lzmaFormatXZ    = 1
	lzmaFormatAlone = 2
	lzmaFormatRaw   = 3
)

type lzmaCodec struct {
	format int
	check  byte
	// chain encodes (and, raw, decodes): the configuration's filters, or
	// the preset's LZMA2 (LZMA1 for .lzma).
	chain []xz.Filter
}

func newLZMA(config json.RawMessage, _ Spec) (any, error) {
	cfg := struct {
		Format  pyInt           `json:"format"`
		Check   pyInt           `json:"check"`
		Preset  *pyInt          `json:"preset"`
		Filters json.RawMessage `json:"filters"`
	}{Format: lzmaFormatXZ, Check: -1}
	if err := parseConfig(config, &cfg); err != nil {
		return nil, err
	}
	c := &lzmaCodec{format: int(cfg.Format)}
	filters := bytes.TrimSpace(cfg.Filters)
	hasFilters := len(filters) > 0 && string(filters) != "null"
	if hasFilters {
		if cfg.Preset != nil {
			return nil, configError("lzma: a preset and filters together (Python refuses them)")
		}
		var err error
		if c.chain, err = parseLZMAFilters(filters); err != nil {
			return nil, err
		}
	} else {
		preset := int64(xz.DefaultPreset)
		if cfg.Preset != nil {
			preset = int64(*cfg.Preset)
		}
		id := xz.IDLZMA2
		if c.format == lzmaFormatAlone {
			id = xz.IDLZMA1
		}
		f, err := xz.LZMAFilter(id, preset)
		if err != nil {
			return nil, configError("lzma: %v", err)
		}
		c.chain = []xz.Filter{f}
	}
	var err error
	switch c.format {
	case lzmaFormatAuto:
		if hasFilters {
			return nil, configError("lzma: FORMAT_AUTO takes no filters (Python refuses them)")
		}
	case lzmaFormatXZ:
		err = xz.CheckChain(c.chain, false)
	case lzmaFormatAlone:
		if len(c.chain) != 1 || c.chain[0].ID != xz.IDLZMA1 {
			return nil, configError("lzma: FORMAT_ALONE takes one LZMA1 filter")
		}
		err = xz.CheckChain(c.chain, true)
	case lzmaFormatRaw:
		if !hasFilters {
			return nil, configError("lzma: FORMAT_RAW needs filters")
		}
		err = xz.CheckChain(c.chain, true)
	default:
		return nil, configError("lzma: unknown format %d", cfg.Format)
	}
	if err != nil {
		return nil, configError("lzma: %v", err)
	}
	switch cfg.Check {
	case -1:
		c.check = xz.CheckCRC64
		if c.format == lzmaFormatAlone || c.format == lzmaFormatRaw {
			c.check = xz.CheckNone
		}
	case 0, 1, 4, 10:
		c.check = byte(cfg.Check)
	default:
		return nil, configError("lzma: check %d is not supported (0 none, 1 CRC32, 4 CRC64, 10 SHA256)", cfg.Check)
	}
	return c, nil
}

// parseLZMAFilters reads a filter chain as Python's lzma module takes it:
// a list of objects, each an "id" and that filter's options. The options
// only the encoder uses (mode, nice_len, mf, depth) are accepted and
// ignored; others are refused, as Python refuses them.
func parseLZMAFilters(raw json.RawMessage) ([]xz.Filter, error) {
	var specs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &specs); err != nil {
		return nil, configError("lzma: filters must be a list of objects: %v", err)
	}
	chain := make([]xz.Filter, len(specs))
	for i, spec := range specs {
		f, err := parseLZMAFilter(spec)
		if err != nil {
			return nil, configError("lzma: filters[%d]: %v", i, err)
		}
		chain[i] = f
	}
	return chain, nil
}

func parseLZMAFilter(spec map[string]json.RawMessage) (xz.Filter, error) {
	id, err := strconv.ParseUint(string(bytes.TrimSpace(spec["id"])), 10, 64)
	if err != nil {
		return xz.Filter{}, fmt.Errorf("id %s is not a filter id", spec["id"])
	}
	f := xz.Filter{ID: id}
	option := func(key string, def, lo, hi int64) (int64, error) {
		raw, ok := spec[key]
		if !ok {
			return def, nil
		}
		var n pyInt
		if err := json.Unmarshal(raw, &n); err != nil {
			return 0, fmt.Errorf("%s: %v", key, err)
		}
		if int64(n) < lo || int64(n) > hi {
			return 0, fmt.Errorf("%s %d is outside %d..%d", key, n, lo, hi)
		}
		return int64(n), nil
	}
	var options []string
	switch id {
	case xz.IDLZMA1, xz.IDLZMA2:
		options = []string{"preset", "dict_size", "lc", "lp", "pb", "mode", "nice_len", "mf", "depth"}
		preset, err := option("preset", xz.DefaultPreset, 0, 1<<32-1)
		if err != nil {
			return f, err
		}
		if f, err = xz.LZMAFilter(id, preset); err != nil {
			return f, err
		}
		for key, v := range map[string]*int{"dict_size": &f.DictSize, "lc": &f.LC, "lp": &f.LP, "pb": &f.PB} {
			n, err := option(key, int64(*v), 0, 1<<32-1)
			if err != nil {
				return f, err
			}
			*v = int(n)
		}
	case xz.IDDelta:
		options = []string{"dist"}
		n, err := option("dist", 1, 1, 256)
		if err != nil {
			return f, err
		}
		f.Distance = int(n)
	case xz.IDX86, xz.IDPowerPC, xz.IDIA64, xz.IDARM, xz.IDARMThumb, xz.IDSPARC:
		options = []string{"start_offset"}
		n, err := option("start_offset", 0, 0, 1<<32-1)
		if err != nil {
			return f, err
		}
		f.StartOffset = uint32(n)
	default:
		return f, fmt.Errorf("%s is not one of Python's filters (delta, x86, powerpc, ia64, arm, armthumb, sparc, lzma1, lzma2)", f.Name())
	}
	for key := range spec {
		if key != "id" && !slices.Contains(options, key) {
			return f, fmt.Errorf("%s has no option %q", f.Name(), key)
		}
	}
	return f, nil
}

func (*lzmaCodec) EncodedSize(int) (int, bool) { return 0, false }

func (c *lzmaCodec) Encode(b []byte) ([]byte, error) {
	switch c.format {
	case lzmaFormatAlone:
		return xz.EncodeAlone(b, c.chain[0])
	case lzmaFormatRaw:
		return xz.EncodeRaw(b, c.chain)
	}
	return xz.Encode(b, c.chain, c.check)
}

var xzMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0}

func (c *lzmaCodec) Decode(b []byte, maxSize int) ([]byte, error) {
	format := c.format
	if format == lzmaFormatAuto {
		format = lzmaFormatAlone
		if bytes.HasPrefix(b, xzMagic) {
			format = lzmaFormatXZ
		}
	}
	var out []byte
	var err error
	switch format {
	case lzmaFormatXZ:
		out, err = xz.Decode(b, maxSize)
	case lzmaFormatAlone:
		out, err = xz.DecodeAlone(b, maxSize)
	default:
		out, err = xz.DecodeRaw(b, c.chain, maxSize)
	}
	if err != nil {
		return nil, corruptErr(err)
	}
	return out, nil
}
