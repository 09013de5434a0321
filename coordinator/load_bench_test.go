package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/disk"
)

// largeState builds, once per process, a disk store holding groups groups
// of 3 members each (metadata ~1.3 KB with assignments) and perGroup
// committed offsets per group, produced by the real state machine.
var largeState struct {
	sync.Once
	dir     string
	records int
	err     error
}

func buildLargeState(b testing.TB, dir string, groups, perGroup, partitions int) int {
	st, err := disk.Open(disk.Options{Dir: dir, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = time.Second
	shards := make([]*group.Shard, partitions)
	for i := range shards {
		shards[i] = group.NewShard(cfg, seeded{rand.NewChaCha8([32]byte{byte(i)})})
	}
	now := time.UnixMilli(1_700_000_000_000)
	pending := make([][]store.Record, partitions)
	total := 0
	flush := func(p int) {
		if len(pending[p]) == 0 {
			return
		}
		if err := st.Append(context.Background(), int32(p), pending[p]); err != nil {
			b.Fatal(err)
		}
		total += len(pending[p])
		pending[p] = pending[p][:0]
	}
	var out group.Output
	var tick group.Ticket
	drain := func(p int) []kmsg.Response {
		var resps []kmsg.Response
		for len(out.Replies)+len(out.Writes) > 0 {
			for _, r := range out.Replies {
				resps = append(resps, r.Resp)
			}
			writes := append([]group.Write(nil), out.Writes...)
			out.Reset()
			for _, w := range writes {
				for _, r := range w.Records {
					pending[p] = append(pending[p], store.Record{Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...)})
				}
				shards[p].WriteDone(now, w.ID, group.ErrNone, &out)
			}
		}
		if len(pending[p]) >= 4096 {
			flush(p)
		}
		return resps
	}
	meta := make([]byte, 120) // a consumer subscription's size
	for gi := 0; gi < groups; gi++ {
		id := fmt.Sprintf("group-%05d", gi)
		p := int(PartitionFor(id, partitions))
		s := shards[p]
		for m := 0; m < 3; m++ {
			j := kmsg.NewPtrJoinGroupRequest()
			j.Version, j.Group, j.ProtocolType = 3, id, "consumer"
			j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 30000, 30000
			j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta}}
			tick++
			s.JoinGroup(now, tick, group.Client{ID: "load"}, j, &out)
		}
		drain(p)
		for i := 0; i < 100 && len(out.Replies) == 0; i++ { // initial delay (extended once per arrival) ends: generation 1
			at, _ := s.NextDeadline()
			s.Tick(at, &out)
		}
		var leader string
		var gen int32
		var ids []string
		for _, r := range drain(p) {
			jr := r.(*kmsg.JoinGroupResponse)
			leader, gen = jr.LeaderID, jr.Generation
			ids = append(ids, jr.MemberID)
		}
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Group, sync.MemberID, sync.Generation = id, leader, gen
		for _, mid := range ids {
			sync.GroupAssignment = append(sync.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: mid, MemberAssignment: make([]byte, 300)})
		}
		tick++
		s.SyncGroup(now.Add(time.Second), tick, sync, &out)
		drain(p)
		c := kmsg.NewPtrOffsetCommitRequest()
		c.Version, c.Group, c.MemberID, c.Generation = 8, id, leader, gen
		for t := 0; t < perGroup/50; t++ {
			topic := kmsg.OffsetCommitRequestTopic{Topic: fmt.Sprintf("topic-%d", t)}
			for part := 0; part < 50; part++ {
				meta := ""
				topic.Partitions = append(topic.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: int32(part), Offset: int64(gi*1000 + part), LeaderEpoch: -1, Metadata: &meta})
			}
			c.Topics = append(c.Topics, topic)
		}
		tick++
		s.OffsetCommit(now.Add(time.Second), tick, c, &out)
		drain(p)
	}
	for p := range pending {
		flush(p)
	}
	if err := st.Compact(context.Background()); err != nil {
		b.Fatal(err)
	}
	return total
}

// BenchmarkLoadLargeState measures how long a coordinator takes from start
// until every partition has loaded (store scan + decoding into groups), for
// 10,000 groups (3 members each, ~1.3 KB metadata) and 1,000,000 committed
// offsets on the embedded disk store.
//
//	go test -run '^$' -bench LoadLargeState -benchtime 3x ./coordinator/
func BenchmarkLoadLargeState(b *testing.B) {
	const groups, perGroup, partitions = 10_000, 100, 50
	largeState.Do(func() {
		// Shared by every invocation of the benchmark (b.TempDir would be
		// removed after the first); TestMain removes it.
		dir, err := os.MkdirTemp("", "cohort-load-bench")
		if err != nil {
			b.Fatal(err)
		}
		largeState.dir = dir
		start := time.Now()
		largeState.records = buildLargeState(b, largeState.dir, groups, perGroup, partitions)
		b.Logf("built %d records in %v", largeState.records, time.Since(start))
	})
	st, err := disk.Open(disk.Options{Dir: largeState.dir})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := New(Config{Partitions: partitions, Group: group.Defaults(), Store: st})
		if err != nil {
			b.Fatal(err)
		}
		c.Start()
		if err := c.WaitLoaded(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		var n, offs int
		for _, p := range c.parts {
			n += p.shardForTest().Len()
			for _, id := range p.shardForTest().GroupIDs() {
				offs += p.shardForTest().Group(id).NumOffsets()
			}
		}
		if n != groups || offs != groups*perGroup {
			b.Fatalf("loaded %d groups, %d offsets", n, offs)
		}
		c.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(largeState.records), "records")
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(loadChildEnv); dir != "" {
		if err := loadChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, "load child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if largeState.dir != "" {
		os.RemoveAll(largeState.dir)
	}
	os.Exit(code)
}
