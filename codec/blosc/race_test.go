//go:build race

package blosc

// raceEnabled is set when testing with -race, under which sync.Pool drops
// items on purpose.
const raceEnabled = true
