//go:build race

package member_test

// raceEnabled: the property tests run on one goroutine, so the race
// detector finds nothing in their seeds that their first ones do not show,
// and it slows them several times over; runSeeds runs fewer seeds under it
// (the full count runs in the step without it).
const raceEnabled = true
