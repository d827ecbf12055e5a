package keyspace

// SetMaxTempTotal lowers the memory all temporary files may hold, for a
// test; the returned function restores it.
func SetMaxTempTotal(n int64) (restore func()) {
	old := maxTempTotal
	maxTempTotal = n
	return func() { maxTempTotal = old }
}

// RewriteCounters is how many objects f keeps a rewrite counter for.
func RewriteCounters(f *FS) int {
	n := 0
	f.gens.Range(func(any, any) bool { n++; return true })
	return n
}
