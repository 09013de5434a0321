// Package lease is the clock check behind the recipes' leases
// (workers.Lease, election.Lease): work that a group member holds may go on
// only while its context is live and this process's clock is before the
// member's own loss deadline (member.Member.ValidUntil). It reads the clock
// itself rather than waiting for the member's watchdog, so a process resumed
// after a freeze refuses before any of its timers has run.
package lease

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cohort-dev/cohort/internal/clock"
)

// Errors says what a failed Check wraps: Stopped when the context ended
// (with its cause), Expired when the deadline passed or the member holds no
// work. Label prefixes the details (a token, for example).
type Errors struct {
	Stopped, Expired error
	Label            string
}

// Lease checks one piece of held work. Its methods are safe for concurrent
// use.
type Lease struct {
	ctx   context.Context
	clk   clock.Clock
	until func() time.Time
	errs  Errors

	mu   sync.Mutex
	over error // set by the first failed Check: a lease never comes back
}

// New returns a lease over ctx (cancelled when the work stops) and until (the
// member's ValidUntil, zero when it holds no work).
func New(ctx context.Context, clk clock.Clock, until func() time.Time, errs Errors) *Lease {
	return &Lease{ctx: ctx, clk: clk, until: until, errs: errs}
}

// Deadline returns until's current value.
func (l *Lease) Deadline() time.Time { return l.until() }

// Check returns nil while the work may go on, or an error wrapping
// Errors.Stopped or Errors.Expired; once it has failed it keeps failing.
func (l *Lease) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over != nil {
		return l.over
	}
	// The clock is read before the deadline: the member moves its deadline
	// only for an answer it takes before the deadline has passed (any input
	// at or past it declares the loss first), so a deadline read after the
	// clock that is still ahead of it is one the member keeps, and one that
	// is not is one the member loses. Read the other way round, a deadline
	// moved between the two reads would look passed to this lease, whose
	// refusal is final, while the member kept the work.
	now := l.clk.Now()
	// The deadline is read before the context: if the context is still live
	// afterwards, the deadline belongs to the membership this work started
	// in (a membership's context is cancelled before a new one can begin).
	until := l.until()
	if cause := context.Cause(l.ctx); cause != nil {
		l.over = fmt.Errorf("%w: %s: %w", l.errs.Stopped, l.errs.Label, cause)
		return l.over
	}
	if until.IsZero() {
		l.over = fmt.Errorf("%w: %s: the member holds no work", l.errs.Expired, l.errs.Label)
		return l.over
	}
	if !now.Before(until) {
		l.over = fmt.Errorf("%w: %s: %v past its deadline", l.errs.Expired, l.errs.Label, now.Sub(until))
		return l.over
	}
	return nil
}
