package blosc

import "fmt"

// What the tests read back from a frame's header; the decoder itself needs
// only the codec id and the flags.

// Compressor returns the internal codec's name. lz4hc frames report "lz4":
// both write the same LZ4 block format and the header cannot tell them apart.
func (h Header) Compressor() string {
	if id := h.codec(); id < len(codecNames) {
		return codecNames[id]
	}
	return fmt.Sprintf("unknown(%d)", h.codec())
}

// Shuffle returns the filter recorded in the flags.
func (h Header) Shuffle() Shuffle {
	switch {
	case h.Flags&flagBitShuffle != 0:
		return BitShuffle
	case h.Flags&flagShuffle != 0:
		return ByteShuffle
	}
	return NoShuffle
}
