package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/principal"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
)

// parseListenerFlags resolves --listeners (or --listen as one PLAINTEXT
// listener) and --advertised-listeners.
func parseListenerFlags(listeners, listen, advertised string, fs *flag.FlagSet) ([]server.Listener, []server.Endpoint, error) {
	listenSet := false
	fs.Visit(func(f *flag.Flag) { listenSet = listenSet || f.Name == "listen" })
	if _, env := os.LookupEnv("COHORT_LISTEN"); env {
		listenSet = true
	}
	if listeners == "" {
		listeners = "PLAINTEXT://" + listen
	} else if listenSet {
		return nil, nil, fmt.Errorf("--listen and --listeners: give one of them")
	}
	ls, err := node.ParseListeners(listeners)
	if err != nil {
		return nil, nil, fmt.Errorf("--listeners: %w", err)
	}
	var eps []server.Endpoint
	if advertised != "" {
		adv, err := node.ParseListeners(advertised)
		if err != nil {
			return nil, nil, fmt.Errorf("--advertised-listeners: %w", err)
		}
		for _, a := range adv {
			host, port, _ := net.SplitHostPort(a.Addr)
			p, _ := strconv.Atoi(port)
			eps = append(eps, server.Endpoint{Listener: a.Name, Host: host, Port: int32(p)})
		}
	}
	return ls, eps, nil
}

// securityFlags fills the TLS, SASL and ACL parts of sec from the flags;
// the bootstrap user's password comes from the environment only.
func securityFlags(sec *node.SecurityConfig, cert, key, clientCA, clientAuth, rules, mechs, superUsers string) error {
	if cert != "" || key != "" {
		t, err := tlsconfig.New(tlsconfig.Options{CertFile: cert, KeyFile: key, ClientCAFile: clientCA, ClientAuth: clientAuth})
		if err != nil {
			return err
		}
		sec.TLS = t
	} else if clientCA != "" || clientAuth != "none" {
		return fmt.Errorf("--tls-client-ca-file and --tls-client-auth need --tls-cert-file and --tls-key-file")
	}
	if rules != "" {
		r, err := principal.ParseRules(rules)
		if err != nil {
			return fmt.Errorf("--tls-principal-rules: %w", err)
		}
		sec.PrincipalRules = r
	}
	for _, m := range strings.Split(mechs, ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
			sec.Mechanisms = append(sec.Mechanisms, m)
		}
	}
	for _, u := range strings.Split(superUsers, ";") {
		if u = strings.TrimSpace(u); u != "" {
			if !strings.Contains(u, ":") {
				return fmt.Errorf("--super-users: %q is not a principal such as User:%s", u, u)
			}
			sec.SuperUsers = append(sec.SuperUsers, u)
		}
	}
	if sec.BootstrapUser != "" {
		sec.BootstrapPassword = os.Getenv("COHORT_BOOTSTRAP_PASSWORD")
		if sec.BootstrapPassword == "" {
			return fmt.Errorf("--bootstrap-user %s: set its password in the environment variable COHORT_BOOTSTRAP_PASSWORD", sec.BootstrapUser)
		}
	}
	return nil
}

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
	listenersFlag := str("listeners", "", "comma-separated PROTOCOL://HOST:PORT, PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (default: PLAINTEXT://<--listen>)")
	advListeners := str("advertised-listeners", "", "PROTOCOL://HOST:PORT given to clients per listener (default: the listeners' bound addresses)")
	allowUnauth := str("allow-unauthenticated", "false", "allow a listener that authenticates no one on a non-loopback address")
	tlsCert := str("tls-cert-file", "", "PEM certificate of SSL and SASL_SSL listeners (reloaded on SIGHUP)")
	tlsKey := str("tls-key-file", "", "PEM private key of --tls-cert-file")
	tlsClientCA := str("tls-client-ca-file", "", "PEM CAs that verify client certificates (mTLS)")
	tlsClientAuth := str("tls-client-auth", "none", "client certificates: none, requested or required")
	tlsRules := str("tls-principal-rules", "", "Kafka ssl.principal.mapping.rules for client certificates (default: User:<CN>)")
	saslMechs := str("sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", "SASL mechanisms of SASL listeners: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER")
	jwks := str("oauth-jwks-file", "", "JWKS file of the keys that sign OAUTHBEARER tokens (reloaded when it changes)")
	oauthIssuer := str("oauth-issuer", "", "required iss claim of OAUTHBEARER tokens")
	oauthAudience := str("oauth-audience", "", "required aud claim of OAUTHBEARER tokens")
	oauthClaim := str("oauth-principal-claim", "sub", "claim naming the principal of an OAUTHBEARER token")
	sessionLife := str("sasl-session-lifetime", "0s", "KIP-368: SASL clients must re-authenticate within this (0 = never)")
	failDelay := str("failed-auth-delay", "100ms", "wait before answering a failed authentication")
	authorizer := str("authorizer", "false", "enforce ACLs even when no listener authenticates (they are enforced anyway once one does)")
	superUsers := str("super-users", "", "principals that bypass ACLs, e.g. User:admin;User:ops")
	allowNoACL := str("allow-everyone-if-no-acl-found", "false", "allow requests on resources that have no ACL at all")
	bootstrapUser := str("bootstrap-user", "", "create this SCRAM user at start if it has no credential; its password comes from COHORT_BOOTSTRAP_PASSWORD")
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
	boolean := func(name, v string) bool {
		x, err := strconv.ParseBool(v)
		if err != nil {
			perr = fmt.Errorf("--%s %q: want true or false", name, v)
		}
		return x
	}
	sec := &node.SecurityConfig{
		SessionLifetime:           dur("sasl-session-lifetime", *sessionLife),
		FailedAuthDelay:           dur("failed-auth-delay", *failDelay),
		Authorizer:                boolean("authorizer", *authorizer),
		AllowEveryoneIfNoACLFound: boolean("allow-everyone-if-no-acl-found", *allowNoACL),
		AllowUnauthenticated:      boolean("allow-unauthenticated", *allowUnauth),
		BootstrapUser:             *bootstrapUser,
		OAuth: sasl.OAuthConfig{JWKSFile: *jwks, Issuer: *oauthIssuer, Audience: *oauthAudience,
			PrincipalClaim: *oauthClaim},
	}
	if perr != nil {
		return perr
	}
	listeners, advertisedEPs, err := parseListenerFlags(*listenersFlag, *listen, *advListeners, fs)
	if err != nil {
		return err
	}
	if err := securityFlags(sec, *tlsCert, *tlsKey, *tlsClientCA, *tlsClientAuth, *tlsRules, *saslMechs, *superUsers); err != nil {
		return err
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
		Listeners:              listeners,
		Advertised:             advertisedEPs,
		Security:               sec,
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
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	var stopped error // why the node stopped by itself; the exit status
	waited := waitErr(n)
wait:
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				if sec.TLS == nil {
					log.Info("SIGHUP: no TLS certificate to reload")
				} else if err := n.ReloadTLS(); err != nil {
					log.Error("SIGHUP: TLS certificate not reloaded; the old one stays in use", "err", err)
				} else {
					log.Info("SIGHUP: TLS certificate reloaded")
				}
				continue
			}
			log.Info("shutting down", "signal", s.String())
			break wait
		case stopped = <-waited:
			if stopped != nil {
				log.Error("server stopped", "err", stopped)
			}
			break wait
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
