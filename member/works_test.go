package member

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// churnCoordinator is a coordinator of a one-member group that starts a
// rebalance at every heartbeat: each of its generations is a new one for the
// member.
type churnCoordinator struct {
	mu  sync.Mutex
	gen int32
}

func (c *churnCoordinator) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		c.gen++
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		p := r.Protocols[0].Name
		resp.Generation, resp.Protocol, resp.LeaderID, resp.MemberID = c.gen, &p, "m1", "m1"
		resp.Members = []kmsg.JoinGroupResponseMember{{MemberID: "m1", ProtocolMetadata: r.Protocols[0].Metadata}}
		return resp, nil
	case *kmsg.SyncGroupRequest:
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.MemberAssignment = []byte("all")
		return resp, nil
	case *kmsg.HeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp, nil
	default:
		return req.ResponseKind(), nil
	}
}

// TestWorkContextsNotKept: a member keeps no work context of a generation it
// has left. Each generation's Assigned gets a new context, cancelled when the
// generation ends; the member used to keep every one of them for as long as
// it ran, so a member rebalancing for months grew by one per rebalance.
func TestWorkContextsNotKept(t *testing.T) {
	const gens = 200
	assigned := make(chan context.Context, gens)
	var once sync.Once
	reached := make(chan struct{})
	m, err := Start(Config{
		Client:       &churnCoordinator{},
		Group:        "g",
		ProtocolType: "test",
		Protocols:    func() []Protocol { return []Protocol{{Name: "p1", Metadata: []byte("m")}} },
		Assign: func(_ context.Context, g Generation) (map[string][]byte, error) {
			return map[string][]byte{"m1": []byte("all")}, nil
		},
		SessionTimeout:    time.Second,
		HeartbeatInterval: time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		Assigned: func(ctx context.Context, g Generation) {
			if g.ID <= gens {
				assigned <- ctx
			}
			if g.ID == gens {
				once.Do(func() { close(reached) })
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.Close(ctx)
	}()
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the member did not reach generation %d within 30s (%d assignments)", gens, len(assigned))
	}
	// Every earlier generation's context was cancelled when it ended.
	for range gens - 1 {
		if ctx := <-assigned; context.Cause(ctx) == nil {
			t.Fatal("the context of a generation that ended is not cancelled")
		}
	}
	m.mu.Lock()
	n := len(m.works)
	m.mu.Unlock()
	// The current generation's, and the next one's if it began meanwhile.
	if n > 2 {
		t.Fatalf("the member keeps %d work contexts after %d generations, want at most 2", n, gens)
	}
}
