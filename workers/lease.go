package workers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/internal/lease"
)

// Token is a fencing token: a resource and the generation in which a member
// got it. For one resource, a later owner always has a greater generation
// (while the group exists on the coordinator), so a store that keeps the
// greatest generation it has accepted per resource can refuse a former owner
// (see Fence). A pool whose workers have all left keeps its group on cohort
// for the offsets retention (7 days by default); after that, after `cohort
// group delete`, or on a Kafka coordinator (which removes an empty group
// without offsets within minutes), generations start again at 1 and repeat
// those of the removed group: such a store refuses the new owners until the
// new generations pass its record, then admits an equal token, which a
// process of the removed group (expired, but frozen or cut off with a write
// under way) may hold too. Stop every process of the former pool (kill it,
// do not count on it having left), then clear the store's record, then start
// the pool again.
type Token struct {
	Resource   string
	Generation int32
}

func (t Token) String() string { return fmt.Sprintf("%s@%d", t.Resource, t.Generation) }

// Errors returned by Lease.Check (wrapped, with the token and the details).
var (
	// ErrLeaseExpired: the lease's deadline has passed on this process's
	// clock; the coordinator may already have given the resource to another
	// member.
	ErrLeaseExpired = errors.New("workers: lease expired")
	// ErrStopped: the resource was stopped on this member (moved away,
	// membership lost, Close); the error also wraps the cause.
	ErrStopped = errors.New("workers: resource stopped")
	// ErrNoLease: the context does not come from a Pool.
	ErrNoLease = errors.New("workers: no lease in this context")
)

// Lease is the right of this member to run one resource: the resource's
// fencing token and a deadline on this process's clock. Get it with LeaseOf
// from the context passed to Config.Start, and call Check before each unit of
// work. Its methods are safe for concurrent use.
type Lease struct {
	token Token
	l     *lease.Lease
}

type leaseKey struct{}

func newLease(ctx context.Context, tok Token, clk clock.Clock, until func() time.Time) (context.Context, *Lease) {
	l := &Lease{token: tok, l: lease.New(ctx, clk, until, lease.Errors{Stopped: ErrStopped, Expired: ErrLeaseExpired, Label: tok.String()})}
	return context.WithValue(ctx, leaseKey{}, l), l
}

// LeaseOf returns the lease carried by a context that Config.Start received
// (or one derived from it), or nil.
func LeaseOf(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// Token returns the resource's fencing token.
func (l *Lease) Token() Token {
	if l == nil {
		return Token{Generation: -1}
	}
	return l.token
}

// Deadline returns when the lease ends on this process's clock unless a
// heartbeat is confirmed before (it moves forward with every confirmed
// heartbeat), or the zero time when the member holds no work. With the real
// clock it carries a monotonic reading.
func (l *Lease) Deadline() time.Time {
	if l == nil {
		return time.Time{}
	}
	return l.l.Deadline()
}

// Check reports whether this member may do one more unit of work on the
// resource: nil, or an error wrapping ErrStopped (the context was cancelled)
// or ErrLeaseExpired (the deadline has passed: no heartbeat was confirmed in
// time, or the process was frozen past it). Check reads the clock itself
// instead of waiting for the member's watchdog, so a process resumed after a
// freeze refuses before any of its timers has run. Once Check has failed it
// keeps failing; the resource should stop.
//
// Check narrows the window in which a former owner works but cannot close it:
// the process can be frozen right after a successful Check. Only the token,
// checked by the store the work writes to, protects from that (see Fence).
func (l *Lease) Check() error {
	if l == nil {
		return ErrNoLease
	}
	return l.l.Check()
}

// Valid reports whether Check returns nil.
func (l *Lease) Valid() bool { return l.Check() == nil }
