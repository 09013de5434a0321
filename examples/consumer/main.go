// Command consumer joins a consumer group through cohort and reports which
// partitions it owns; it fetches no records (that stays with your Kafka
// client). It creates the topic in cohort's catalog if the catalog does not list it.
//
//	go run ./examples/consumer -addr 127.0.0.1:9092 -topic events -assignor cooperative-sticky
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cohort-dev/cohort/consumer"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/assignors"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/security/clientconfig"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "coordinator address")
	group := flag.String("group", "example-consumers", "group id")
	topic := flag.String("topic", "events", "topic to subscribe to")
	partitions := flag.Int("partitions", 6, "partitions when creating the topic")
	assignor := flag.String("assignor", "range", "the assignor: "+strings.Join(assignors.Names(), ", "))
	name := flag.String("name", "consumer", "name in the logs")
	session := flag.Duration("session-timeout", 6*time.Second, "session timeout")
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

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}

	a, ok := assignors.ByName(*assignor)
	if !ok {
		log.Error("unknown assignor", "name", *assignor)
		os.Exit(2)
	}
	cl, err := member.NewClient([]string{*addr}, clientOpts...)
	if err != nil {
		log.Error("client", "err", err)
		os.Exit(1)
	}
	defer cl.Close()
	ensureTopic(ctx, log, kadm.NewClient(cl), *topic, int32(*partitions))

	g, err := consumer.StartGroup(consumer.GroupConfig{
		Member:    member.Config{Group: *group, SessionTimeout: *session, Logger: log},
		Client:    cl,
		Topics:    []string{*topic},
		Assignors: []assign.Assignor{a},
		Assigned: func(_ context.Context, gen member.Generation, added []assign.TopicPartitions) {
			log.Info("assigned", "generation", gen.ID, "added", added)
		},
		Revoked: func(tps []assign.TopicPartitions) { log.Info("revoked", "partitions", tps) },
		Lost:    func(tps []assign.TopicPartitions) { log.Warn("lost", "partitions", tps) },
	})
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	select {
	case <-ctx.Done():
	case <-g.Done():
		// Stopped for good: the node refused the credentials, the
		// certificate or the group (ACLs), or another error retrying
		// cannot fix. Err says which; the process should not go on.
		log.Error("consumer stopped", "err", g.Err())
		os.Exit(1)
	}
	log.Info("owned at exit", "partitions", g.Assignment())
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Close(cctx); err != nil {
		log.Error("close", "err", err)
	}
	log.Info("consumer: done")
}

// ensureTopic creates topic when the catalog does not list it yet. An
// existing topic is left alone and not reported: a user allowed to describe
// it but not to create topics runs the example without a refusal in its log.
func ensureTopic(ctx context.Context, log *slog.Logger, adm *kadm.Client, topic string, partitions int32) {
	if details, err := adm.ListTopics(ctx, topic); err == nil && details.Has(topic) && details[topic].Err == nil {
		return
	}
	_, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	switch {
	case err == nil:
		log.Info("created topic", "topic", topic, "partitions", partitions)
	case errors.Is(err, kerr.TopicAlreadyExists): // created meanwhile
	default:
		log.Warn("could not create the topic; the group waits for it", "topic", topic, "err", err)
	}
}
