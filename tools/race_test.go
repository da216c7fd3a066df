//go:build race

package tools

// raceEnabled: the race detector slows the vendor-spec imports (tens of
// megabytes through kin-openapi) several-fold; those tests, which run
// sequential code, skip under it.
const raceEnabled = true
