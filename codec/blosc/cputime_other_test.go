//go:build !unix

package blosc

// processCPU is not measured on this platform.
func processCPU() float64 { return 0 }
