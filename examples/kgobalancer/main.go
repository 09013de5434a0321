// Command kgobalancer is a franz-go consumer that lets one of cohort's
// assignors decide who owns which partitions (package consumer/kgobalancer):
// cooperative-sticky, which moves only the partitions that must move and
// hands them over in two rebalances, or copartition, which keeps partition p
// of every listed topic on one member. It prints each change of ownership
// and fetches nothing else (against cohort the topics are empty; against
// Kafka it would consume them as any franz-go client does).
//
//	go run ./examples/kgobalancer -addr 127.0.0.1:9092 -name k1 -assignor cooperative-sticky -topics events
//	go run ./examples/kgobalancer -addr 127.0.0.1:9092 -name k1 -assignor copartition -topics orders,payments
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/assignors"
	"github.com/cohort-dev/cohort/consumer/kgobalancer"
	"github.com/cohort-dev/cohort/security/clientconfig"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "bootstrap address")
	group := flag.String("group", "example-kgobalancer", "group id")
	topicList := flag.String("topics", "events", "comma-separated topics to consume")
	partitions := flag.Int("partitions", 6, "partitions of each topic this program creates")
	assignor := flag.String("assignor", "cooperative-sticky", "the assignor: "+strings.Join(assignors.Names(), ", ")+" (copartition: all -topics co-partitioned)")
	name := flag.String("name", "consumer", "client id and name in the logs")
	session := flag.Duration("session-timeout", 10*time.Second, "session timeout")
	runFor := flag.Duration("run-for", 0, "stop after this long (0: until interrupted)")
	var sec clientconfig.Config // --tls, --sasl-*, --command-config: see cohort's client options
	sec.RegisterFlags(flag.CommandLine)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("consumer", *name)
	clientOpts, err := sec.ResolveOpts()
	if err != nil {
		log.Error("security", "err", err)
		os.Exit(2)
	}
	topics := strings.Split(*topicList, ",")

	var a assign.Assignor
	switch *assignor {
	case assign.CopartitionName:
		// One set: partition p of every topic goes to the same member.
		// Copartition is an eager assignor: each rebalance revokes
		// every partition and assigns them all again.
		a = assign.Copartition(topics)
	default:
		var ok bool
		if a, ok = assignors.ByName(*assignor); !ok {
			log.Error("unknown assignor", "name", *assignor)
			os.Exit(2)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}

	report := func(what string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			ps := format(m)
			if ps == "" {
				return // kgo also calls back when nothing changed
			}
			_, gen := cl.GroupMetadata()
			log.Info(what, "generation", gen, "partitions", ps)
		}
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(*addr),
		kgo.ClientID(*name),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(topics...),
		// One balancer per client: it remembers this client's last
		// assignment. kgo runs KIP-429 incremental rebalancing when the
		// assignor is cooperative (cooperative-sticky), eager otherwise.
		kgo.Balancers(kgobalancer.New(a, kgobalancer.WithLogger(log))),
		kgo.SessionTimeout(*session),
		// kgo's default heartbeat interval is 3s, which a session
		// shorter than that would not survive.
		kgo.HeartbeatInterval(*session / 3),
		// Cooperative callbacks report changes: what was added, what
		// was taken away. Eager ones report the whole assignment.
		kgo.OnPartitionsAssigned(report("assigned")),
		kgo.OnPartitionsRevoked(report("revoked")),
		kgo.OnPartitionsLost(report("lost")),
	}, clientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		log.Error("client", "err", err)
		os.Exit(1)
	}
	ensureTopics(ctx, log, kadm.NewClient(cl), topics, int32(*partitions))

	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				log.Warn("fetch", "topic", t, "partition", p, "err", err)
			}
		})
	}
	// Close revokes what this member owns (OnPartitionsRevoked) and
	// leaves the group, so the others take the partitions over at once.
	cl.Close()
	log.Info("consumer: done")
}

// format writes partitions as sorted topic/partition pairs.
func format(m map[string][]int32) string {
	var out []string
	for t, ps := range m {
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s/%d", t, p))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// ensureTopics creates the topics the catalog does not list yet.
func ensureTopics(ctx context.Context, log *slog.Logger, adm *kadm.Client, topics []string, partitions int32) {
	details, err := adm.ListTopics(ctx, topics...)
	for _, t := range topics {
		if err == nil && details.Has(t) && details[t].Err == nil {
			continue
		}
		_, cerr := adm.CreateTopic(ctx, partitions, 1, nil, t)
		switch {
		case cerr == nil:
			log.Info("created topic", "topic", t, "partitions", partitions)
		case errors.Is(cerr, kerr.TopicAlreadyExists): // created meanwhile
		default:
			log.Warn("could not create the topic; the group waits for it", "topic", t, "err", cerr)
		}
	}
}
