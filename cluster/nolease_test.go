package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/server"
)

// TestSimCutOffNodeNamesNoStaleOwners: a node cut off from the store past
// its lease stops serving, and from then on tells clients nothing from its
// stale view: FindCoordinator (Coordinator) is COORDINATOR_NOT_AVAILABLE for
// every group, never itself, and the controller it names is another node.
// Once reconnected it answers again.
func TestSimCutOffNodeNamesNoStaleOwners(t *testing.T) {
	s := startSim(t, 3, 3*time.Second)
	v := s.node(1) // the lowest id: the controller while it serves
	if got := v.c.ControllerID(); got != 1 {
		t.Fatalf("controller %d while node 1 serves, want 1", got)
	}
	if len(v.c.OwnedPartitions()) == 0 {
		t.Fatal("node 1 owns nothing")
	}
	v.cl.Cut(true)
	for i := 0; i < 100 && v.c.Serving(); i++ {
		s.round(50 * time.Millisecond)
	}
	if v.c.Serving() {
		t.Fatal("cut-off node still serving")
	}
	s.settle(250*time.Millisecond, 10*time.Second) // the others take its partitions
	for i := 0; i < 200; i++ {
		g := fmt.Sprintf("g-%d", i)
		if b, code := v.c.Coordinator(g); code != 15 {
			t.Fatalf("Coordinator(%s) (partition %d) at the cut-off node: node %d, code %d; want 15", g, coordinator.PartitionFor(g, simParts), b.NodeID, code)
		}
	}
	if got := v.c.ControllerID(); got == 1 || got < 0 {
		t.Fatalf("cut-off node 1 names controller %d, want another node it knows", got)
	}
	v.cl.Cut(false)
	s.settle(250*time.Millisecond, 10*time.Second)
	if b, code := v.c.Coordinator("g-0"); code != 0 || b.NodeID != s.node(2).c.Owner(coordinator.PartitionFor("g-0", simParts)) {
		t.Fatalf("reconnected: Coordinator(g-0) = node %d code %d", b.NodeID, code)
	}
	if got := v.c.ControllerID(); got != 1 {
		t.Fatalf("reconnected: controller %d, want 1", got)
	}
}

// TestSimLoneNodeWithoutLeaseNamesNoController: a node that knows no other
// node names no controller (-1) while it has no lease, not itself.
func TestSimLoneNodeWithoutLeaseNamesNoController(t *testing.T) {
	s := startSim(t, 1, 3*time.Second)
	v := s.node(1)
	v.cl.Cut(true)
	for i := 0; i < 100 && v.c.Serving(); i++ {
		s.round(50 * time.Millisecond)
	}
	if got := v.c.ControllerID(); got != -1 {
		t.Fatalf("lone node without lease names controller %d, want -1", got)
	}
}

// TestSimDuplicateNodeIDListsLiveNodes: a second process started with a
// live node's id cannot register; meanwhile it lists the live nodes (the
// first process at its own address), not itself as a one-node cluster.
func TestSimDuplicateNodeIDListsLiveNodes(t *testing.T) {
	s := startSim(t, 3, 3*time.Second)
	dup, err := New(Config{Leases: s.mem.Client(), Fence: &simFence{revs: map[int32]int64{}}, NodeID: 1, Partitions: simParts,
		LeaseTTL: s.ttl, Clock: s.clk, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	dup.coord = &simCoord{held: map[int32]bool{}}
	dup.SetSelf(server.Broker{Host: "dup", Port: 9})
	if err := dup.join(s.ctx); err == nil {
		t.Fatal("a second node 1 registered")
	}
	dup.releaseAll("join failed")
	bs := dup.Brokers()
	if len(bs) != 3 {
		t.Fatalf("the duplicate lists brokers %v, want the 3 live nodes", bs)
	}
	for _, b := range bs {
		if b.Host == "dup" {
			t.Fatalf("the duplicate lists itself: %v", bs)
		}
	}
	if got := dup.ControllerID(); got != 2 {
		t.Fatalf("the duplicate names controller %d, want 2 (the lowest live node not sharing its id)", got)
	}
	if _, code := dup.Coordinator("g"); code != 15 {
		t.Fatalf("the duplicate answers Coordinator with code %d, want 15", code)
	}
}

// TestSimLeaveAfterExpiredLeaseNoWarning: a node whose earlier lease expired
// while it was cut off, then rejoined, leaves without a warning about that
// lease (it is gone already), and revokes its current one.
func TestSimLeaveAfterExpiredLeaseNoWarning(t *testing.T) {
	s := startSim(t, 3, 3*time.Second)
	v := s.node(3)
	old := v.c.View().Lease
	v.cl.Cut(true)
	for i := 0; i < 200; i++ {
		s.round(50 * time.Millisecond)
		if _, ok := s.mem.LeaseExpiry(old); !ok && !v.c.Serving() {
			break
		}
	}
	if _, ok := s.mem.LeaseExpiry(old); ok {
		t.Fatal("the cut-off node's lease did not expire")
	}
	v.cl.Cut(false)
	// As run does: the next session joins without revoking first.
	if err := v.c.join(s.ctx); err != nil {
		t.Fatal(err)
	}
	cur := v.c.View().Lease
	var logs bytes.Buffer
	v.c.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	v.c.leave()
	v.left = true
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("leaving after an expired lease warned:\n%s", logs.String())
	}
	if _, ok := s.mem.LeaseExpiry(cur); ok {
		t.Error("the current lease was not revoked")
	}
}
