// Package election elects a single writer among the processes of a group:
// exactly one of them runs the caller's function at a time, the others stand
// by and one of them takes over when the writer goes away.
//
// The writer's function receives a fencing token, the generation in which
// the process became the writer. Tokens only grow from one writer to the next,
// so a resource that remembers the highest token it has seen (see Fence) can
// refuse a write from a former writer that has not noticed yet that it was
// replaced — a paused process, for example.
//
// The writer keeps its role across rebalances as long as it stays in the
// group: each candidate announces in its JoinGroup metadata whether it writes
// and since which generation, and the leader's assignment keeps a current
// writer. A new writer is chosen only when no member claims the role, i.e.
// after the old writer has stopped and left, or after the coordinator expired
// it; a writer that cannot reach the coordinator stops on its own before that
// can happen (member's local loss detection).
package election

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"sort"
	"sync"

	"github.com/cohort-dev/cohort/member"
)

// ProtocolType and Protocol are what candidates announce in JoinGroup.
const (
	ProtocolType = "election"
	Protocol     = "single-writer-v1"
)

// Func is the writer's work. It runs only while this process is the writer and
// must return soon after ctx is cancelled (within member.Config.LostMargin
// when the role is lost). token is the fencing token of this term.
type Func func(ctx context.Context, token int32)

// Config configures a candidate.
type Config struct {
	// Member holds the connection and timing settings (Client, or Brokers
	// with ClientOpts such as TLS and SASL, Group, InstanceID, timeouts,
	// Clock, Logger). The election sets the protocol and the callbacks
	// itself.
	Member member.Config
}

// Election is one candidate.
type Election struct {
	m   *member.Member
	fn  Func
	log *slog.Logger

	mu      sync.Mutex
	token   int32 // current term's token; -1 when not writing
	cancel  context.CancelFunc
	stopped chan struct{} // closed when fn returns
}

// Start joins the election group. fn runs whenever this process becomes the
// writer.
func Start(cfg Config, fn Func) (*Election, error) {
	if fn == nil {
		return nil, errors.New("election: nil Func")
	}
	e := &Election{fn: fn, token: -1}
	mc := cfg.Member
	e.log = mc.Logger
	if e.log == nil {
		e.log = slog.Default()
	}
	mc.ProtocolType = ProtocolType
	mc.Protocols = func() []member.Protocol {
		return []member.Protocol{{Name: Protocol, Metadata: encodeClaim(e.Token())}}
	}
	mc.Assign = func(_ context.Context, g member.Generation) (map[string][]byte, error) { return assign(g), nil }
	mc.Cooperative = true
	mc.Assigned = e.assigned
	mc.Revoked = func(member.Generation) { e.stop() }
	mc.Lost = func(member.Generation, error) { e.stop() }
	m, err := member.Start(mc)
	if err != nil {
		return nil, err
	}
	e.m = m
	return e, nil
}

// Token returns the token of the current term, or -1 when this process is not
// the writer.
func (e *Election) Token() int32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.token
}

// Close stops writing (waiting for fn to return) and leaves the group, so
// another candidate takes over after one rebalance.
func (e *Election) Close(ctx context.Context) error { return e.m.Close(ctx) }

// Abandon stops as a crash would: fn's context is cancelled and the group is
// not told; another candidate takes over once the session times out.
func (e *Election) Abandon() { e.m.Abandon() }

// Done is closed when the candidate has stopped.
func (e *Election) Done() <-chan struct{} { return e.m.Done() }

func (e *Election) assigned(ctx context.Context, g member.Generation) {
	token, writer := decodeAssignment(g.Assignment)
	e.mu.Lock()
	running := e.token >= 0
	e.mu.Unlock()
	switch {
	case writer && !running:
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		e.mu.Lock()
		e.token, e.cancel, e.stopped = token, cancel, done
		e.mu.Unlock()
		e.log.Info("became the writer", "member", g.MemberID, "token", token)
		go func() {
			defer close(done)
			e.fn(fctx, token)
		}()
	case !writer && running:
		// Only if two members claimed the role: both give it up and the
		// next rebalance picks one.
		e.stop()
		e.m.Rejoin()
	}
}

// stop cancels fn and waits for it to return.
func (e *Election) stop() {
	e.mu.Lock()
	cancel, done := e.cancel, e.stopped
	e.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	e.mu.Lock()
	e.token, e.cancel, e.stopped = -1, nil, nil
	e.mu.Unlock()
}

// assign keeps the one member that claims the role, or when none (or more
// than one) claims it, picks the claimant-free choice: no writer while two
// claim it, otherwise the member with the smallest id, with this generation
// as token.
func assign(g member.Generation) map[string][]byte {
	out := make(map[string][]byte, len(g.Members))
	var claimants []member.GroupMember
	ids := make([]string, 0, len(g.Members))
	for _, mm := range g.Members {
		out[mm.ID] = nil
		ids = append(ids, mm.ID)
		if decodeClaim(mm.Metadata) >= 0 {
			claimants = append(claimants, mm)
		}
	}
	switch len(claimants) {
	case 0:
		sort.Strings(ids)
		if len(ids) > 0 {
			out[ids[0]] = encodeAssignment(g.ID)
		}
	case 1:
		out[claimants[0].ID] = encodeAssignment(decodeClaim(claimants[0].Metadata))
	default:
		// Two processes believe they write; both must stop before anyone
		// is chosen again.
	}
	return out
}

// Metadata: version byte 0, then the int32 token this member writes under
// (-1: not writing). Assignment: version byte 0, then the token (empty: not
// the writer).
func encodeClaim(token int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{0}, uint32(token))
}

func decodeClaim(b []byte) int32 {
	if len(b) < 5 {
		return -1
	}
	return int32(binary.BigEndian.Uint32(b[1:5]))
}

func encodeAssignment(token int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{0}, uint32(token))
}

func decodeAssignment(b []byte) (int32, bool) {
	if len(b) < 5 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(b[1:5])), true
}
