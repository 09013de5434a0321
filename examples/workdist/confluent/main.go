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
//
// With -group-protocol consumer the worker joins with Kafka's consumer group
// protocol (KIP-848; librdkafka 2.11 calls its support a preview): cohort
// computes the assignment, the session timeout and heartbeat interval are the
// server's (librdkafka refuses session.timeout.ms with this protocol, so the
// flag is not passed on), and every rebalance is incremental.
package main

import (
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cohort-dev/cohort/examples/workdist"
)

func main() {
	protocol := flag.String("group-protocol", "classic", "classic, or consumer for KIP-848 (the server assigns)")
	instance := flag.String("instance-id", "", "group.instance.id: a static member, whose partitions wait for it across a restart within its session")
	debug := flag.String("debug", "", "librdkafka's debug contexts (e.g. cgrp,protocol), logged on stderr")
	cfg := workdist.Flags("confluent-worker")
	conf := kafka.ConfigMap{
		"bootstrap.servers": strings.Join(cfg.Bootstrap, ","), // librdkafka takes the list as is
		"group.id":          cfg.Group,
		"client.id":         cfg.ClientID,
		"fetch.wait.max.ms": int(cfg.FetchMaxWait.Milliseconds()),
		"group.protocol":    *protocol,
	}
	if *debug != "" {
		conf["debug"] = *debug
	}
	if *instance != "" {
		conf["group.instance.id"] = *instance
	}
	if *protocol == "classic" {
		conf["session.timeout.ms"] = int(cfg.SessionTimeout.Milliseconds())
	}
	c, err := kafka.NewConsumer(&conf)
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
			if len(e.Partitions) == 0 {
				break // an eager rebalance of a member that owned nothing
			}
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
	// Tests only: COHORT_TEST_CLOSE_DELAY (a duration) is a pause, without
	// polling, between the stop signal and Close, in which a rebalance event
	// can arrive and wait unserved (clients/kip848_test.go).
	if d, err := time.ParseDuration(os.Getenv("COHORT_TEST_CLOSE_DELAY")); err == nil {
		time.Sleep(d)
	}
	c.Close() // revokes, then leaves the group
	workdist.Stopped()
}
