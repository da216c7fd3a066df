//go:build race

package query

// raceEnabled: the race detector slows the generated-data tests several
// times over; they run fewer cases under it (the chunked aggregate, the
// one with goroutines, still runs).
const raceEnabled = true
