// Command confluent is a work-distribution worker on confluent-kafka-go
// (librdkafka): the partitions of a cohort catalog topic are units of work,
// and the rebalance callback given to Subscribe says which ones this
// process owns. Flags and output lines: package workdist; the idea:
// docs/workdist.md.
//
//	go run ./examples/workdist/confluent -bootstrap 127.0.0.1:9092 -group workers -topic jobs -client-id w1
//
// librdkafka's default strategies (range, roundrobin) are eager: every
// rebalance revokes every partition (with partition.assignment.strategy
// cooperative-sticky, only the moved ones). confluent-kafka-go does not
// expose the member id or generation; the lines say the protocol instead.
package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cohort-dev/cohort/examples/workdist"
)

func main() {
	cfg := workdist.Flags("confluent-worker")
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":  cfg.Bootstrap,
		"group.id":           cfg.Group,
		"client.id":          cfg.ClientID,
		"session.timeout.ms": int(cfg.SessionTimeout.Milliseconds()),
		"fetch.wait.max.ms":  int(cfg.FetchMaxWait.Milliseconds()),
	})
	if err != nil {
		workdist.Errorf("%v", err)
		os.Exit(1)
	}
	report := func(what string, tps []kafka.TopicPartition) {
		var parts []int32
		for _, tp := range tps {
			parts = append(parts, tp.Partition)
		}
		workdist.Report(what, parts, "protocol", c.GetRebalanceProtocol())
	}
	// The callback runs inside Poll (and Close). It does not call Assign:
	// confluent-kafka-go applies the change itself when it returns.
	err = c.Subscribe(cfg.Topic, func(c *kafka.Consumer, ev kafka.Event) error {
		switch e := ev.(type) {
		case kafka.AssignedPartitions:
			report("assigned", e.Partitions) // start their work here
		case kafka.RevokedPartitions:
			if c.AssignmentLost() {
				report("lost", e.Partitions) // stop their work: too late to commit
				break
			}
			// Stop their work here, then commit its position, in this
			// generation, before the partitions move on: 0, as a
			// catalog topic has no records.
			report("revoked", e.Partitions)
			offsets := make([]kafka.TopicPartition, len(e.Partitions))
			for i, tp := range e.Partitions {
				offsets[i] = kafka.TopicPartition{Topic: tp.Topic, Partition: tp.Partition, Offset: 0}
			}
			if _, err := c.CommitOffsets(offsets); err != nil {
				workdist.Errorf("commit: %v", err)
			}
		}
		return nil
	})
	if err != nil {
		workdist.Errorf("%v", err)
		os.Exit(1)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	for len(sig) == 0 {
		// The topic is empty: polling serves the callback and errors.
		if e, ok := c.Poll(100).(kafka.Error); ok {
			workdist.Errorf("%v", e)
		}
	}
	c.Close() // revokes, then leaves the group
	workdist.Stopped()
}
