package kgobalancer

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/consumer"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/sticky"
)

// Under the eager protocol kgo passes no current assignment to
// JoinGroupMetadata; the adapter must still announce the last assignment in
// the sticky user data, or the group loses stickiness at every rebalance.
func TestEagerStickyRemembersLastAssignment(t *testing.T) {
	b := New(sticky.New())
	a := consumer.Assignment{Version: 0, Partitions: []assign.TopicPartitions{{Topic: "t", Partitions: []int32{1, 3}}}}
	raw, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ParseSyncAssignment(raw); err != nil {
		t.Fatal(err)
	}
	meta := b.JoinGroupMetadata([]string{"t"}, nil, 4)
	sub, err := consumer.DecodeSubscription(meta)
	if err != nil {
		t.Fatal(err)
	}
	if len(sub.Owned) != 0 {
		t.Fatalf("eager member announces owned partitions %v", sub.Owned)
	}
	var ud kmsg.StickyMemberMetadata
	if err := ud.ReadFrom(sub.UserData); err != nil {
		t.Fatal(err)
	}
	if len(ud.CurrentAssignment) != 1 || ud.CurrentAssignment[0].Topic != "t" || len(ud.CurrentAssignment[0].Partitions) != 2 || ud.Generation != 4 {
		t.Fatalf("sticky user data %+v", ud)
	}
}
