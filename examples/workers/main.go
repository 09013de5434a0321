// Command workers runs one member of a worker pool over named resources
// against a cohort (or Kafka) coordinator. Start several: the resources spread
// over them, and move (stopped first, then started elsewhere) when members
// come and go.
//
//	go run ./examples/workers -addr 127.0.0.1:9092 -name w1 -resources 12
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/security/clientconfig"
	"github.com/cohort-dev/cohort/workers"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "coordinator address")
	group := flag.String("group", "example-workers", "group id")
	name := flag.String("name", "worker", "name in the logs")
	n := flag.Int("resources", 12, "number of resources (task-0 .. task-n-1)")
	session := flag.Duration("session-timeout", 6*time.Second, "session timeout")
	runFor := flag.Duration("run-for", 0, "stop after this long (0: until interrupted)")
	unit := flag.Duration("unit", time.Second, "how often each resource does a unit of work")
	var sec clientconfig.Config // --tls, --sasl-*, --command-config: see cohort's client options
	sec.RegisterFlags(flag.CommandLine)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("worker", *name)
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

	resources := make([]workers.Resource, *n)
	for i := range resources {
		resources[i] = workers.Resource{Name: fmt.Sprintf("task-%d", i)}
	}
	// Stop must return only once the resource no longer runs: it waits for
	// the resource's goroutine (its context is cancelled before Stop).
	var mu sync.Mutex
	running := map[string]chan struct{}{}
	p, err := workers.Start(workers.Config{
		Member:    member.Config{Brokers: []string{*addr}, ClientOpts: clientOpts, Group: *group, SessionTimeout: *session, Logger: log},
		Resources: func(context.Context) ([]workers.Resource, error) { return resources, nil },
		Start: func(ctx context.Context, name string, token int32) {
			log.Info("start", "resource", name, "token", token)
			done := make(chan struct{})
			mu.Lock()
			running[name] = done
			mu.Unlock()
			go func() {
				defer close(done)
				work(ctx, log, *unit)
			}()
		},
		Stop: func(name string) {
			mu.Lock()
			done := running[name]
			delete(running, name)
			mu.Unlock()
			if done != nil {
				<-done
			}
			log.Info("stop", "resource", name)
		},
	})
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	select {
	case <-ctx.Done():
	case <-p.Done():
		// Stopped for good: the node refused the credentials, the
		// certificate or the group (ACLs), or another error retrying
		// cannot fix. Err says which; the process should not go on.
		log.Error("worker stopped", "err", p.Err())
		os.Exit(1)
	}
	log.Info("owned at exit", "resources", p.Owned())
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(cctx); err != nil {
		log.Error("close", "err", err)
	}
	log.Info("worker: done")
}

// work is a resource's loop. Before each unit it checks its lease: that
// refuses once the resource was stopped here, and also when this process was
// frozen (SIGSTOP, a long pause) past its session, before the member's own
// timers have noticed. A store the units write to should still check the
// token (lease.Token()) and refuse older ones: that alone also covers a
// freeze between the check and the write.
func work(ctx context.Context, log *slog.Logger, every time.Duration) {
	lease := workers.LeaseOf(ctx)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := lease.Check(); err != nil {
			log.Info("refused", "token", lease.Token().String(), "err", err)
			return
		}
		log.Debug("unit", "token", lease.Token().String())
	}
}
