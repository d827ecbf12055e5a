//go:build !amd64 || purego

package blosc

// unshuffleSIMD has no vector kernels on this platform.
func unshuffleSIMD(dst, src []byte, n, ts int) int { return 0 }

// bitRowsToPlaneSIMD has no vector kernel on this platform.
func bitRowsToPlaneSIMD(plane, rows []byte) int { return 0 }
