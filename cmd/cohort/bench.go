package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	cbench "github.com/cohort-dev/cohort/bench"
	"github.com/cohort-dev/cohort/security/clientconfig"
)

// bench runs package bench against a coordinator at --bootstrap and prints
// markdown tables on stdout (progress on stderr).
func bench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	d := cbench.Defaults()
	bootstrap := fs.String("bootstrap", envDefault("bootstrap", "127.0.0.1:9092"), "host:port of the coordinator to measure (cohort, Kafka, kfake, …) (env COHORT_BOOTSTRAP)")
	members := fs.String("members", "10,100,1000", "group sizes of the rebalance measurement (comma-separated)")
	hbMembers := fs.Int("heartbeat-members", d.HeartbeatMembers, "members heartbeating concurrently")
	groups := fs.String("groups", "1,10", "numbers of groups the heartbeating members are spread over (comma-separated)")
	committers := fs.String("committers", "16,64", "concurrent committers, each with its own group (comma-separated)")
	partitions := fs.String("partitions-per-commit", "1,50", "partitions per OffsetCommit request (comma-separated)")
	duration := fs.Duration("duration", d.Duration, "measured window of each throughput case")
	roundTimeout := fs.Duration("round-timeout", d.RoundTimeout, "longest a rebalance round may take")
	only := fs.String("only", "", "run one measurement: rebalance, heartbeat or commit (default all)")
	client := fs.String("client", "raw", "heartbeat/commit load through raw connections or kgo clients (raw|kgo)")
	repeat := fs.Int("repeat", 1, "run every case this many times and report the median")
	name := fs.String("name", "", "label of the target in the output (default the bootstrap address)")
	quiet := fs.Bool("q", false, "no progress on stderr")
	var sec clientconfig.Config
	sec.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: cohort bench [flags]

Measures a Kafka-protocol group coordinator: rebalance latency of one group
(initial, and after one more member joins), heartbeats per second, and
OffsetCommit requests and offsets per second. It creates groups and topics
named cohort-bench-<time>-… and deletes them afterwards, also when
interrupted: SIGINT or SIGTERM stops the run, removes them and exits with
status 130 (SIGINT) or 143 (SIGTERM); a second signal exits at once,
skipping the cleanup. A target it cannot reach is one error line and
status 1. Cohort needs
--initial-rebalance-delay 0 for the rebalance latency to mean anything.
With --tls/--sasl-* every client and raw connection connects that way (the
SASL password comes from --sasl-password-file or $COHORT_SASL_PASSWORD).

`)
		fs.PrintDefaults()
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := checkNoArgs("bench", pos); err != nil {
		return err
	}
	if err := resolveBounded(&sec, "--command-config"); err != nil {
		return usagef("bench: %w", err)
	}
	if *repeat < 1 {
		return usagef("bench: --repeat %d: want at least 1", *repeat)
	}
	cfg := cbench.Config{
		Bootstrap:        *bootstrap,
		Security:         sec,
		HeartbeatMembers: *hbMembers,
		Duration:         *duration,
		RoundTimeout:     *roundTimeout,
		Only:             *only,
		Client:           *client,
	}
	for _, l := range []struct {
		flag, val string
		dst       *[]int
	}{
		{"members", *members, &cfg.Members},
		{"groups", *groups, &cfg.HeartbeatGroups},
		{"committers", *committers, &cfg.Committers},
		{"partitions-per-commit", *partitions, &cfg.PartitionsPerCommit},
	} {
		if *l.dst, err = cbench.ParseCounts(l.val); err != nil {
			return usagef("bench: --%s %w", l.flag, err)
		}
	}
	if !*quiet {
		cfg.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
		}
	}
	// The flags' own checks, as usage errors: Validate makes them too,
	// but takes 0 and below for "the default", which from a flag is
	// surprising. What Validate still refuses is then about the TLS and
	// SASL files, not the flags.
	switch {
	case *bootstrap == "":
		return usagef("bench: --bootstrap is empty")
	case *only != "" && *only != "rebalance" && *only != "heartbeat" && *only != "commit":
		return usagef("bench: --only %q: want rebalance, heartbeat or commit", *only)
	case *client != "raw" && *client != "kgo":
		return usagef("bench: --client %q: want raw or kgo", *client)
	case *hbMembers < 1:
		return usagef("bench: --heartbeat-members %d: want at least 1", *hbMembers)
	case *duration <= 0:
		return usagef("bench: --duration %v: want a positive duration", *duration)
	case *roundTimeout <= 0:
		return usagef("bench: --round-timeout %v: want a positive duration", *roundTimeout)
	}
	for _, g := range cfg.HeartbeatGroups {
		if g > *hbMembers {
			return usagef("bench: --groups %d: more heartbeat groups than --heartbeat-members %d", g, *hbMembers)
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cbench.RaiseFileLimit(cbench.FilesNeeded(cfg)); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if *name == "" {
		*name = *bootstrap
	}
	ctx, interrupted := benchSignals()
	// exitIfInterrupted ends the process after a signal: what the step
	// that returned says is about the interruption. Run returns once the
	// cases' cleanup (leave, delete groups and topics) has run.
	exitIfInterrupted := func() {
		if s := interrupted(); s != 0 {
			fmt.Fprintf(os.Stderr, "cohort bench: stopped by %v; deleted the groups and topics it had created\n", s)
			os.Exit(128 + int(s))
		}
	}
	err = reachable(ctx, *bootstrap, sec)
	exitIfInterrupted()
	if err != nil {
		return fmt.Errorf("bench: cannot reach %s: %w", *bootstrap, err)
	}
	var runs []*cbench.Result
	for i := range *repeat {
		c := cfg
		c.Prefix = fmt.Sprintf("cohort-bench-%d-%d", time.Now().UnixNano(), i)
		r, err := cbench.Run(ctx, *name, c)
		exitIfInterrupted()
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	cbench.Median(runs).WriteMarkdown(os.Stdout)
	return nil
}

// benchSignals returns a context cancelled by the first SIGINT or SIGTERM
// and a function telling which signal that was (0: none yet). A second
// signal exits at once with its status.
func benchSignals() (context.Context, func() syscall.Signal) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var got atomic.Int32
	go func() {
		s := (<-sigs).(syscall.Signal)
		got.Store(int32(s))
		fmt.Fprintf(os.Stderr, "cohort bench: %v: stopping and deleting its groups and topics (again to quit at once)\n", s)
		cancel()
		s = (<-sigs).(syscall.Signal)
		os.Exit(128 + int(s))
	}()
	return ctx, func() syscall.Signal { return syscall.Signal(got.Load()) }
}

// reachable checks, once, that the target answers, so that a wrong address
// is one error rather than one per simulated member.
func reachable(ctx context.Context, bootstrap string, sec clientconfig.Config) error {
	opts, err := sec.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(bootstrap))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}
