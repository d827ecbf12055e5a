package blosc

import "testing"

// TestDecompressAllocs checks that decoding into a large enough dst
// allocates nothing per call once the pools are warm (frames below the
// parallel threshold).
func TestDecompressAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	src, err := genInput(genParams{Kind: "walk", TS: 4, NBytes: 256 << 10, Seed: 5, Amp: 9})
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, len(src))
	for _, cname := range allCnames {
		for _, sh := range []Shuffle{NoShuffle, ByteShuffle, BitShuffle} {
			frame, err := Compress(src, Options{Compressor: cname, Level: 5, Shuffle: sh, TypeSize: 4, BlockSize: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := Decompress(dst, frame, -1); err != nil {
					t.Fatal(err)
				}
			})
			// A garbage collection may empty the pools now and then, and
			// klauspost's inflater builds some Huffman tables on the heap.
			limit := 0.5
			if cname == "zlib" {
				limit = 2
			}
			if allocs > limit {
				t.Errorf("%s shuffle %d: %.1f allocations per Decompress", cname, sh, allocs)
			}
		}
	}
}
