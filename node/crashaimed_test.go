package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/testkafka"
)

// TestCrashAimedAtInflightCommits differs from
// TestCrashKeepsAcknowledgedCommits in where the SIGKILL lands: not at a
// random moment but by the committer that receives the round's N-th
// acknowledgement, at once, while the other committers' commits are on the
// wire (the number in flight at the kill is counted and must not be zero in
// every round). Each committer commits increasing offsets, one request at a
// time, to partitions only it writes, with the offset in the metadata too.
// After a restart on the same data directory, for every partition: the
// stored offset is at least the last acknowledged one (acknowledged means
// durable), at most the last one sent (nothing newer than what any client
// sent), its metadata is that of the same commit (no torn record), and a
// partition never committed to has nothing; every group answers OffsetFetch
// and DescribeGroups without an error.
//
// A process kill cannot tell a missing fsync from a present one (the page
// cache survives the process); what it catches is an acknowledgement sent
// before the commit reached the store, or a restart that does not load what
// the store holds. store/disk's crash tests cover the fsync itself.
func TestCrashAimedAtInflightCommits(t *testing.T) {
	bin := cohortBinary(t)
	dir := t.TempDir()
	addr := freePort(t)
	child := startChild(t, bin, dir, addr)
	defer func() { child.Process.Kill(); child.Wait() }()

	const (
		committers = 16
		groups     = 4
		perWorker  = 2 // partitions each committer commits to
		partitions = committers / groups * perWorker
		rounds     = 10
		topic      = "t"
	)
	start := time.Now()
	rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), 52))
	groupOf := func(w int) string { return fmt.Sprintf("aimed-%d", w%groups) }
	// partOf is the i-th partition committer w writes: committers of one
	// group take disjoint partitions.
	partOf := func(w, i int) int32 { return int32((w/groups)*perWorker + i) }
	type key struct {
		group string
		part  int32
	}
	var mu sync.Mutex
	sent := map[key]int64{}  // last offset sent (acknowledged or not)
	acked := map[key]int64{} // last offset acknowledged
	nextOff := make([]int64, committers)
	// An untouched group: it must read as empty after every restart.
	const untouched = "aimed-untouched"

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), byname.Opt())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	verify := func(round int) {
		mu.Lock()
		defer mu.Unlock()
		for g := 0; g <= groups; g++ {
			group := untouched
			if g < groups {
				group = groupOf(g)
			}
			resp := testkafka.FetchOffsets(t, cl, group, topic, partitions, 20*time.Second)
			for _, p := range resp.Topics[0].Partitions {
				k := key{group, p.Partition}
				s, wasSent := sent[k]
				a, wasAcked := acked[k]
				switch {
				case !wasSent:
					if p.Offset != -1 {
						t.Errorf("round %d: %s/%d: stored offset %d, but nothing was ever committed there", round, group, p.Partition, p.Offset)
					}
				case wasAcked && p.Offset < a:
					t.Errorf("round %d: %s/%d: stored %d, acknowledged %d: an acknowledged commit was lost", round, group, p.Partition, p.Offset, a)
				case p.Offset > s:
					t.Errorf("round %d: %s/%d: stored %d, newer than the last offset sent (%d)", round, group, p.Partition, p.Offset, s)
				case p.Offset >= 0 && (p.Metadata == nil || *p.Metadata != strconv.FormatInt(p.Offset, 10)):
					t.Errorf("round %d: %s/%d: stored offset %d with metadata %v: not one commit's record", round, group, p.Partition, p.Offset, p.Metadata)
				}
			}
			dreq := kmsg.NewPtrDescribeGroupsRequest()
			dreq.Groups = []string{group}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			dresp, err := dreq.RequestWith(ctx, cl)
			cancel()
			switch {
			case err != nil:
				t.Errorf("round %d: describing %s: %v", round, group, err)
			case group == untouched && len(dresp.Groups) == 1 && dresp.Groups[0].ErrorCode == kerr.GroupIDNotFound.Code:
				// As Kafka answers for a group it does not have (v6).
			case len(dresp.Groups) != 1 || dresp.Groups[0].ErrorCode != 0 || dresp.Groups[0].State != "Empty":
				t.Errorf("round %d: describing %s: %+v", round, group, dresp.Groups)
			}
		}
	}

	totalAcks, totalInflight := 0, 0
	for round := 0; round < rounds; round++ {
		// The kill lands when the target-th acknowledgement of the round
		// arrives; every round's target differs.
		target := int64(100 + rng.IntN(300))
		var (
			acks, inflight atomic.Int64
			inflightAtKill int64 = -1
			killOnce       sync.Once
			killed         = make(chan struct{})
		)
		victim := child
		kill := func() {
			killOnce.Do(func() {
				victim.Process.Signal(syscall.SIGKILL)
				// Requests that have not been answered when the kill
				// landed, the killer's own excluded (it was answered).
				inflightAtKill = inflight.Load()
				close(killed)
			})
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < committers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				c, err := kgo.NewClient(kgo.SeedBrokers(addr), byname.Opt(), kgo.RequestRetries(0),
					kgo.RetryTimeout(time.Second), kgo.DialTimeout(500*time.Millisecond))
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				group := groupOf(w)
				for ctx.Err() == nil {
					mu.Lock()
					nextOff[w]++
					off := nextOff[w]
					for i := 0; i < perWorker; i++ {
						sent[key{group, partOf(w, i)}] = off
					}
					mu.Unlock()
					req := kmsg.NewPtrOffsetCommitRequest()
					req.Group, req.Generation = group, -1
					tp := kmsg.NewOffsetCommitRequestTopic()
					tp.Topic = topic
					md := strconv.FormatInt(off, 10)
					for i := 0; i < perWorker; i++ {
						pp := kmsg.NewOffsetCommitRequestTopicPartition()
						pp.Partition, pp.Offset, pp.Metadata = partOf(w, i), off, &md
						tp.Partitions = append(tp.Partitions, pp)
					}
					req.Topics = []kmsg.OffsetCommitRequestTopic{tp}
					inflight.Add(1)
					rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
					resp, err := req.RequestWith(rctx, c)
					rcancel()
					inflight.Add(-1)
					if err != nil {
						// The node is down (or this round is over):
						// wait for the round's end.
						<-ctx.Done()
						return
					}
					ok := len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == perWorker
					if ok {
						mu.Lock()
						for _, p := range resp.Topics[0].Partitions {
							if p.ErrorCode != 0 {
								ok = false
								continue
							}
							acked[key{group, p.Partition}] = off
						}
						mu.Unlock()
					}
					if ok && acks.Add(1) == target {
						kill()
					}
				}
			}(w)
		}
		select {
		case <-killed:
		case <-time.After(15 * time.Second):
			kill() // end the round anyway; the check below fails it
			t.Errorf("round %d: only %d of %d acknowledgements in 15 s", round, acks.Load(), target)
		}
		child.Wait()
		cancel()
		wg.Wait()
		totalAcks += int(acks.Load())
		totalInflight += int(inflightAtKill)
		t.Logf("round %d: SIGKILL at acknowledgement %d, %d commits in flight", round, target, inflightAtKill)
		child = startChild(t, bin, dir, addr)
		verify(round)
		if t.Failed() {
			break
		}
		if time.Since(start) > 45*time.Second {
			t.Logf("stopping after %d rounds: 45 s spent", round+1)
			break
		}
	}
	if totalInflight == 0 {
		t.Errorf("no commit was in flight at any kill: the kills were not aimed at in-flight commits")
	}
	t.Logf("%d acknowledged commits, %d in flight at the kills, %s", totalAcks, totalInflight, time.Since(start).Round(time.Millisecond))
}
