// Command sarama is a work-distribution worker on IBM/sarama: the
// partitions of a cohort catalog topic are units of work, and each session
// of the consumer group, from its handler's Setup to its Cleanup, says which
// ones this process owns. Flags and output lines: package workdist; the
// idea: docs/workdist.md.
//
//	go run ./examples/workdist/sarama -bootstrap 127.0.0.1:9092 -group workers -topic jobs -client-id w1
//
// sarama's default strategy is range, an eager protocol: every rebalance
// ends the session, revoking every partition.
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/cohort-dev/cohort/examples/workdist"
)

// worker handles the sessions of the group.
type worker struct{ topic string }

// Setup runs when a session begins, before ConsumeClaim.
func (w worker) Setup(s sarama.ConsumerGroupSession) error {
	workdist.Report("assigned", s.Claims()[w.topic], "member", s.MemberID(), "generation", s.GenerationID())
	// Start the work of these partitions here. Marking position 0 (a
	// catalog topic has no records, so 0 is its only position) commits
	// it, in this generation, with the next automatic commit.
	for _, p := range s.Claims()[w.topic] {
		s.MarkOffset(w.topic, p, 0, "")
	}
	return nil
}

// Cleanup runs when the session ends, after every ConsumeClaim returned:
// stop the work of its partitions here.
func (w worker) Cleanup(s sarama.ConsumerGroupSession) error {
	workdist.Report("revoked", s.Claims()[w.topic], "member", s.MemberID(), "generation", s.GenerationID())
	return nil
}

// ConsumeClaim reads one partition until the session ends (the topic is
// empty: it only waits).
func (worker) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		s.MarkMessage(msg, "")
	}
	return nil
}

func main() {
	cfg := workdist.Flags("sarama-worker")
	sc := sarama.NewConfig()
	sc.ClientID = cfg.ClientID
	sc.Version = sarama.V2_8_0_0
	sc.Consumer.Group.Session.Timeout = cfg.SessionTimeout
	sc.Consumer.MaxWaitTime = cfg.FetchMaxWait
	sc.Consumer.Return.Errors = true
	cg, err := sarama.NewConsumerGroup(cfg.Bootstrap, cfg.Group, sc)
	if err != nil {
		workdist.Errorf("%v", err)
		os.Exit(1)
	}
	go func() {
		for err := range cg.Errors() {
			workdist.Errorf("%v", err)
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for ctx.Err() == nil {
		// One session per call: it returns at the next rebalance.
		if err := cg.Consume(ctx, []string{cfg.Topic}, worker{cfg.Topic}); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
			workdist.Errorf("%v", err)
			time.Sleep(time.Second)
		}
	}
	cg.Close() // commits the marked offsets, then leaves the group
	workdist.Stopped()
}
