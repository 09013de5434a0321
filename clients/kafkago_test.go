package clients

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/cohort-dev/cohort/clients/testbed"
	"github.com/cohort-dev/cohort/internal/testlog"
)

func kafkaGoBalancers(protocol string) []kafka.GroupBalancer {
	if protocol == "roundrobin" {
		return []kafka.GroupBalancer{kafka.RoundRobinGroupBalancer{}}
	}
	return []kafka.GroupBalancer{kafka.RangeGroupBalancer{}}
}

// kafkaGoReader is a kafka-go Reader with a GroupID: FetchMessage, process,
// CommitMessages (flushed every 300 ms and on Close).
type kafkaGoReader struct {
	r      *kafka.Reader
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startKafkaGoReader(t *testing.T, b *testbed.Bed, c MemberConfig) Member {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{b.Addr()},
		GroupID:           c.Group,
		GroupTopics:       []string{c.Topic},
		Dialer:            &kafka.Dialer{ClientID: c.ClientID, Timeout: 5 * time.Second},
		GroupBalancers:    kafkaGoBalancers(c.Protocol),
		SessionTimeout:    sessionTimeout,
		HeartbeatInterval: heartbeat,
		RebalanceTimeout:  rebalanceTimeout,
		JoinGroupBackoff:  200 * time.Millisecond,
		CommitInterval:    300 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
		MaxWait:           200 * time.Millisecond,
		ReadBackoffMax:    200 * time.Millisecond,
		ErrorLogger:       kafka.LoggerFunc(testlog.Printf(t, c.ClientID+" kafka-go: ")),
	})
	ctx, cancel := context.WithCancel(context.Background())
	m := &kafkaGoReader{r: r, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			msg, err := r.FetchMessage(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, context.Canceled) {
					return
				}
				continue
			}
			c.process(string(msg.Value), int32(msg.Partition))
			r.CommitMessages(ctx, msg)
		}
	}()
	return m
}

func (m *kafkaGoReader) Close() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		m.r.Close()
	})
}

// kafkaGoGroup is kafka-go's low-level ConsumerGroup: per generation, one
// partition reader per assigned partition, committing through the
// generation every 20 records and when the generation ends.
type kafkaGoGroup struct {
	cg     *kafka.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startKafkaGoGroup(t *testing.T, b *testbed.Bed, c MemberConfig) Member {
	dialer := &kafka.Dialer{ClientID: c.ClientID, Timeout: 5 * time.Second}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                c.Group,
		Brokers:           []string{b.Addr()},
		Dialer:            dialer,
		Topics:            []string{c.Topic},
		GroupBalancers:    kafkaGoBalancers(c.Protocol),
		SessionTimeout:    sessionTimeout,
		HeartbeatInterval: heartbeat,
		RebalanceTimeout:  rebalanceTimeout,
		JoinGroupBackoff:  200 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
		ErrorLogger:       kafka.LoggerFunc(testlog.Printf(t, c.ClientID+" kafka-go: ")),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &kafkaGoGroup{cg: cg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			gen, err := cg.Next(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
					return
				}
				continue
			}
			for _, a := range gen.Assignments[c.Topic] {
				part, start := a.ID, a.Offset
				gen.Start(func(gctx context.Context) {
					consumePartition(gctx, dialer, b.Addr(), c, gen, part, start)
				})
			}
		}
	}()
	return m
}

func consumePartition(ctx context.Context, dialer *kafka.Dialer, addr string, c MemberConfig, gen *kafka.Generation, part int, start int64) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{addr}, Topic: c.Topic, Partition: part, Dialer: dialer,
		MaxWait: 200 * time.Millisecond, ReadBackoffMax: 200 * time.Millisecond,
	})
	defer r.Close()
	if start < 0 {
		start = kafka.FirstOffset
	}
	r.SetOffset(start)
	next, pending := int64(-1), 0
	commit := func() {
		if next >= 0 && pending > 0 {
			if gen.CommitOffsets(map[string]map[int]int64{c.Topic: {part: next}}) == nil {
				pending = 0
			}
		}
	}
	defer commit()
	for {
		msg, err := r.ReadMessage(ctx)
		if err != nil {
			return
		}
		c.process(string(msg.Value), int32(part))
		next, pending = msg.Offset+1, pending+1
		if pending >= 20 {
			commit()
		}
		select {
		case <-ctx.Done():
			return
		default:
		}
		if r.Lag() == 0 {
			commit()
		}
	}
}

func (m *kafkaGoGroup) Close() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		m.cg.Close()
	})
}

// TestKafkaGoReaderChurn: kafka-go's Reader commits, with the new
// generation's id, offsets of records it had fetched from partitions that
// moved to another member (they were still buffered when the rebalance
// happened), so a moved partition's committed offset can go backwards for a
// moment; a Kafka broker accepts such commits as cohort does (ownership of
// partitions is not the coordinator's to check). The test allows these stray
// commits and ends with a fresh member that consumes to the log end.
func TestKafkaGoReaderChurn(t *testing.T) {
	runChurn(t, startKafkaGoReader, "range", testbed.CheckOpts{StrayCommitsOK: true})
}

func TestKafkaGoConsumerGroupChurn(t *testing.T) { runChurn(t, startKafkaGoGroup, "range") }
