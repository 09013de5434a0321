// Command kafkago is a work-distribution worker on segmentio/kafka-go: the
// partitions of a cohort catalog topic are units of work, and each
// generation that ConsumerGroup.Next returns says which ones this process
// owns until the generation ends. Flags and output lines: package workdist;
// the idea: docs/workdist.md.
//
//	go run ./examples/workdist/kafkago -bootstrap 127.0.0.1:9092 -group workers -topic jobs -client-id w1
//
// kafka-go's protocols (range, round robin) are eager: every rebalance ends
// the generation. (kafka-go's Reader with a GroupID joins the same way but
// does not tell its caller which partitions it owns; ConsumerGroup does.)
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/cohort-dev/cohort/examples/workdist"
)

func main() {
	cfg := workdist.Flags("kafkago-worker")
	dialer := &kafka.Dialer{ClientID: cfg.ClientID, Timeout: 10 * time.Second}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:             cfg.Group,
		Brokers:        cfg.Bootstrap,
		Topics:         []string{cfg.Topic},
		Dialer:         dialer,
		SessionTimeout: cfg.SessionTimeout,
		ErrorLogger:    kafka.LoggerFunc(workdist.Errorf),
	})
	if err != nil {
		workdist.Errorf("%v", err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for {
		gen, err := cg.Next(ctx) // the next generation, once this one has ended
		if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
			break
		}
		if err != nil {
			continue // reported by ErrorLogger; the group retries
		}
		owned := gen.Assignments[cfg.Topic]
		var parts []int
		offsets := map[int]int64{}
		for _, a := range owned {
			parts = append(parts, a.ID)
			offsets[a.ID] = 0 // a catalog topic has no records: 0 is its only position
		}
		workdist.Report("assigned", parts, "member", gen.MemberID, "generation", gen.ID)
		// Commit position 0 of each owned partition in this generation.
		if err := gen.CommitOffsets(map[string]map[int]int64{cfg.Topic: offsets}); err != nil {
			workdist.Errorf("commit: %v", err)
		}
		for _, a := range owned {
			// The work of one partition, until the generation ends:
			// here, reading the (empty) partition as a consumer of
			// records would.
			gen.Start(func(ctx context.Context) { readPartition(ctx, cfg, dialer, a) })
		}
		gen.Start(func(ctx context.Context) {
			<-ctx.Done() // the generation ended: the work stops
			workdist.Report("revoked", parts, "member", gen.MemberID, "generation", gen.ID)
		})
	}
	cg.Close() // ends the generation, then leaves the group
	workdist.Stopped()
}

// readPartition reads one partition from its committed offset until ctx
// ends.
func readPartition(ctx context.Context, cfg workdist.Config, dialer *kafka.Dialer, a kafka.PartitionAssignment) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: cfg.Bootstrap, Topic: cfg.Topic, Partition: a.ID,
		Dialer: dialer, MaxWait: cfg.FetchMaxWait, ReadLagInterval: -1,
		ErrorLogger: kafka.LoggerFunc(func(f string, args ...any) {
			if ctx.Err() == nil { // not the reader's shutdown
				workdist.Errorf(f, args...)
			}
		}),
	})
	defer r.Close()
	r.SetOffset(max(a.Offset, 0)) // none committed yet: -2 (first offset), i.e. 0
	for {
		if _, err := r.ReadMessage(ctx); err != nil {
			return
		}
	}
}
