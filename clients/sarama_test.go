package clients

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/cohort-dev/cohort/clients/testbed"
)

type saramaMember struct {
	cg     sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	// gens records the generation of each session (static membership test).
	mu   sync.Mutex
	gens []int32
}

func saramaStrategy(protocol string) sarama.BalanceStrategy {
	switch protocol {
	case "roundrobin":
		return sarama.NewBalanceStrategyRoundRobin()
	case "sticky":
		return sarama.NewBalanceStrategySticky()
	case "cooperative-sticky":
		return sarama.NewBalanceStrategyCooperativeSticky()
	default:
		return sarama.NewBalanceStrategyRange()
	}
}

func saramaConfig(c MemberConfig) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = c.ClientID
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Group.Session.Timeout = c.session()
	cfg.Consumer.Group.Heartbeat.Interval = heartbeat
	cfg.Consumer.Group.Rebalance.Timeout = rebalanceTimeout
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{saramaStrategy(c.Protocol)}
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Max = 50
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = 300 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	cfg.Metadata.Retry.Max = 50
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Consumer.Return.Errors = false
	if c.Instance != "" {
		cfg.Consumer.Group.InstanceId = c.Instance
	}
	return cfg
}

type saramaHandler struct {
	c MemberConfig
	m *saramaMember
}

func (h saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.m.mu.Lock()
	h.m.gens = append(h.m.gens, s.GenerationID())
	h.m.mu.Unlock()
	return nil
}
func (h saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.c.process(string(msg.Value), msg.Partition)
			s.MarkMessage(msg, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

// startSarama runs an IBM/sarama ConsumerGroup member (auto-commit of the
// marked offsets).
func startSarama(t *testing.T, b *testbed.Bed, c MemberConfig) Member {
	cg, err := sarama.NewConsumerGroup([]string{b.Addr()}, c.Group, saramaConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{cg: cg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			err := cg.Consume(ctx, []string{c.Topic}, saramaHandler{c, m})
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
			if err != nil {
				t.Logf("sarama %s: %v", c.ClientID, err)
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}()
	return m
}

func (m *saramaMember) Close() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		m.cg.Close()
	})
}

func TestSaramaGroupChurn(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own bed or node
	for _, p := range []string{"range", "cooperative-sticky"} {
		t.Run(p, func(t *testing.T) {
			runChurn(t, func(t *testing.T, b *testbed.Bed, c MemberConfig) Member { return startSarama(t, b, c) }, p)
		})
	}
}
