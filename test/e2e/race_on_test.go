//go:build race

package e2e

// raceEnabled: the race detector multiplies memory use; bounds on it are
// only logged.
const raceEnabled = true
