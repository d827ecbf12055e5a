package engine

// RewriteCounters is how many objects e keeps a rewrite counter for.
func RewriteCounters(e *Engine) int {
	n := 0
	e.rewriteCounts.Range(func(any, any) bool { n++; return true })
	return n
}
