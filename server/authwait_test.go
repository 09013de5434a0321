package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/sasl"
)

// waitMech is a mechanism whose one step waits (as PLAIN waits for a slot
// to check a password in) until its context ends, and reports why.
type waitMech struct{ ended chan error }

func (waitMech) Name() string          { return "WAIT" }
func (m waitMech) Start() sasl.Session { return &waitSession{m: m} }
func (*waitSession) Principal() string { return "User:w" }
func (*waitSession) Expiry() time.Time { return time.Time{} }
func (s *waitSession) Step([]byte) ([]byte, bool, error) {
	panic("the server must call StepContext of a ContextStepper")
}

type waitSession struct{ m waitMech }

func (s *waitSession) StepContext(ctx context.Context, _ []byte) ([]byte, bool, error) {
	<-ctx.Done()
	s.m.ended <- ctx.Err()
	return nil, false, sasl.ErrAuthFailed
}

// TestSASLWaitingStepGivenUp: a step that waits (PLAIN's password check
// queued behind others) is given up when its client hangs up, and at the
// exchange's authentication deadline: a burst of guesses from clients that
// then left must not hold the password checks, and everyone else's logins,
// long after they left.
func TestSASLWaitingStepGivenUp(t *testing.T) {
	m := waitMech{ended: make(chan error, 1)}
	ts := startServer(t, func(c *Config) {
		c.Listen = ""
		c.Listeners = []Listener{{Protocol: ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}
		c.Security = &Security{Mechanisms: map[string]sasl.Mechanism{"WAIT": m}, FailedAuthDelay: time.Millisecond,
			AuthTimeout: time.Minute, Authorizer: allowAll{}}
		c.hangupWatchDelay = 20 * time.Millisecond
	})
	// A client that sends its token and hangs up.
	c := ts.dial(t)
	if h := handshake(t, c, 1, "WAIT"); h.ErrorCode != 0 {
		t.Fatalf("handshake: %d", h.ErrorCode)
	}
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = []byte("guess")
	c.send(req, 1)
	time.Sleep(50 * time.Millisecond) // the step is under way (it cannot end before the hang-up: a minute's deadline)
	c.nc.Close()
	select {
	case err := <-m.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("step ended by %v, want the hang-up (canceled)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting step was not given up 10s after its client hung up")
	}

	// A client that stays, past its authentication deadline.
	ts2 := startServer(t, func(c *Config) {
		c.Listen = ""
		c.Listeners = []Listener{{Protocol: ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}
		c.Security = &Security{Mechanisms: map[string]sasl.Mechanism{"WAIT": m}, FailedAuthDelay: time.Millisecond,
			AuthTimeout: 300 * time.Millisecond, Authorizer: allowAll{}}
	})
	c2 := ts2.dial(t)
	handshake(t, c2, 1, "WAIT")
	c2.send(req, 2)
	select {
	case err := <-m.ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("step ended by %v, want the authentication deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting step outlived its authentication deadline by 10s")
	}
	// Answered as a failed authentication if the socket still takes it,
	// then closed.
	if _, _, err := c2.recvFrame(); err == nil {
		c2.expectClosed()
	}
}
