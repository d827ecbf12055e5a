package engine

// WaitAhead waits until the fetches e started ahead of its readers ended.
func WaitAhead(e *Engine) { e.ahead.work.Wait() }
