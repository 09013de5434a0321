package clients

import (
	"sync"
	"testing"

	ckafka "github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cohort-dev/cohort/clients/testbed"
)

// rdMember is a confluent-kafka-go (bundled librdkafka) consumer: offsets are
// stored after processing and auto-committed from the store every 300 ms
// (and on revoke and close); the library assigns partitions itself (no
// rebalance callback), incrementally under cooperative-sticky.
type rdMember struct {
	c    *ckafka.Consumer
	stop chan struct{}
	done chan struct{}
	once sync.Once
	t    *testing.T
}

func rdConfig(b *testbed.Bed, c MemberConfig) *ckafka.ConfigMap {
	cfg := &ckafka.ConfigMap{
		"bootstrap.servers":             b.Addr(),
		"broker.address.family":         "v4",
		"client.id":                     c.ClientID,
		"group.id":                      c.Group,
		"session.timeout.ms":            int(c.session().Milliseconds()),
		"heartbeat.interval.ms":         int(heartbeat.Milliseconds()),
		"max.poll.interval.ms":          int(rebalanceTimeout.Milliseconds()),
		"partition.assignment.strategy": c.Protocol,
		"enable.auto.commit":            true,
		"auto.commit.interval.ms":       300,
		"enable.auto.offset.store":      false,
		"auto.offset.reset":             "earliest",
		"fetch.wait.max.ms":             200,
		"reconnect.backoff.ms":          50,
		"reconnect.backoff.max.ms":      500,
		"retry.backoff.ms":              100,
		"log.connection.close":          false,
		"enable.metrics.push":           false,
	}
	if c.Protocol == "" {
		cfg.SetKey("partition.assignment.strategy", "range")
	}
	if c.Instance != "" {
		cfg.SetKey("group.instance.id", c.Instance)
	}
	return cfg
}

func startRdkafka(t *testing.T, b *testbed.Bed, c MemberConfig) Member {
	cons, err := ckafka.NewConsumer(rdConfig(b, c))
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Subscribe(c.Topic, nil); err != nil {
		t.Fatal(err)
	}
	m := &rdMember{c: cons, stop: make(chan struct{}), done: make(chan struct{}), t: t}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			switch ev := cons.Poll(100).(type) {
			case *ckafka.Message:
				if ev.TopicPartition.Error != nil {
					continue
				}
				c.process(string(ev.Value), ev.TopicPartition.Partition)
				cons.StoreMessage(ev)
			}
		}
	}()
	return m
}

func (m *rdMember) Close() {
	m.once.Do(func() {
		close(m.stop)
		<-m.done
		m.c.Close()
	})
}

func TestLibrdkafkaGroupChurn(t *testing.T) {
	t.Parallel() // with the other parallel tests: each subtest has its own bed or node
	for _, p := range []string{"range", "cooperative-sticky"} {
		t.Run(p, func(t *testing.T) { runChurn(t, startRdkafka, p) })
	}
}
