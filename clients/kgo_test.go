package clients

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/clients/testbed"
)

type kgoMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func kgoBalancer(protocol string) kgo.GroupBalancer {
	switch protocol {
	case "roundrobin":
		return kgo.RoundRobinBalancer()
	case "sticky":
		return kgo.StickyBalancer()
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer()
	default:
		return kgo.RangeBalancer()
	}
}

// startKgo runs a franz-go consumer-group member: records are marked after
// processing and auto-committed from the marks (also on revoke and close).
func startKgo(t *testing.T, b *testbed.Bed, c MemberConfig, extra ...kgo.Opt) Member {
	opts := []kgo.Opt{
		kgo.SeedBrokers(b.Addr()),
		kgo.ClientID(c.ClientID),
		kgo.ConsumerGroup(c.Group),
		kgo.ConsumeTopics(c.Topic),
		kgo.Balancers(kgoBalancer(c.Protocol)),
		kgo.SessionTimeout(c.session()),
		kgo.HeartbeatInterval(heartbeat),
		kgo.RebalanceTimeout(rebalanceTimeout),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(300 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RetryTimeout(10 * time.Second),
	}
	if c.Instance != "" {
		opts = append(opts, kgo.InstanceID(c.Instance))
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &kgoMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				c.process(string(r.Value), r.Partition)
				cl.MarkCommitRecords(r)
			})
		}
	}()
	return m
}

func (m *kgoMember) Close() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m.cl.CommitMarkedOffsets(ctx)
		cancel()
		m.cl.Close()
	})
}

func TestKgoGroupChurn(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own bed or node
	for _, p := range []string{"range", "cooperative-sticky"} {
		t.Run(p, func(t *testing.T) {
			runChurn(t, func(t *testing.T, b *testbed.Bed, c MemberConfig) Member { return startKgo(t, b, c) }, p)
		})
	}
}
