//go:build race

package discovery

// raceEnabled: the race detector slows a full search over 10,000 tools
// several-fold; the pruning tests, whose searches run one at a time,
// check a sample of their queries under it.
const raceEnabled = true
