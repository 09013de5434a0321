//go:build race

package group

// raceEnabled: the race detector slows the simulation about tenfold, so
// TestSimulation runs fewer seeds under it (the full count runs without it).
const raceEnabled = true
