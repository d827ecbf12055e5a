package blosc

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelMinBytes is the frame size from which Decompress and Compress
// spread blocks over goroutines. In BenchmarkParallelThreshold on a 2-core
// machine, two goroutines decoded 4 MiB frames 1.9x (lz4) and 2x (zstd) as
// fast as one; at 1 MiB zstd still gained 1.8x but lz4 only 5%, and below
// that the gains were lost in noise.
const parallelMinBytes = 1 << 20

// forceWorkers, when positive, overrides the choice of workers (benchmarks).
var forceWorkers int

// workers returns how many goroutines to use for a frame.
func workers(nbytes, nblocks int) int {
	if forceWorkers > 0 {
		return max(min(forceWorkers, nblocks), 1)
	}
	if nbytes < parallelMinBytes || nblocks < 2 {
		return 1
	}
	return min(runtime.GOMAXPROCS(0), nblocks)
}

// forEachBlock runs fn for every block, in parallel when that pays, giving
// each goroutine its own state S from get. It returns the error of the
// lowest-numbered failing block it saw.
func forEachBlock[S any](nbytes, nblocks int, get func() S, put func(S), fn func(j int, s S) error) error {
	nw := workers(nbytes, nblocks)
	if nw == 1 {
		s := get()
		defer put(s)
		for j := range nblocks {
			if err := fn(j, s); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next     atomic.Int64
		failed   atomic.Bool
		mu       sync.Mutex
		errBlock = nblocks
		firstErr error
		wg       sync.WaitGroup
	)
	for range nw {
		wg.Go(func() {
			s := get()
			defer put(s)
			for !failed.Load() {
				j := int(next.Add(1) - 1)
				if j >= nblocks {
					return
				}
				if err := fn(j, s); err != nil {
					mu.Lock()
					if j < errBlock {
						errBlock, firstErr = j, err
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}
