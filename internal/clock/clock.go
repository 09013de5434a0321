// Package clock is kept for the code inside cohort that imports it: its
// names are aliases of the public package github.com/cohort-dev/cohort/clock,
// which holds the implementation and the documentation. New code imports the
// public package.
package clock

import (
	"time"

	"github.com/cohort-dev/cohort/clock"
)

// Clock is clock.Clock.
type Clock = clock.Clock

// Timer is clock.Timer.
type Timer = clock.Timer

// Real is clock.Real.
type Real = clock.Real

// Fake is clock.Fake.
type Fake = clock.Fake

// NewFake returns clock.NewFake(start).
func NewFake(start time.Time) *Fake { return clock.NewFake(start) }
