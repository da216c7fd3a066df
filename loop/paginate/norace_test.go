//go:build !race

package paginate

const raceEnabled = false
