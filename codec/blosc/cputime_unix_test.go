//go:build unix

package blosc

import "syscall"

// processCPU returns the user+system CPU time the process has used, in
// seconds. Benchmarks report throughput per CPU second too, since wall-clock
// numbers mean little on a shared, oversubscribed machine.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
