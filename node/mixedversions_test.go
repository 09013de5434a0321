package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
)

// TestRawRequestsMixedGroupAcrossVersions: a classic member joins a
// consumer-protocol group at every JoinGroup version (as an old client in a
// group a KIP-848 consumer leads), and each classic API answers at the
// request's version with an error that version knows: MEMBER_ID_REQUIRED
// only from JoinGroup v4 (KIP-394), the protocol type only from v7,
// SyncGroup's protocol fields only at v5; OffsetCommit from the classic
// member at every version, ILLEGAL_GENERATION (not STALE_MEMBER_EPOCH) for
// its wrong generation, UNSUPPORTED_VERSION for the consumer-protocol member
// below v9; DescribeGroups answers the consumer group as a missing one
// (Dead, GROUP_ID_NOT_FOUND only from v6); LeaveGroup puts the member's
// answer at the top level below v3.
func TestRawRequestsMixedGroupAcrossVersions(t *testing.T) {
	n := startNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := client(t, n.Addr(), kgo.MaxVersions(nil))
	if _, err := n.Catalog().Create("t", 4, nil); err != nil {
		t.Fatal(err)
	}
	tid := catalog.TopicID("t")
	for v := int16(0); v <= 9; v++ {
		t.Run(fmt.Sprintf("JoinGroup/v%d", v), func(t *testing.T) {
			g := fmt.Sprintf("mixed-%d", v)
			h := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			h.Version = 1
			h.Group, h.MemberID, h.MemberEpoch, h.RebalanceTimeoutMillis = g, fmt.Sprintf("next-gen-member-%d", v), 0, 5000
			h.SubscribedTopicNames = []string{"t"}
			h.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			hr := requestAt(ctx, t, cl, h).(*kmsg.ConsumerGroupHeartbeatResponse)
			if hr.ErrorCode != 0 || hr.MemberEpoch < 1 {
				t.Fatalf("consumer heartbeat: error %d epoch %d", hr.ErrorCode, hr.MemberEpoch)
			}

			meta := kmsg.NewConsumerMemberMetadata()
			meta.Topics = []string{"t"}
			j := kmsg.NewPtrJoinGroupRequest()
			j.Version = v
			j.Group, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = g, 6000, 6000, "consumer"
			j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
			jr := requestAt(ctx, t, cl, j).(*kmsg.JoinGroupResponse)
			if v >= 4 {
				if jr.ErrorCode != group.ErrMemberIDRequired || jr.MemberID == "" {
					t.Fatalf("join v%d without a member id: error %d, member %q", v, jr.ErrorCode, jr.MemberID)
				}
				j.MemberID = jr.MemberID
				jr = requestAt(ctx, t, cl, j).(*kmsg.JoinGroupResponse)
			}
			if jr.ErrorCode != 0 || jr.MemberID == "" || jr.Generation <= hr.MemberEpoch {
				t.Fatalf("join v%d: error %d, member %q, generation %d", v, jr.ErrorCode, jr.MemberID, jr.Generation)
			}
			if jr.Protocol == nil || *jr.Protocol != "range" {
				t.Fatalf("join v%d: protocol %v", v, jr.Protocol)
			}
			if v >= 7 && (jr.ProtocolType == nil || *jr.ProtocolType != "consumer") {
				t.Fatalf("join v%d: protocol type %v", v, jr.ProtocolType)
			}

			sv := min(v, 5)
			s := kmsg.NewPtrSyncGroupRequest()
			s.Version = sv
			s.Group, s.MemberID, s.Generation = g, jr.MemberID, jr.Generation
			pt, p := "consumer", "range"
			s.ProtocolType, s.Protocol = &pt, &p
			sr := requestAt(ctx, t, cl, s).(*kmsg.SyncGroupResponse)
			var a kmsg.ConsumerMemberAssignment
			if sr.ErrorCode != 0 || a.ReadFrom(sr.MemberAssignment) != nil {
				t.Fatalf("sync v%d: error %d, assignment %x", sv, sr.ErrorCode, sr.MemberAssignment)
			}
			if sv >= 5 && (sr.ProtocolType == nil || *sr.ProtocolType != "consumer" || sr.Protocol == nil || *sr.Protocol != "range") {
				t.Fatalf("sync v%d: protocol type %v, protocol %v", sv, sr.ProtocolType, sr.Protocol)
			}

			hv := min(v, 4)
			for _, tc := range []struct {
				member string
				gen    int32
				want   int16
			}{
				{jr.MemberID, jr.Generation, 0},
				{jr.MemberID, jr.Generation + 5, group.ErrIllegalGeneration},
				{"nobody", jr.Generation, group.ErrUnknownMemberID},
			} {
				hb := kmsg.NewPtrHeartbeatRequest()
				hb.Version = hv
				hb.Group, hb.MemberID, hb.Generation = g, tc.member, tc.gen
				if got := requestAt(ctx, t, cl, hb).(*kmsg.HeartbeatResponse).ErrorCode; got != tc.want {
					t.Fatalf("heartbeat v%d member %q generation %d: error %d, want %d", hv, tc.member, tc.gen, got, tc.want)
				}
			}

			for cv := int16(2); cv <= 10; cv++ {
				consumerWant := int16(0)
				if cv < 9 {
					consumerWant = group.ErrUnsupportedVersion
				}
				for _, tc := range []struct {
					what   string
					member string
					gen    int32
					want   int16
				}{
					{"classic member", jr.MemberID, jr.Generation, 0},
					{"classic member, wrong generation", jr.MemberID, jr.Generation + 3, group.ErrIllegalGeneration},
					{"consumer-protocol member", h.MemberID, hr.MemberEpoch, consumerWant},
				} {
					c := kmsg.NewPtrOffsetCommitRequest()
					c.Version = cv
					c.Group, c.MemberID, c.Generation = g, tc.member, tc.gen
					pp := kmsg.NewOffsetCommitRequestTopicPartition()
					pp.Partition, pp.Offset = 3, int64(cv)
					c.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", TopicID: tid, Partitions: []kmsg.OffsetCommitRequestTopicPartition{pp}}}
					cr := requestAt(ctx, t, cl, c).(*kmsg.OffsetCommitResponse)
					if got := cr.Topics[0].Partitions[0].ErrorCode; got != tc.want {
						t.Fatalf("commit v%d, %s: error %d, want %d", cv, tc.what, got, tc.want)
					}
				}
			}

			for dv := int16(0); dv <= 6; dv++ {
				d := kmsg.NewPtrDescribeGroupsRequest()
				d.Version = dv
				d.Groups = []string{g}
				dg := requestAt(ctx, t, cl, d).(*kmsg.DescribeGroupsResponse).Groups[0]
				want := int16(0)
				if dv >= 6 {
					want = group.ErrGroupIDNotFound
				}
				if dg.ErrorCode != want || dg.State != "Dead" || len(dg.Members) != 0 {
					t.Fatalf("describe v%d: error %d, state %q, %d members", dv, dg.ErrorCode, dg.State, len(dg.Members))
				}
			}

			lv := min(v, 5)
			for _, want := range []int16{0, group.ErrUnknownMemberID} {
				l := kmsg.NewPtrLeaveGroupRequest()
				l.Version = lv
				l.Group = g
				if lv < 3 {
					l.MemberID = jr.MemberID
				} else {
					l.Members = []kmsg.LeaveGroupRequestMember{{MemberID: jr.MemberID}}
				}
				lr := requestAt(ctx, t, cl, l).(*kmsg.LeaveGroupResponse)
				got := lr.ErrorCode
				if lv >= 3 {
					if lr.ErrorCode != 0 || len(lr.Members) != 1 {
						t.Fatalf("leave v%d: error %d, members %+v", lv, lr.ErrorCode, lr.Members)
					}
					got = lr.Members[0].ErrorCode
				}
				if got != want {
					t.Fatalf("leave v%d: error %d, want %d", lv, got, want)
				}
			}
		})
	}
}
