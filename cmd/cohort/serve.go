package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
)

// envDefault returns $COHORT_<NAME> if set, else def: every flag can also be
// given through the environment (flags win).
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv("COHORT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); ok {
		return v
	}
	return def
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	d := group.Defaults()
	str := func(name, def, usage string) *string {
		return fs.String(name, envDefault(name, def), usage+" (env COHORT_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+")")
	}
	listen := str("listen", "127.0.0.1:9092", "address for Kafka clients")
	advertise := str("advertise", "", "host:port given to clients in Metadata/FindCoordinator (default: the listen address)")
	nodeID := str("node-id", "0", "node id advertised to clients")
	clusterID := str("cluster-id", "cohort", "cluster id advertised to clients")
	dataDir := str("data-dir", "./data", "directory of the embedded store")
	minSession := str("min-session-timeout", d.MinSessionTimeout.String(), "smallest session timeout a member may ask for")
	maxSession := str("max-session-timeout", d.MaxSessionTimeout.String(), "largest session timeout a member may ask for")
	initialDelay := str("initial-rebalance-delay", d.InitialRebalanceDelay.String(), "wait for more members before a new group's first generation (0 disables)")
	maxSize := str("group-max-size", "0", "most members a group may have (0 = unlimited)")
	retention := str("offsets-retention", d.OffsetsRetention.String(), "how long committed offsets are kept (KIP-211 rules)")
	retentionCheck := str("offsets-retention-check-interval", "10m", "how often expired offsets are removed")
	maxFrame := str("max-request-bytes", "104857600", "largest request frame accepted")
	partitions := str("partitions", "50", "coordinator partitions (fixed for a data directory)")
	metrics := str("metrics-listen", "", "address for Prometheus /metrics (empty = off)")
	logLevel := str("log-level", "info", "debug, info, warn or error")
	etcdEndpoints := str("etcd", "", "comma-separated etcd endpoints (host:port,...): cluster mode, state in etcd instead of --data-dir")
	etcdCA := str("etcd-ca", "", "CA certificate file to verify etcd (TLS)")
	etcdCert := str("etcd-cert", "", "client certificate file for etcd (TLS)")
	etcdKey := str("etcd-key", "", "client key file for etcd (TLS)")
	etcdPrefix := str("etcd-prefix", "/cohort/", "prefix of every etcd key cohort uses")
	leaseTTL := str("lease-ttl", "10s", "etcd lease TTL: how long a dead node's partitions wait before others take over (whole seconds, at least 2s)")
	rack := str("rack", "", "rack advertised in Metadata (cluster mode)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	var perr error
	dur := func(name, v string) time.Duration {
		x, err := time.ParseDuration(v)
		if err != nil || x < 0 {
			perr = fmt.Errorf("--%s %q: want a non-negative Go duration such as 3s or 10m", name, v)
		}
		return x
	}
	num := func(name, v string, bits int) int64 {
		x, err := strconv.ParseInt(v, 10, bits)
		if err != nil || x < 0 {
			perr = fmt.Errorf("--%s %q: want a non-negative integer", name, v)
		}
		return x
	}
	cfg := d
	cfg.MinSessionTimeout = dur("min-session-timeout", *minSession)
	cfg.MaxSessionTimeout = dur("max-session-timeout", *maxSession)
	cfg.InitialRebalanceDelay = dur("initial-rebalance-delay", *initialDelay)
	cfg.OffsetsRetention = dur("offsets-retention", *retention)
	cfg.MaxSize = int(num("group-max-size", *maxSize, 31))
	check := dur("offsets-retention-check-interval", *retentionCheck)
	ttl := dur("lease-ttl", *leaseTTL)
	id := num("node-id", *nodeID, 31)
	frame := num("max-request-bytes", *maxFrame, 31)
	parts := num("partitions", *partitions, 16)
	if perr != nil {
		return perr
	}
	if cfg.MinSessionTimeout > cfg.MaxSessionTimeout {
		return fmt.Errorf("--min-session-timeout %v is above --max-session-timeout %v", cfg.MinSessionTimeout, cfg.MaxSessionTimeout)
	}
	if parts == 0 {
		return fmt.Errorf("--partitions must be at least 1")
	}
	var clusterCfg *node.ClusterConfig
	if *etcdEndpoints != "" {
		if ttl < 2*time.Second || ttl%time.Second != 0 {
			return fmt.Errorf("--lease-ttl %v: want whole seconds, at least 2s", ttl)
		}
		var eps []string
		for _, e := range strings.Split(*etcdEndpoints, ",") {
			if e = strings.TrimSpace(e); e != "" {
				eps = append(eps, e)
			}
		}
		clusterCfg = &node.ClusterConfig{Endpoints: eps, CAFile: *etcdCA, CertFile: *etcdCert, KeyFile: *etcdKey,
			Prefix: *etcdPrefix, LeaseTTL: ttl, Rack: *rack}
	} else if *etcdCA != "" || *etcdCert != "" || *etcdKey != "" {
		return fmt.Errorf("--etcd-ca/--etcd-cert/--etcd-key need --etcd")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: %w", *logLevel, err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)

	n, err := node.Start(node.Config{
		Listen:                 *listen,
		Advertise:              *advertise,
		NodeID:                 int32(id),
		ClusterID:              *clusterID,
		DataDir:                *dataDir,
		Partitions:             int(parts),
		Group:                  cfg,
		MaxFrameBytes:          int32(frame),
		MetricsListen:          *metrics,
		Logger:                 log,
		RetentionCheckInterval: check,
		Cluster:                clusterCfg,
	})
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	var stopped error // why the node stopped by itself; the exit status
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case stopped = <-waitErr(n):
		if stopped != nil {
			log.Error("server stopped", "err", stopped)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		if stopped != nil {
			// Close reports the same store failure again.
			return stopped
		}
		if err != nil {
			return err
		}
		log.Info("stopped cleanly")
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shutdown did not finish in 30s")
	}
}

func waitErr(n *node.Node) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- n.Wait() }()
	return ch
}
