package clock_test

import (
	"fmt"
	"time"

	"github.com/cohort-dev/cohort/clock"
)

// A fake clock fires a timer only when the test moves the time past its
// deadline.
func ExampleFake() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	t := f.NewTimer(3 * time.Second)

	fired := func() bool {
		select {
		case <-t.C():
			return true
		default:
			return false
		}
	}
	f.Advance(2 * time.Second)
	fmt.Println("after 2s:", fired())
	next, _ := f.NextDeadline()
	fmt.Println("next deadline: start +", next.Sub(start))
	f.Set(next)
	fmt.Println("at the deadline:", fired())
	_, armed := f.NextDeadline()
	fmt.Println("still armed:", armed)
	// Output:
	// after 2s: false
	// next deadline: start + 3s
	// at the deadline: true
	// still armed: false
}
