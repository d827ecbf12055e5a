package keyspace

// SetMaxTempTotal lowers the memory all temporary files may hold, for a
// test; the returned function restores it.
func SetMaxTempTotal(n int64) (restore func()) {
	old := maxTempTotal
	maxTempTotal = n
	return func() { maxTempTotal = old }
}
