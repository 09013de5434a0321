// Command franzgo is a work-distribution worker on franz-go (kgo): the
// partitions of a cohort catalog topic are units of work, and the group's
// callbacks OnPartitionsAssigned, OnPartitionsRevoked and OnPartitionsLost
// say which ones this process owns. Flags and output lines: package
// workdist; the idea: docs/workdist.md.
//
//	go run ./examples/workdist/franzgo -bootstrap 127.0.0.1:9092 -group workers -topic jobs -client-id w1
//
// franz-go's default balancer is cooperative-sticky: a rebalance revokes
// only the partitions that move.
//
// With -server-side the worker joins with Kafka's consumer group protocol
// (KIP-848, kgo.ServerSideBalancer): cohort computes the assignment (its
// "uniform" assignor, what franz-go asks for in place of cooperative-sticky)
// and the worker heartbeats with ConsumerGroupHeartbeat; the lines print the
// member epoch as the generation. Without it, the classic protocol (JoinGroup,
// SyncGroup). Both kinds of worker may share one group.
package main

import (
	"cmp"
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/examples/workdist"
)

func main() {
	serverSide := flag.Bool("server-side", false, "use the consumer group protocol (KIP-848): the server assigns")
	instance := flag.String("instance-id", "", "group.instance.id: a static member, whose partitions wait for it across a restart within its session")
	regex := flag.Bool("regex", false, "-topic is a regular expression: the worker consumes every topic it matches (with -server-side the coordinator resolves it, KIP-848)")
	cfg := workdist.Flags("franzgo-worker")
	// report prints a change of ownership (franz-go also calls the
	// callbacks when nothing changed: those are skipped).
	// mine is the partitions of ps that are the worker's: those of -topic,
	// or with -regex those of every topic (one matched topic is the usual
	// case; with more, their partition numbers are merged).
	mine := func(ps map[string][]int32) []int32 {
		if !*regex {
			return ps[cfg.Topic]
		}
		var all []int32
		for _, parts := range ps {
			all = append(all, parts...)
		}
		return all
	}
	report := func(what string, cl *kgo.Client, parts []int32) bool {
		if len(parts) == 0 {
			return false
		}
		member, gen := cl.GroupMetadata()
		workdist.Report(what, parts, "member", member, "generation", gen)
		return true
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Bootstrap...),
		kgo.ClientID(cfg.ClientID),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, gained map[string][]int32) {
			report("assigned", cl, mine(gained)) // start their work here
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			// Stop their work here, then commit its position, in this
			// generation, before the partitions move on: 0, as a
			// catalog topic has no records. (franz-go's default
			// callback here commits what was consumed.)
			if report("revoked", cl, mine(revoked)) {
				for topic, parts := range revoked {
					commitZero(ctx, cl, topic, parts)
				}
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
			report("lost", cl, mine(lost)) // stop their work: too late to commit
		}),
	}
	if *regex {
		opts = append(opts, kgo.ConsumeRegex())
	}
	if *instance != "" {
		opts = append(opts, kgo.InstanceID(*instance))
	}
	if *serverSide {
		// franz-go asks for the server's "uniform" assignor in place of
		// a sticky balancer ("range" for the range balancer); it falls
		// back to the classic protocol if the broker lacks KIP-848.
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		workdist.Errorf("%v", err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for ctx.Err() == nil {
		// The topic is empty: polling only keeps the consumer going,
		// and returns when ctx ends (or with an error).
		cl.PollFetches(ctx).EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				workdist.Errorf("fetch %s/%d: %v", t, p, err)
			}
		})
	}
	cl.Close() // revokes, then leaves the group
	workdist.Stopped()
}

// commitZero commits offset 0 of the partitions. franz-go may warn
// "received an OffsetCommitResponse after our group session has ended"
// after such commits although each was acknowledged: its table of the
// member's offsets is dropped when a revocation empties it (partitions it
// consumed nothing from are not in it), and is not rebuilt for partitions
// it keeps (docs/workdist.md, "Library notes").
func commitZero(ctx context.Context, cl *kgo.Client, topic string, parts []int32) {
	offsets := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for _, p := range parts {
		offsets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: 0}
	}
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		for _, t := range resp.Topics { // empty if err is set
			for _, p := range t.Partitions {
				err = cmp.Or(err, kerr.ErrorForCode(p.ErrorCode))
			}
		}
		if err != nil {
			workdist.Errorf("commit: %v", err)
		}
	})
}
