package node

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

type seeded struct{ r *rand.ChaCha8 }

func (s seeded) Read(p []byte) (int, error) { return s.r.Read(p) }

// startNode runs a node on 127.0.0.1:0 with no initial rebalance delay.
func startNode(t testing.TB, st store.Store) *Node {
	t.Helper()
	if st == nil {
		st = memstore.New()
	}
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n := startLoaded(t, Config{
		Listen:    "127.0.0.1:0",
		Store:     st,
		Group:     cfg,
		Rand:      seeded{rand.NewChaCha8([32]byte{3})},
		Logger:    slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
		ClusterID: "test",
	})
	t.Cleanup(func() { n.Close() })
	return n
}

// startLoaded starts a node and waits (bounded) until its partitions have
// loaded.
func startLoaded(t testing.TB, cfg Config) *Node {
	t.Helper()
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

func client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestKafkaGoConsumerGroup: three members of segmentio/kafka-go's
// ConsumerGroup (JoinGroup v2, SyncGroup v0, Metadata for the catalog) reach
// one stable generation, split the partitions, and commit.
func TestKafkaGoConsumerGroup(t *testing.T) {
	n := startNode(t, nil)
	if _, err := n.Catalog().Create("events", 6, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const members = 3
	type result struct {
		gen    int
		member string
		parts  []int
	}
	results := make(chan result, 64)
	for i := 0; i < members; i++ {
		cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
			ID:                "kgo-group",
			Brokers:           []string{n.Addr()},
			Topics:            []string{"events"},
			HeartbeatInterval: 200 * time.Millisecond,
			SessionTimeout:    10 * time.Second, // generous: CI runs packages in parallel on 2 cores
			RebalanceTimeout:  10 * time.Second,
			JoinGroupBackoff:  100 * time.Millisecond,
			ErrorLogger:       kafka.LoggerFunc(testlog.Printf(t, "kafka-go: ")),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer cg.Close()
		go func(cg *kafka.ConsumerGroup) {
			for ctx.Err() == nil {
				gen, err := cg.Next(ctx)
				if err != nil {
					// Next also reports transient errors (e.g. a sync
					// answered REBALANCE_IN_PROGRESS); keep going.
					if ctx.Err() != nil || err == kafka.ErrGroupClosed {
						return
					}
					continue
				}
				var ps []int
				for _, a := range gen.Assignments["events"] {
					ps = append(ps, a.ID)
				}
				sort.Ints(ps)
				if len(ps) > 0 {
					offs := map[int]int64{}
					for _, p := range ps {
						offs[p] = int64(100 + p)
					}
					if err := gen.CommitOffsets(map[string]map[int]int64{"events": offs}); err != nil {
						t.Logf("commit gen %d: %v", gen.ID, err)
						// A rebalance may have started; the next generation retries.
						continue
					}
				}
				results <- result{int(gen.ID), gen.MemberID, ps}
			}
		}(cg)
	}
	// Wait for a generation in which all three members hold partitions.
	byGen := map[int]map[string][]int{}
	for {
		select {
		case r := <-results:
			if byGen[r.gen] == nil {
				byGen[r.gen] = map[string][]int{}
			}
			byGen[r.gen][r.member] = r.parts
			if len(byGen[r.gen]) == members {
				seen := map[int]bool{}
				for _, ps := range byGen[r.gen] {
					if len(ps) != 2 {
						t.Fatalf("gen %d: unbalanced %v", r.gen, byGen[r.gen])
					}
					for _, p := range ps {
						if seen[p] {
							t.Fatalf("partition %d assigned twice in gen %d", p, r.gen)
						}
						seen[p] = true
					}
				}
				// Committed offsets are visible through OffsetFetch.
				cl := client(t, n.Addr())
				req := kmsg.NewPtrOffsetFetchRequest()
				req.Group = "kgo-group"
				req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "events", Partitions: []int32{0, 1, 2, 3, 4, 5}}}
				resp, err := req.RequestWith(ctx, cl)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range resp.Topics[0].Partitions {
					if p.Offset != int64(100+p.Partition) {
						t.Fatalf("partition %d offset %d", p.Partition, p.Offset)
					}
				}
				return
			}
		case <-ctx.Done():
			t.Fatalf("no stable generation with %d members: %v", members, byGen)
		}
	}
}

// TestRawRequestsAcrossVersions sends each group API at every advertised
// version with franz-go's kmsg types and checks the answers make sense.
func TestRawRequestsAcrossVersions(t *testing.T) {
	n := startNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := client(t, n.Addr(), kgo.MaxVersions(nil))
	// A catalog topic: OffsetCommit and OffsetFetch v10 name it by ID.
	if _, err := n.Catalog().Create("t", 4, nil); err != nil {
		t.Fatal(err)
	}
	tid := catalog.TopicID("t")
	for v := int16(0); v <= 9; v++ {
		v := v
		t.Run(fmt.Sprintf("JoinSyncHeartbeatLeave/v%d", v), func(t *testing.T) {
			g := fmt.Sprintf("raw-%d", v)
			j := kmsg.NewPtrJoinGroupRequest()
			j.Version = v
			j.Group, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = g, 6000, 6000, "raw"
			j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "p", Metadata: []byte("meta")}}
			jr := requestAt(ctx, t, cl, j).(*kmsg.JoinGroupResponse)
			if v >= 4 {
				if jr.ErrorCode != group.ErrMemberIDRequired {
					t.Fatalf("v%d: %d", v, jr.ErrorCode)
				}
				j.MemberID = jr.MemberID
				jr = requestAt(ctx, t, cl, j).(*kmsg.JoinGroupResponse)
			}
			if jr.ErrorCode != 0 || jr.Generation != 1 || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 || string(jr.Members[0].ProtocolMetadata) != "meta" {
				t.Fatalf("join v%d: %+v", v, jr)
			}
			if jr.Protocol == nil || *jr.Protocol != "p" {
				t.Fatalf("join v%d: protocol", v)
			}
			sv := min(v, 5)
			s := kmsg.NewPtrSyncGroupRequest()
			s.Version = sv
			s.Group, s.MemberID, s.Generation = g, jr.MemberID, jr.Generation
			pt, p := "raw", "p"
			s.ProtocolType, s.Protocol = &pt, &p
			s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("mine")}}
			sr := requestAt(ctx, t, cl, s).(*kmsg.SyncGroupResponse)
			if sr.ErrorCode != 0 || string(sr.MemberAssignment) != "mine" {
				t.Fatalf("sync v%d: %+v", sv, sr)
			}
			hv := min(v, 4)
			h := kmsg.NewPtrHeartbeatRequest()
			h.Version = hv
			h.Group, h.MemberID, h.Generation = g, jr.MemberID, jr.Generation
			if hr := requestAt(ctx, t, cl, h).(*kmsg.HeartbeatResponse); hr.ErrorCode != 0 {
				t.Fatalf("heartbeat v%d: %d", hv, hr.ErrorCode)
			}
			for cv := int16(2); cv <= 10; cv++ {
				c := kmsg.NewPtrOffsetCommitRequest()
				c.Version = cv
				c.Group, c.MemberID, c.Generation = g, jr.MemberID, jr.Generation
				pp := kmsg.NewOffsetCommitRequestTopicPartition()
				pp.Partition, pp.Offset = 3, int64(cv)*10
				c.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", TopicID: tid, Partitions: []kmsg.OffsetCommitRequestTopicPartition{pp}}}
				cr := requestAt(ctx, t, cl, c).(*kmsg.OffsetCommitResponse)
				if cr.Topics[0].Partitions[0].ErrorCode != 0 {
					t.Fatalf("commit v%d: %d", cv, cr.Topics[0].Partitions[0].ErrorCode)
				}
				if cv >= 10 && cr.Topics[0].TopicID != tid {
					t.Fatalf("commit v%d answered topic ID %x", cv, cr.Topics[0].TopicID)
				}
				for fv := int16(1); fv <= 10; fv++ {
					f := kmsg.NewPtrOffsetFetchRequest()
					f.Version = fv
					var got int64 = -9
					if fv >= 8 {
						f.Groups = []kmsg.OffsetFetchRequestGroup{{Group: g, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", TopicID: tid, Partitions: []int32{3}}}}}
						fr := requestAt(ctx, t, cl, f).(*kmsg.OffsetFetchResponse)
						got = fr.Groups[0].Topics[0].Partitions[0].Offset
					} else {
						f.Group = g
						f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{3}}}
						fr := requestAt(ctx, t, cl, f).(*kmsg.OffsetFetchResponse)
						got = fr.Topics[0].Partitions[0].Offset
					}
					if got != int64(cv)*10 {
						t.Fatalf("commit v%d fetch v%d: %d", cv, fv, got)
					}
				}
			}
			for dv := int16(0); dv <= 6; dv++ {
				d := kmsg.NewPtrDescribeGroupsRequest()
				d.Version = dv
				d.Groups = []string{g}
				dr := requestAt(ctx, t, cl, d).(*kmsg.DescribeGroupsResponse)
				if dr.Groups[0].State != "Stable" || len(dr.Groups[0].Members) != 1 || string(dr.Groups[0].Members[0].MemberAssignment) != "mine" {
					t.Fatalf("describe v%d: %+v", dv, dr.Groups[0])
				}
			}
			lv := min(v, 5)
			l := kmsg.NewPtrLeaveGroupRequest()
			l.Version = lv
			l.Group = g
			if lv < 3 {
				l.MemberID = jr.MemberID
			} else {
				l.Members = []kmsg.LeaveGroupRequestMember{{MemberID: jr.MemberID}}
			}
			if lr := requestAt(ctx, t, cl, l).(*kmsg.LeaveGroupResponse); lr.ErrorCode != 0 {
				t.Fatalf("leave v%d: %d", lv, lr.ErrorCode)
			}
			for lgv := int16(0); lgv <= 5; lgv++ {
				lg := kmsg.NewPtrListGroupsRequest()
				lg.Version = lgv
				lr := requestAt(ctx, t, cl, lg).(*kmsg.ListGroupsResponse)
				found := false
				for _, x := range lr.Groups {
					if x.Group == g {
						found = true
						if lgv >= 4 && x.GroupState != "Empty" {
							t.Fatalf("list v%d: state %s", lgv, x.GroupState)
						}
					}
				}
				if !found {
					t.Fatalf("list v%d: group missing", lgv)
				}
			}
			od := kmsg.NewPtrOffsetDeleteRequest()
			od.Group = g
			od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 3}}}}
			if r := requestAt(ctx, t, cl, od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("offset delete: %+v", r)
			}
			dgv := min(v, 3)
			dg := kmsg.NewPtrDeleteGroupsRequest()
			dg.Version = dgv
			dg.Groups = []string{g}
			if r := requestAt(ctx, t, cl, dg).(*kmsg.DeleteGroupsResponse); r.Groups[0].ErrorCode != 0 {
				t.Fatalf("delete v%d: %d", dgv, r.Groups[0].ErrorCode)
			}
		})
	}
}

func requestAt(ctx context.Context, t *testing.T, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	v := req.GetVersion()
	resp, err := cl.Request(ctx, &pinned{req, v})
	if err != nil {
		t.Fatalf("%T v%d: %v", req, v, err)
	}
	if resp.GetVersion() != v {
		t.Fatalf("%T: response version %d, want %d", req, resp.GetVersion(), v)
	}
	return resp
}

// pinned keeps kgo from raising a request's version to the broker's max.
type pinned struct {
	kmsg.Request
	v int16
}

func (p *pinned) SetVersion(int16)  { p.Request.SetVersion(p.v) }
func (p *pinned) MaxVersion() int16 { return p.v }
