//go:build race

package memstore_test

// raceEnabled scales the large tests down: the race detector makes every
// map write some ten times slower.
const raceEnabled = true
