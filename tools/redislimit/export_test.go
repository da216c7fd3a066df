package redislimit

// Crash stops l as the death of its replica would: it renews no lease
// and sends nothing more, releases included. The conformance suite
// (tools/limittest) calls it to model a dead replica.
func (l *Limiter) Crash() {
	l.stop()
	l.mu.Lock()
	l.pending, l.held = nil, map[string]held{}
	l.mu.Unlock()
}
