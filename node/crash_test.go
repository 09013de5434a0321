package node

import (
	"context"
	"fmt"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/testbin"
	"github.com/cohort-dev/cohort/internal/testkafka"
	"github.com/cohort-dev/cohort/internal/testport"
	"github.com/cohort-dev/cohort/internal/testready"
	"github.com/cohort-dev/cohort/internal/testwait"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cohortBinary is cmd/cohort, compiled once per test binary run.
// The tests that run it (SIGKILL, SIGHUP, restarts of a real process) skip
// under -short.
func cohortBinary(t *testing.T) string {
	t.Helper()
	testwait.WallClock(t, "cohort serve as a child process")
	return testbin.Cohort(t)
}

// freePort is an address for a child that is killed and started again on
// it: below the ephemeral range, so no outgoing connection takes it in
// between (internal/testport).
func freePort(t *testing.T) string { return testport.Reserve(t) }

// startChild runs `cohort serve` as a child process and waits until it
// reports ready.
func startChild(t *testing.T, bin, dir, addr string, extra ...string) *testready.Child {
	t.Helper()
	return startChildOn(t, bin, dir, append([]string{"--listen", addr}, extra...)...)
}

// childReadyWithin bounds the start of a child cohort.
const childReadyWithin = 20 * time.Second

// startChildOn is startChild with the listener in extra (--listeners). It
// waits for the child's READY=1 (internal/testready), sent once its store
// is open and its listeners are served, not for a connection to its port,
// which opens as soon as anything listens there; a child that exits first
// fails the test at once.
func startChildOn(t *testing.T, bin, dir string, extra ...string) *testready.Child {
	t.Helper()
	args := append([]string{"serve", "--data-dir", dir, "--initial-rebalance-delay", "0", "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return testready.Start(t, cmd, childReadyWithin)
}

// TestCrashKeepsAcknowledgedCommits runs cohort as a child process, drives
// concurrent committers over several groups and many partitions, records
// every acknowledged commit, SIGKILLs the server mid-load several times,
// restarts it on the same data directory, and checks that the latest
// acknowledged offset of every partition is still there.
func TestCrashKeepsAcknowledgedCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a child process")
	}
	bin := cohortBinary(t)
	dir := t.TempDir()
	addr := freePort(t)
	child := startChild(t, bin, dir, addr)
	defer func() { child.Process.Kill(); child.Wait() }()

	const (
		committers = 12
		groups     = 6
		partitions = 36
		rounds     = 4
	)
	type key struct {
		group string
		part  int32
	}
	var mu sync.Mutex
	acked := map[key]int64{}
	var ackCount, errCount int64
	next := int64(1) // offsets only grow, across rounds
	// load runs committers until ctx ends. Each committer owns distinct
	// partitions, so every partition's offsets only grow.
	load := func(ctx context.Context, round int) *sync.WaitGroup {
		var wg sync.WaitGroup
		for w := 0; w < committers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), uint64(round)))
				cl, err := kgo.NewClient(kgo.SeedBrokers(addr), byname.Opt(), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second),
					kgo.DialTimeout(500*time.Millisecond))
				if err != nil {
					t.Error(err)
					return
				}
				defer cl.Close()
				for ctx.Err() == nil {
					g := fmt.Sprintf("crash-%d", rng.IntN(groups))
					req := kmsg.NewPtrOffsetCommitRequest()
					req.Group, req.Generation = g, -1
					tp := kmsg.NewOffsetCommitRequestTopic()
					tp.Topic = "t"
					mu.Lock()
					off := next
					next++
					mu.Unlock()
					var parts []int32
					per := partitions / committers
					for i := 0; i < per; i++ {
						p := int32(w*per + i)
						pp := kmsg.NewOffsetCommitRequestTopicPartition()
						pp.Partition, pp.Offset = p, off
						tp.Partitions = append(tp.Partitions, pp)
						parts = append(parts, p)
					}
					req.Topics = []kmsg.OffsetCommitRequestTopic{tp}
					rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
					resp, err := req.RequestWith(rctx, cl)
					rcancel()
					mu.Lock()
					if err != nil {
						errCount++
						mu.Unlock()
						// Retry pacing while the node is down (it is killed
						// under this load), ended by the round's end.
						select {
						case <-ctx.Done():
						case <-time.After(20 * time.Millisecond):
						}
						continue
					}
					for i, p := range resp.Topics[0].Partitions {
						if p.ErrorCode == 0 {
							k := key{g, parts[i]}
							if off > acked[k] {
								acked[k] = off
							}
							ackCount++
						}
					}
					mu.Unlock()
				}
			}(w)
		}
		return &wg
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), byname.Opt())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lost := 0
	// verify checks, after a restart, that every offset acknowledged before
	// the kill is stored (the latest acknowledged per partition, or later).
	verify := func(round int) {
		mu.Lock()
		defer mu.Unlock()
		for g := 0; g < groups; g++ {
			group := fmt.Sprintf("crash-%d", g)
			resp := testkafka.FetchOffsets(t, cl, group, "t", partitions, 20*time.Second) // partitions may still be loading
			for _, p := range resp.Topics[0].Partitions {
				want, ok := acked[key{group, p.Partition}]
				if ok && p.Offset < want {
					lost++
					t.Errorf("round %d: %s/%d: stored %d, acknowledged %d", round, group, p.Partition, p.Offset, want)
				}
			}
		}
	}
	for round := 0; round < rounds; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		wg := load(ctx, round)
		// The behaviour under test: the SIGKILL lands at a random point of
		// the load.
		time.Sleep(time.Duration(400+rand.IntN(400)) * time.Millisecond)
		child.Process.Signal(syscall.SIGKILL) // mid-load
		child.Wait()
		cancel()
		wg.Wait()
		child = startChild(t, bin, dir, addr)
		verify(round)
	}
	if ackCount < 100 {
		t.Fatalf("only %d acknowledged commits (%d errors): the load did not run", ackCount, errCount)
	}
	t.Logf("%d acknowledged partition commits, %d request errors across %d SIGKILLs mid-load, %d lost", ackCount, errCount, rounds, lost)
}
