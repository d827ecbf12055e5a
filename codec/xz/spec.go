package xz

import "fmt"

// presetDicts are liblzma's dictionary sizes by preset level.
var presetDicts = [10]int{256 << 10, 1 << 20, 2 << 20, 4 << 20, 4 << 20, 8 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20}

// presetExtreme is the flag Python's lzma.PRESET_EXTREME adds to a level;
// it changes how hard the encoder searches, not the format.
const presetExtreme = 1 << 31

// DefaultPreset is liblzma's (and Python's) default compression level.
const DefaultPreset = 6

// LZMAFilter returns an LZMA1 or LZMA2 filter with the options liblzma's
// preset (a level 0..9, optionally with the extreme flag) gives it.
func LZMAFilter(id uint64, preset int64) (Filter, error) {
	level := preset &^ presetExtreme
	if level < 0 || level > 9 {
		return Filter{}, fmt.Errorf("%w: preset %d is not a level 0..9", ErrUnsupported, preset)
	}
	return Filter{ID: id, DictSize: presetDicts[level], LC: 3, PB: 2}, nil
}
