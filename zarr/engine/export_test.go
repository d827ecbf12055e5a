package engine

// RewriteCounters is how many objects e keeps a rewrite counter for.
func RewriteCounters(e *Engine) int {
	n := 0
	e.rewriteCounts.Range(func(any, any) bool { n++; return true })
	return n
}

// SetWatchMax sets the bound of the objects watched at once until the
// test ends.
func SetWatchMax(t interface{ Cleanup(func()) }, n int) {
	old := watchMax
	watchMax = n
	t.Cleanup(func() { watchMax = old })
}

// WaitChecks waits for the checks of cached states under way in the
// background, and those they start.
func WaitChecks(e *Engine) { e.checks.Wait() }
