// Command election runs one candidate of a single-writer election against a
// cohort (or Kafka) coordinator. Start several; one writes, the others stand
// by, and killing the writer hands the role to another within a session
// timeout.
//
//	go run ./examples/election -addr 127.0.0.1:9092 -name a
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cohort-dev/cohort/election"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/security/clientconfig"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "coordinator address")
	group := flag.String("group", "example-election", "group id")
	name := flag.String("name", "candidate", "name in the logs")
	session := flag.Duration("session-timeout", 6*time.Second, "session timeout")
	runFor := flag.Duration("run-for", 0, "stop after this long (0: until interrupted)")
	var sec clientconfig.Config // --tls, --sasl-*, --command-config: see cohort's client options
	sec.RegisterFlags(flag.CommandLine)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("candidate", *name)
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

	// Stands in for the resource the writer protects. Here each process has
	// its own, so it fences nothing across candidates: a real resource keeps
	// the highest token where every candidate writes (a database row, a
	// file on shared storage) and checks it in the same transaction.
	var fence election.Fence
	e, err := election.Start(election.Config{Member: member.Config{
		Brokers: []string{*addr}, ClientOpts: clientOpts, Group: *group, SessionTimeout: *session, Logger: log,
	}}, func(ctx context.Context, token int32) {
		log.Info("writer: active", "token", token)
		lease := election.LeaseOf(ctx)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				log.Info("writer: stopped", "token", token, "cause", context.Cause(ctx))
				return
			case <-tick.C:
				// The lease refuses once this process's term may be
				// over (a freeze past the session, say) even before
				// ctx is cancelled; the fence refuses what slips by.
				if err := lease.Check(); err != nil {
					log.Warn("not writing", "err", err)
					return
				}
				if err := fence.Admit(token); err != nil {
					log.Warn("write refused", "err", err)
				}
			}
		}
	})
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	select {
	case <-ctx.Done():
	case <-e.Done():
		// Stopped for good: the node refused the credentials, the
		// certificate or the group (ACLs), or another error retrying
		// cannot fix. Err says which; the process should not go on.
		log.Error("candidate stopped", "err", e.Err())
		os.Exit(1)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Close(cctx); err != nil {
		log.Error("close", "err", err)
	}
	log.Info("candidate: done")
}
