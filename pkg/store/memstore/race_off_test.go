//go:build !race

package memstore_test

const raceEnabled = false
