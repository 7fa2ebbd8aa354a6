//go:build race

package main

// raceEnabled: the race detector multiplies memory use; bounds on it are
// only logged.
const raceEnabled = true
