package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/internal/lease"
)

// Errors returned by Lease.Check (wrapped, with the token and the details).
var (
	// ErrLeaseExpired: the term's deadline has passed on this process's
	// clock; the coordinator may already have made another candidate the
	// writer.
	ErrLeaseExpired = errors.New("election: lease expired")
	// ErrStopped: the term ended on this process (role lost, Close); the
	// error also wraps the cause.
	ErrStopped = errors.New("election: term stopped")
	// ErrNoLease: the context does not come from an Election.
	ErrNoLease = errors.New("election: no lease in this context")
)

// Lease is this process's term as the writer: its fencing token and a
// deadline on this process's clock, the member's own loss deadline
// (member.Member.ValidUntil: the session timeout, or a shorter rebalance
// timeout, less LostMargin, after the send time of the last heartbeat the
// coordinator confirmed). Get it with
// LeaseOf from the context passed to Func and call Check before each write.
// Its methods are safe for concurrent use.
type Lease struct {
	token int32
	l     *lease.Lease
}

type leaseKey struct{}

func newLease(ctx context.Context, token int32, clk clock.Clock, until func() time.Time) context.Context {
	l := &Lease{token: token, l: lease.New(ctx, clk, until, lease.Errors{Stopped: ErrStopped, Expired: ErrLeaseExpired, Label: fmt.Sprintf("token %d", token)})}
	return context.WithValue(ctx, leaseKey{}, l)
}

// LeaseOf returns the lease carried by a context that Func received (or one
// derived from it), or nil.
func LeaseOf(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// Token returns the term's fencing token (-1 for a nil lease).
func (l *Lease) Token() int32 {
	if l == nil {
		return -1
	}
	return l.token
}

// Deadline returns when the term ends on this process's clock unless a
// heartbeat is confirmed before (it moves forward with every confirmed
// heartbeat), or the zero time when the member holds no work.
func (l *Lease) Deadline() time.Time {
	if l == nil {
		return time.Time{}
	}
	return l.l.Deadline()
}

// Check reports whether this process may make one more write as the writer:
// nil, or an error wrapping ErrStopped (Func's context was cancelled) or
// ErrLeaseExpired (the deadline has passed: no heartbeat was confirmed in
// time, or the process was frozen past it — a GC pause, SIGSTOP, a suspended
// VM — and has just resumed, before any of its timers has run). Once Check
// has failed it keeps failing; Func should return.
//
// Check narrows the window in which a former writer writes but cannot close
// it: the process can freeze right after a successful Check. Only the token,
// checked by the resource itself (see Fence), closes it.
func (l *Lease) Check() error {
	if l == nil {
		return ErrNoLease
	}
	return l.l.Check()
}

// Valid reports whether Check returns nil.
func (l *Lease) Valid() bool { return l.Check() == nil }
