//go:build race

package codec_test

// raceEnabled: the race detector drops some of what goes into a sync.Pool,
// so tests of allocation counts do not hold under it.
const raceEnabled = true
