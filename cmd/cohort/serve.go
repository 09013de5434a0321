package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cohort-dev/cohort/console"
	"github.com/cohort-dev/cohort/consumer/serverassign"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/heapfloor"
	"github.com/cohort-dev/cohort/internal/hugepages"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/clientconfig"
	"github.com/cohort-dev/cohort/security/principal"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/disk"
)

// parseListenerFlags resolves --listeners (or --listen as one PLAINTEXT
// listener) and --advertised-listeners. given says how each flag was set
// (serveFlags.given). Its errors are usage errors: it only parses.
func parseListenerFlags(listeners, listen, advertised string, given map[string]string) ([]server.Listener, []server.Endpoint, error) {
	ls, eps, err := parseListeners(listeners, listen, advertised, given)
	if err != nil {
		return nil, nil, usageError{err}
	}
	return ls, eps, nil
}

func parseListeners(listeners, listen, advertised string, given map[string]string) ([]server.Listener, []server.Endpoint, error) {
	// Named as they were set: a COHORT_LISTEN left in an environment
	// file is no --listen on the command line. An empty variable is not
	// set (given), as elsewhere.
	listenHow, listenSet := given["listen"]
	switch {
	case listeners != "" && listenSet:
		return nil, nil, fmt.Errorf("%s and %s: give one of them", listenHow, cmp.Or(given["listeners"], "--listeners"))
	case listeners == "" && listen == "":
		how := "--listen"
		if v, ok := os.LookupEnv(envName("listen")); ok && v == "" && !strings.HasPrefix(listenHow, "--") {
			how = "$" + envName("listen")
		}
		return nil, nil, fmt.Errorf("%s is empty: want host:port (or --listeners)", how)
	case listeners == "":
		listeners = "PLAINTEXT://" + listen
	}
	ls, err := node.ParseListeners(listeners)
	if err != nil {
		return nil, nil, fmt.Errorf("--listeners: %w", err)
	}
	for _, l := range ls {
		host, _, _ := net.SplitHostPort(l.Addr)
		if err := checkHostLength("--listeners "+l.Name, host); err != nil {
			return nil, nil, err
		}
	}
	var eps []server.Endpoint
	if advertised != "" {
		adv, err := node.ParseListeners(advertised)
		if err != nil {
			return nil, nil, fmt.Errorf("--advertised-listeners: %w", err)
		}
		for _, a := range adv {
			host, port, _ := net.SplitHostPort(a.Addr)
			if err := checkHostLength("--advertised-listeners "+a.Name, host); err != nil {
				return nil, nil, err
			}
			p, _ := strconv.Atoi(port)
			eps = append(eps, server.Endpoint{Listener: a.Name, Host: host, Port: int32(p)})
		}
	}
	return ls, eps, nil
}

// checkAdvertise refuses a malformed --advertise as a usage error, as
// parseListenerFlags refuses a malformed --advertised-listeners entry: the
// node checks it too, but only once its listener is bound, and exited 1.
// Port 0 stands for the bound port, as the node reads it.
func checkAdvertise(adv string) error {
	if adv == "" {
		return nil
	}
	if err := checkHostPort("--advertise", adv); err != nil {
		return usageError{err}
	}
	return nil
}

// checkHostPort refuses an address addr of the flag how that is not
// host:port with a port from 0 to 65535 and a host of at most maxHostBytes.
func checkHostPort(how, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		// net's error quotes the address: said in our own words.
		return fmt.Errorf("%s %s: want host:port", how, shownValue(addr))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%s %s: bad port: want 0 to 65535", how, shownValue(addr))
	}
	return checkHostLength(how, host)
}

// maxHostBytes bounds the host of an address: a DNS name has at most 253
// bytes, and an advertised host goes to clients as a Kafka string in every
// Metadata answer.
const maxHostBytes = 255

// checkHostLength refuses a host of the flag how longer than maxHostBytes.
func checkHostLength(how, host string) error {
	if len(host) > maxHostBytes {
		return fmt.Errorf("%s: a host of %d bytes: want at most %d (a DNS name holds 253)", how, len(host), maxHostBytes)
	}
	return nil
}

// securityFlags fills the TLS, SASL and ACL parts of sec from the flags;
// the bootstrap user's password comes from the environment only. A
// malformed value, flags that do not go together and a
// COHORT_BOOTSTRAP_PASSWORD without a bootstrap user are usage errors; a
// certificate, key or CA file that cannot be read or loaded is not.
func securityFlags(sec *node.SecurityConfig, cert, key, clientCA, clientAuth, rules, mechs, superUsers string) error {
	if clientAuth == "" {
		clientAuth = tlsconfig.ClientAuthNone // as tlsconfig takes it
	}
	if cert != "" || key != "" {
		// The checks tlsconfig.New makes of the flags themselves, made
		// first so that they are usage errors; its own errors are then
		// about the files.
		switch {
		case cert == "" || key == "":
			return usagef("--tls-cert-file and --tls-key-file: give both")
		case clientAuth != tlsconfig.ClientAuthNone && clientAuth != tlsconfig.ClientAuthRequested && clientAuth != tlsconfig.ClientAuthRequired:
			return usagef("--tls-client-auth %q: want none, requested or required", clientAuth)
		case clientAuth != tlsconfig.ClientAuthNone && clientCA == "":
			return usagef("--tls-client-auth %s needs --tls-client-ca-file", clientAuth)
		case clientAuth == tlsconfig.ClientAuthNone && clientCA != "":
			return usagef("--tls-client-ca-file is set but --tls-client-auth is none: set it to requested or required")
		}
		t, err := tlsconfig.New(tlsconfig.Options{CertFile: cert, KeyFile: key, ClientCAFile: clientCA, ClientAuth: clientAuth})
		if err != nil {
			return err
		}
		sec.TLS = t
	} else if clientCA != "" || clientAuth != "none" {
		return usagef("--tls-client-ca-file and --tls-client-auth need --tls-cert-file and --tls-key-file")
	}
	if rules != "" {
		r, err := principal.ParseRules(rules)
		if err != nil {
			return usagef("--tls-principal-rules: %w", err)
		}
		sec.PrincipalRules = r
	}
	for _, m := range strings.Split(mechs, ",") {
		if len(m) > maxShownBytes {
			// Refused below, in upper case: not repeated.
			return usagef("--sasl-mechanisms: a mechanism of %d bytes: want SCRAM-SHA-256, SCRAM-SHA-512, PLAIN or OAUTHBEARER", len(m))
		}
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
			sec.Mechanisms = append(sec.Mechanisms, m)
		}
	}
	for _, u := range strings.Split(superUsers, ";") {
		if u = strings.TrimSpace(u); u != "" {
			if !strings.Contains(u, ":") {
				return usagef("--super-users: %q is not a principal such as User:%s", u, u)
			}
			// A principal may hold commas (a certificate's DN), but
			// not a second principal: the list is separated by ';',
			// as Kafka's super.users is, and "User:a,User:b" would
			// silently be one user named "a,User:b".
			if i := strings.Index(u, ","); i >= 0 && strings.Contains(u[i:], ",User:") {
				return usagef("--super-users: %q holds two principals: separate them with ';' (quoted for the shell: 'User:a;User:b')", u)
			}
			sec.SuperUsers = append(sec.SuperUsers, u)
		}
	}
	switch pw := os.Getenv("COHORT_BOOTSTRAP_PASSWORD"); {
	case sec.BootstrapUser != "" && pw == "":
		return usagef("--bootstrap-user %s: set its password in the environment variable COHORT_BOOTSTRAP_PASSWORD", sec.BootstrapUser)
	case sec.BootstrapUser != "":
		sec.BootstrapPassword = pw
	case pw != "":
		// An empty variable (a unit file's placeholder) is unset, as
		// COHORT_ETCD_PASSWORD's; a set one would be ignored.
		return usagef("COHORT_BOOTSTRAP_PASSWORD is set but --bootstrap-user (COHORT_BOOTSTRAP_USER) is not: " +
			"name the user it is the password of, or unset the variable (once the user exists, drop both)")
	}
	return nil
}

// maxPasswordFileBytes bounds what is read of --etcd-password-file: a
// password is a line, and a wrong path (a log, /dev/zero) must fail rather
// than fill the memory, as the TLS files' bound does.
const maxPasswordFileBytes = 64 << 10

// readSmallFile reads the file at path, refusing one over limit bytes
// without reading more than limit+1 of it.
func readSmallFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d KiB: not a password file", path, limit>>10)
	}
	return b, nil
}

// etcdPassword is the password of the etcd user: the first line of file,
// or else $COHORT_ETCD_PASSWORD. Never a flag's value, which any user of
// the machine can read from the process list.
func etcdPassword(user, file string) (string, error) {
	env := os.Getenv("COHORT_ETCD_PASSWORD")
	inEnv := env != "" // an empty variable (a unit file's placeholder) is unset
	switch {
	case user == "" && (file != "" || inEnv):
		return "", usagef("an etcd password (--etcd-password-file or COHORT_ETCD_PASSWORD) needs --etcd-user")
	case user == "":
		return "", nil
	case file != "" && inEnv:
		return "", usagef("--etcd-password-file and COHORT_ETCD_PASSWORD are both set: give the etcd password once")
	case file != "":
		b, err := readSmallFile(file, maxPasswordFileBytes)
		if err != nil {
			return "", fmt.Errorf("--etcd-password-file: %w", err)
		}
		pw, _, _ := strings.Cut(string(b), "\n")
		if pw = strings.TrimSuffix(pw, "\r"); pw == "" {
			return "", fmt.Errorf("--etcd-password-file %s: the first line is empty", file)
		}
		return pw, nil
	case !inEnv:
		return "", usagef("--etcd-user %s: set its password in --etcd-password-file or the environment variable COHORT_ETCD_PASSWORD", user)
	}
	return env, nil
}

// envName is the environment variable of a flag: COHORT_ and the flag's
// name in upper case with '-' as '_'.
func envName(flagName string) string {
	return "COHORT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// envDefault returns $COHORT_<NAME> if set, else def: every flag can also be
// given through the environment (flags win).
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv(envName(name)); ok {
		return v
	}
	return def
}

// serveFlags are the settings of cohort serve, typed, so that -h shows each
// flag's kind and parsing rejects a malformed value with the flag's name.
type serveFlags struct {
	fs *flag.FlagSet
	// order lists the flag names as -h shows them; entries starting with
	// "#" are section headings.
	order []string

	listen, advertise, clusterID, dataDir, httpListen, metrics, logLevel string
	backupDir, logFormat                                                 string
	nodeID, maxSize, maxFrame, partitions                                int
	maxConns, maxConnsPerIP, maxInflight                                 int
	maxIdle                                                              time.Duration
	minSession, maxSession, initialDelay                                 time.Duration
	retention, retentionCheck                                            time.Duration
	etcd, etcdCA, etcdCert, etcdKey, etcdPrefix, rack                    string
	etcdUser, etcdPasswordFile                                           string
	leaseTTL, etcdCompaction                                             time.Duration
	listeners, advertised                                                string
	httpHosts                                                            string
	allowUnauth, authorizer, allowNoACL, httpTLS, metricsAuth            bool
	hugePages                                                            bool
	heapFloorMiB                                                         int
	maxPartitions                                                        int
	tlsCert, tlsKey, tlsClientCA, tlsClientAuth, tlsRules                string
	saslMechs, jwks, oauthIssuer, oauthAudience, oauthClaim              string
	sessionLife, failDelay                                               time.Duration
	superUsers, bootstrapUser                                            string
	consumerSession, consumerHeartbeat                                   time.Duration
	consumerAssignInterval                                               time.Duration
	consumerAssignors                                                    string
	consumerMaxSize                                                      int
	migrationPolicy                                                      string
	assignors                                                            []string // --consumer-assignors, checked by parse
	historySize                                                          int
	rebalanceStorm                                                       string // --rebalance-storm N/DURATION
	stormN                                                               int
	stormWindow                                                          time.Duration
	// given maps the name of each flag set on the command line or by a
	// non-empty environment variable to how it was set ("--name" or
	// "$COHORT_NAME"); filled by parse.
	given map[string]string
	// fromEnv holds the flags set by an environment variable, empty ones
	// too (which given leaves out); filled by parse.
	fromEnv map[string]bool
}

// how names flag name as it was set: "--name" on the command line (or not
// set), "$COHORT_NAME" by the environment, also when that is empty.
func (s *serveFlags) how(name string) string {
	if h, ok := s.given[name]; ok {
		return h
	}
	if s.fromEnv[name] {
		return "$" + envName(name)
	}
	return "--" + name
}

// clusterOnly are the flags of cluster mode: without --etcd nothing reads
// them.
var clusterOnly = []string{"etcd-ca", "etcd-cert", "etcd-key", "etcd-user", "etcd-password-file", "etcd-prefix",
	"lease-ttl", "etcd-compaction-interval", "rack"}

// clusterOnlyGiven names the cluster-mode settings given (flags, as given,
// and COHORT_ETCD_PASSWORD), in clusterOnly's order: without --etcd they
// would be ignored.
func (s *serveFlags) clusterOnlyGiven() []string {
	var out []string
	for _, name := range clusterOnly {
		if how, ok := s.given[name]; ok {
			out = append(out, how)
		}
	}
	if os.Getenv("COHORT_ETCD_PASSWORD") != "" {
		out = append(out, "$COHORT_ETCD_PASSWORD")
	}
	return out
}

func newServeFlags() *serveFlags {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	s := &serveFlags{fs: fs}
	d := group.Defaults()
	section := func(title string) { s.order = append(s.order, "#"+title) }
	str := func(p *string, name, def, usage string) {
		fs.StringVar(p, name, def, usage)
		s.order = append(s.order, name)
	}
	num := func(p *int, name string, def int, usage string) {
		fs.IntVar(p, name, def, usage)
		s.order = append(s.order, name)
	}
	dur := func(p *time.Duration, name string, def time.Duration, usage string) {
		fs.DurationVar(p, name, def, usage)
		s.order = append(s.order, name)
	}
	boolean := func(p *bool, name, usage string) { fs.BoolVar(p, name, false, usage); s.order = append(s.order, name) }

	section("Node")
	str(&s.listen, "listen", "127.0.0.1:9092", "address for Kafka clients (one PLAINTEXT listener; see --listeners)")
	str(&s.advertise, "advertise", "", "host:port given to clients in Metadata/FindCoordinator (default: the listen address)")
	num(&s.nodeID, "node-id", 0, "node id advertised to clients")
	str(&s.clusterID, "cluster-id", "cohort", "cluster id advertised to clients")
	str(&s.dataDir, "data-dir", "./data", "directory of the embedded store (created at the first start)")
	str(&s.backupDir, "backup-dir", "", "directory that SIGUSR1 writes a consistent copy of the embedded store into, as cohort-<UTC time> (default: off)")
	num(&s.partitions, "partitions", 50, "coordinator partitions (recorded with the state at the first start; another count is refused later)")
	num(&s.maxFrame, "max-request-bytes", 100<<20, "largest request frame accepted, in bytes")
	num(&s.maxInflight, "max-inflight-request-bytes", 16<<20, "large request frames (over 64 KiB) decoded and answered at once, summed over all connections; a large request beyond it waits, one larger than it is served alone (0: no limit)")
	num(&s.maxPartitions, "max-partitions", node.DefaultMaxPartitions, "partitions of all topics together; creating or growing a topic past it is refused POLICY_VIOLATION, since every Metadata answer for all topics lists every partition (0: no limit)")
	num(&s.maxConns, "max-connections", 0, "client connections open at once, over all listeners; beyond it a new one is closed at once (0: no limit)")
	num(&s.maxConnsPerIP, "max-connections-per-ip", 0, "client connections open at once from one IP address; beyond it a new one is closed at once (0: no limit)")
	dur(&s.maxIdle, "connections-max-idle", 10*time.Minute, "close a client connection that sent no complete request for this long, also one stopped in the middle of a request (0: never)")
	str(&s.httpListen, "http-listen", "", "address of the HTTP listener: Prometheus /metrics, /healthz, /readyz and the web console /console/ (default: off)")
	boolean(&s.httpTLS, "http-tls", "serve the HTTP listener over HTTPS with --tls-cert-file (reloaded on SIGHUP), so that the console can take passwords from other hosts")
	boolean(&s.metricsAuth, "metrics-auth", "ask every /metrics scrape for HTTP basic credentials of a user of this node allowed DESCRIBE on the cluster, or over HTTPS with --tls-client-ca-file a client certificate whose principal is (needs --http-tls unless the HTTP listener is loopback; /healthz and /readyz stay open)")
	str(&s.httpHosts, "http-hosts", "", "comma-separated host names a loopback HTTP listener also answers to, besides localhost and IP addresses (a reverse proxy on this host that passes its own Host header); other names are refused, against DNS rebinding")
	str(&s.metrics, "metrics-listen", "", "deprecated name of --http-listen")
	str(&s.logLevel, "log-level", "info", "debug, info, warn or error")
	str(&s.logFormat, "log-format", "text", "text (key=value lines) or json (one JSON object a line, for log collectors)")
	fs.BoolVar(&s.hugePages, "heap-huge-pages", true, "ask Linux to back the heap with transparent huge pages where the system leaves it to programs (THP mode madvise): a restart loads its state faster; false: 4 KiB pages")
	s.order = append(s.order, "heap-huge-pages")
	num(&s.heapFloorMiB, "heap-floor-mib", heapfloor.DefaultMiB, "smallest heap goal of the Go collector, in MiB: with little live state it collects once per this much garbage instead of every few MiB; raised to 4x the data directory's size while the stored state loads (0: Go's default; GOGC and GOMEMLIMIT still apply)")

	section("Groups and offsets")
	dur(&s.minSession, "min-session-timeout", d.MinSessionTimeout, "smallest session timeout a member may ask for (0: no lower bound)")
	dur(&s.maxSession, "max-session-timeout", d.MaxSessionTimeout, "largest session timeout a member may ask for")
	dur(&s.initialDelay, "initial-rebalance-delay", d.InitialRebalanceDelay, "wait for more members before a new group's first generation (0 disables)")
	num(&s.maxSize, "group-max-size", 0, "most members a group may have (0 = unlimited)")
	dur(&s.retention, "offsets-retention", d.OffsetsRetention, "how long committed offsets are kept (KIP-211 rules)")
	dur(&s.retentionCheck, "offsets-retention-check-interval", 10*time.Minute, "how often expired offsets are removed")
	num(&s.historySize, "group-history", d.HistorySize, "rebalances kept per group in its history (docs/history.md; 0: none recorded, and no storm flagged; rebalances are still counted in the metrics)")
	str(&s.rebalanceStorm, "rebalance-storm", fmt.Sprintf("%d/%s", d.StormThreshold, shortDur(d.StormWindow)), "flag a group that rebalances more than N times in a window, as N/DURATION (docs/history.md)")

	section("Consumer groups (KIP-848 consumer protocol)")
	dur(&s.consumerSession, "consumer-session-timeout", d.ConsumerSessionTimeout, "how long a consumer-protocol member lives without a heartbeat (set by the coordinator; above --consumer-heartbeat-interval)")
	dur(&s.consumerHeartbeat, "consumer-heartbeat-interval", d.ConsumerHeartbeatInterval, "heartbeat interval given to consumer-protocol members")
	dur(&s.consumerAssignInterval, "consumer-assignment-interval", d.ConsumerAssignmentInterval, "longest wait between two target computations of a consumer group (the wait is 20µs per member up to this; 0 computes on every change)")
	str(&s.consumerAssignors, "consumer-assignors", strings.Join(d.ConsumerAssignors, ","), "server-side assignors members may ask for, comma-separated, the first the default: "+strings.Join(serverassign.Names(), ", "))
	num(&s.consumerMaxSize, "consumer-group-max-size", 0, "most members a consumer-protocol group may have (0 = unlimited)")
	str(&s.migrationPolicy, "consumer-migration-policy", group.MigrationBidirectional, "whether groups move between the classic and consumer protocols while they have members: bidirectional, upgrade, downgrade or disabled")

	section("Security")
	str(&s.listeners, "listeners", "", "comma-separated PROTOCOL://HOST:PORT, PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (default: PLAINTEXT://<--listen>)")
	str(&s.advertised, "advertised-listeners", "", "PROTOCOL://HOST:PORT given to clients per listener (default: the listeners' bound addresses)")
	boolean(&s.allowUnauth, "allow-unauthenticated", "allow a listener that authenticates no one on a non-loopback address")
	str(&s.tlsCert, "tls-cert-file", "", "PEM certificate of SSL and SASL_SSL listeners (reloaded on SIGHUP)")
	str(&s.tlsKey, "tls-key-file", "", "PEM private key of --tls-cert-file")
	str(&s.tlsClientCA, "tls-client-ca-file", "", "PEM CAs that verify client certificates (mTLS; reloaded on SIGHUP)")
	str(&s.tlsClientAuth, "tls-client-auth", "none", "client certificates: none, requested or required")
	str(&s.tlsRules, "tls-principal-rules", "", "Kafka ssl.principal.mapping.rules for client certificates (default: User:<CN>)")
	str(&s.saslMechs, "sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", "SASL mechanisms of SASL listeners: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, OAUTHBEARER")
	str(&s.jwks, "oauth-jwks-file", "", "JWKS file of the keys that sign OAUTHBEARER tokens (reloaded when it changes, and checked on SIGHUP)")
	str(&s.oauthIssuer, "oauth-issuer", "", "required iss claim of OAUTHBEARER tokens")
	str(&s.oauthAudience, "oauth-audience", "", "required aud claim of OAUTHBEARER tokens")
	str(&s.oauthClaim, "oauth-principal-claim", "sub", "claim naming the principal of an OAUTHBEARER token")
	dur(&s.sessionLife, "sasl-session-lifetime", 0, "KIP-368: SASL clients must re-authenticate within this (0 = never)")
	dur(&s.failDelay, "failed-auth-delay", 100*time.Millisecond, "wait before answering a failed authentication (0: none)")
	boolean(&s.authorizer, "authorizer", "enforce ACLs even when no listener authenticates (they are enforced anyway once one does)")
	str(&s.superUsers, "super-users", "", "principals that bypass ACLs, e.g. User:admin;User:ops")
	boolean(&s.allowNoACL, "allow-everyone-if-no-acl-found", "allow requests on resources that have no ACL at all")
	str(&s.bootstrapUser, "bootstrap-user", "", "create this SCRAM user at start if it has no credential; its password comes from COHORT_BOOTSTRAP_PASSWORD")

	section("Cluster mode (state in etcd)")
	str(&s.etcd, "etcd", "", "comma-separated etcd endpoints (host:port or https://host:port; TLS when --etcd-ca or --etcd-cert is set): cluster mode, state in etcd instead of --data-dir")
	str(&s.etcdCA, "etcd-ca", "", "CA certificate file to verify etcd (TLS)")
	str(&s.etcdCert, "etcd-cert", "", "client certificate file for etcd (TLS; reloaded on SIGHUP)")
	str(&s.etcdKey, "etcd-key", "", "client key file for etcd (TLS; reloaded on SIGHUP)")
	str(&s.etcdUser, "etcd-user", "", "etcd user, when etcd has authentication enabled; its password comes from --etcd-password-file or COHORT_ETCD_PASSWORD")
	str(&s.etcdPasswordFile, "etcd-password-file", "", "file holding the password of --etcd-user (one line)")
	str(&s.etcdPrefix, "etcd-prefix", "/cohort/", "prefix of every etcd key cohort uses")
	dur(&s.leaseTTL, "lease-ttl", 10*time.Second, "etcd lease TTL: how long a dead node's partitions wait before others take over (whole seconds, at least 2s)")
	dur(&s.etcdCompaction, "etcd-compaction-interval", 5*time.Minute, "at this interval one node compacts etcd's history up to the revision of one interval earlier, so that etcd's database does not grow until its quota stops every write (0: never, when etcd compacts by itself: --auto-compaction-retention)")
	str(&s.rack, "rack", "", "rack advertised in Metadata (cluster mode)")
	return s
}

// shortDuration prints d in Go syntax without zero trailing units: 30m, not
// 30m0s; 168h, not 168h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// defaultText is how -h and the README show a flag's default: "" when it
// has none (an empty string, or false), durations short.
func defaultText(f *flag.Flag) string {
	switch f.Value.(flag.Getter).Get().(type) {
	case time.Duration:
		d, _ := time.ParseDuration(f.DefValue)
		return shortDuration(d)
	case bool:
		if f.DefValue == "false" {
			return ""
		}
	}
	return f.DefValue
}

func (s *serveFlags) usage(w io.Writer) {
	fmt.Fprint(w, `usage: cohort serve [flags]

Runs a cohort node. Every flag can also be set in the environment as
COHORT_<NAME> (upper case, '-' as '_', e.g. COHORT_DATA_DIR); the command
line wins. Durations use Go syntax: 100ms, 3s, 10m, 168h.
`)
	for _, name := range s.order {
		if title, ok := strings.CutPrefix(name, "#"); ok {
			fmt.Fprintf(w, "\n%s:\n", title)
			continue
		}
		f := s.fs.Lookup(name)
		kind, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if kind != "" {
			fmt.Fprintf(w, " %s", kind)
		}
		fmt.Fprintf(w, "\n    \t%s\n    \t", usage)
		if def := defaultText(f); def != "" {
			if kind == "string" {
				def = strconv.Quote(def)
			}
			fmt.Fprintf(w, "default %s, ", def)
		}
		fmt.Fprintf(w, "env %s\n", envName(f.Name))
	}
}

// parse applies the environment (lookupEnv) and then args, and checks the
// ranges of numbers and durations.
func (s *serveFlags) parse(args []string, lookupEnv func(string) (string, bool)) error {
	var err error
	s.given, s.fromEnv = map[string]string{}, map[string]bool{}
	s.fs.VisitAll(func(f *flag.Flag) {
		if v, ok := lookupEnv(envName(f.Name)); ok && err == nil {
			s.fromEnv[f.Name] = true
			if v != "" {
				s.given[f.Name] = "$" + envName(f.Name)
			}
			if e := f.Value.Set(v); e != nil {
				kind, _ := flag.UnquoteUsage(f)
				err = fmt.Errorf("$%s %s: want %s", envName(f.Name), shownValue(v), wantOfKind(kind))
			}
		}
	})
	if err != nil {
		return err
	}
	// Parse errors are returned (and printed once, by main); -h prints the
	// usage.
	s.fs.SetOutput(io.Discard)
	if err := s.fs.Parse(args); err != nil {
		return s.unknownFlag(invalidValueError(s.fs, err))
	}
	if s.fs.NArg() > 0 {
		return checkNoArgs("serve", s.fs.Args())
	}
	s.fs.Visit(func(f *flag.Flag) { s.given[f.Name] = "--" + f.Name })
	// First: the checks below may quote a value.
	if err := s.checkBounds(); err != nil {
		return err
	}
	s.fs.VisitAll(func(f *flag.Flag) {
		switch v := f.Value.(flag.Getter).Get().(type) {
		case time.Duration:
			if v < 0 && err == nil {
				err = fmt.Errorf("--%s %v: want a non-negative duration", f.Name, v)
			}
		case int:
			if f.Name == "partitions" || f.Name == "max-request-bytes" {
				return // their own ranges, from 1, below
			}
			if (v < 0 || v > math.MaxInt32) && err == nil {
				err = fmt.Errorf("--%s %d: want an integer from 0 to %d", f.Name, v, math.MaxInt32)
			}
		}
	})
	if err != nil {
		return err
	}
	if s.partitions < 1 || s.partitions > node.MaxPartitionCount {
		return fmt.Errorf("--partitions %d: want 1 to %d", s.partitions, node.MaxPartitionCount)
	}
	if s.retentionCheck == 0 {
		// 0 does not mean "never": the node would use its default.
		return fmt.Errorf("--offsets-retention-check-interval 0: want a positive duration")
	}
	if s.retention == 0 {
		// Nor does 0 mean "never" or "at once" here: Kafka refuses an
		// offsets.retention.minutes below 1, and group.Config reads 0
		// as its default, 7 days.
		return fmt.Errorf("--offsets-retention 0: want a positive duration")
	}
	if s.maxFrame < 1 || s.maxFrame > math.MaxInt32 {
		return fmt.Errorf("--max-request-bytes %d: want 1 to %d", s.maxFrame, math.MaxInt32)
	}
	if s.etcdCompaction != 0 && s.etcdCompaction < time.Minute {
		return fmt.Errorf("--etcd-compaction-interval %s: want 0 (never) or at least 1m (a watch falling further behind than one interval reads everything again)", shortDuration(s.etcdCompaction))
	}
	if s.metrics != "" {
		if s.httpListen != "" && s.httpListen != s.metrics {
			return fmt.Errorf("--metrics-listen %s and --http-listen %s: --metrics-listen is the old name of --http-listen; set only --http-listen", s.metrics, s.httpListen)
		}
		s.httpListen = s.metrics
	}
	if s.maxSession == 0 {
		// 0 would be group.Config's default, 30 minutes, not a bound.
		return fmt.Errorf("--max-session-timeout 0: want a positive duration")
	}
	if s.minSession > s.maxSession {
		return fmt.Errorf("--min-session-timeout %s is above --max-session-timeout %s", shortDuration(s.minSession), shortDuration(s.maxSession))
	}
	return s.checkConsumer()
}

// Bounds of serve's flags beyond maxFlagDuration and the string lengths
// of checkFlagBounds (docs in CHANGELOG.md).
const (
	// maxOffsetsRetention: ten years. Retention is no timeout, so it
	// may exceed maxFlagDuration, but not by centuries.
	maxOffsetsRetention = 10 * 365 * 24 * time.Hour
	// maxHeapFloorMiB: 1 TiB. A floor above the machine's memory would
	// keep the collector from running until the process is killed.
	maxHeapFloorMiB = 1 << 20
	// maxGroupHistory: 100 times the default; every group keeps that
	// many events in memory and in the store.
	maxGroupHistory = 10000
)

// checkBounds refuses values no other check of parse bounds: strings too
// long, durations too long, required values left empty, an HTTP address
// that is not host:port, and the limits above. It runs before anything
// is opened or created.
func (s *serveFlags) checkBounds() error {
	if err := checkFlagBounds(s.fs, s.how, "offsets-retention"); err != nil {
		return err
	}
	if err := checkDuration(s.how("offsets-retention"), s.retention, maxOffsetsRetention); err != nil {
		return err
	}
	if strings.TrimSpace(s.clusterID) == "" {
		return fmt.Errorf("%s is empty: want the cluster id clients are given", s.how("cluster-id"))
	}
	if s.etcd == "" && strings.TrimSpace(s.dataDir) == "" {
		// filepath.Join("", ...) is the working directory: the store
		// would be made wherever the node was started.
		return fmt.Errorf("%s is empty: want the directory of the embedded store (or --etcd)", s.how("data-dir"))
	}
	for _, name := range []string{"http-listen", "metrics-listen"} {
		if v := s.fs.Lookup(name).Value.String(); v != "" {
			if err := checkHostPort(s.how(name), v); err != nil {
				return err
			}
		}
	}
	if s.heapFloorMiB > maxHeapFloorMiB {
		return fmt.Errorf("%s %d: want at most %d (1 TiB)", s.how("heap-floor-mib"), s.heapFloorMiB, maxHeapFloorMiB)
	}
	if s.historySize > maxGroupHistory {
		return fmt.Errorf("%s %d: want at most %d", s.how("group-history"), s.historySize, maxGroupHistory)
	}
	return nil
}

// unknownFlag rewrites the flag package's error for an undefined flag as
// the other commands put it (flagError), with the nearest flag of serve if
// one is near enough to be a typo; other parse errors are returned as they
// are.
func (s *serveFlags) unknownFlag(err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	name = strings.TrimPrefix(name, "-")
	best, bestDist := "", 0
	s.fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); best == "" || d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	hint := ""
	if best != "" && bestDist <= min(3, max(1, len(name)/3)) {
		hint = "did you mean --" + best + "? "
	}
	return fmt.Errorf("serve: --%s is not one of its flags (%scohort serve -h lists them)", name, hint)
}

// checkConsumer checks the consumer-protocol flags: a heartbeat interval
// below the session timeout (as Kafka requires), both positive, and
// assignor names that serverassign knows, each once (kept in lower case,
// as members name them).
func (s *serveFlags) checkConsumer() error {
	if s.consumerHeartbeat <= 0 || s.consumerSession <= 0 {
		return fmt.Errorf("--consumer-session-timeout and --consumer-heartbeat-interval must be positive")
	}
	if most := time.Duration(math.MaxInt32) * time.Millisecond; s.consumerHeartbeat > most {
		// The interval goes to members as int32 milliseconds (Kafka's
		// group.consumer.heartbeat.interval.ms is an int): more wrapped
		// round to a negative interval.
		return fmt.Errorf("--consumer-heartbeat-interval %s: want at most %s (%d ms, the most a heartbeat answer carries)",
			shortDuration(s.consumerHeartbeat), most, math.MaxInt32)
	}
	if s.consumerSession <= s.consumerHeartbeat {
		return fmt.Errorf("--consumer-session-timeout %s must be above --consumer-heartbeat-interval %s",
			shortDuration(s.consumerSession), shortDuration(s.consumerHeartbeat))
	}
	if _, err := newLogger(io.Discard, s.logFormat, s.logLevel); err != nil {
		return err
	}
	s.migrationPolicy = strings.ToLower(strings.TrimSpace(s.migrationPolicy))
	switch s.migrationPolicy {
	case group.MigrationBidirectional, group.MigrationUpgrade, group.MigrationDowngrade, group.MigrationDisabled:
	default:
		return fmt.Errorf("--consumer-migration-policy %s: want bidirectional, upgrade, downgrade or disabled", shownValue(s.migrationPolicy))
	}
	s.assignors = nil
	for _, name := range strings.Split(s.consumerAssignors, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if _, ok := serverassign.ByName(name); !ok {
			return fmt.Errorf("--consumer-assignors %s: unknown assignor %s: want some of %s", shownValue(s.consumerAssignors), shownValue(name),
				strings.Join(serverassign.Names(), ", "))
		}
		if slices.Contains(s.assignors, name) {
			return fmt.Errorf("--consumer-assignors %s: %s is named twice", shownValue(s.consumerAssignors), name)
		}
		s.assignors = append(s.assignors, name)
	}
	n, w, ok := strings.Cut(s.rebalanceStorm, "/")
	var perr error
	if ok {
		if s.stormN, perr = strconv.Atoi(strings.TrimSpace(n)); perr == nil {
			s.stormWindow, perr = time.ParseDuration(strings.TrimSpace(w))
		}
	}
	if !ok || perr != nil || s.stormN < 1 || s.stormWindow <= 0 {
		return fmt.Errorf("%s %s: want N/DURATION, e.g. 10/5m", s.how("rebalance-storm"), shownValue(s.rebalanceStorm))
	}
	if s.stormN > math.MaxInt32 || s.stormWindow > maxFlagDuration {
		return fmt.Errorf("%s %s: want N at most %d and DURATION at most %s", s.how("rebalance-storm"), shownValue(s.rebalanceStorm),
			math.MaxInt32, shortDuration(maxFlagDuration))
	}
	return nil
}

// shortDur prints 5m0s as 5m.
func shortDur(d time.Duration) string {
	str := d.String()
	str = strings.TrimSuffix(str, "0s")
	return strings.TrimSuffix(str, "0m")
}

// groupConfig is the group coordinator's configuration from the flags
// (after parse).
func (s *serveFlags) groupConfig() group.Config {
	cfg := group.Defaults()
	cfg.MinSessionTimeout = s.minSession
	if s.minSession == 0 {
		// No lower bound, as group.min.session.timeout.ms=0 in Kafka.
		// group.Config reads a zero minimum as its 6 s default; session
		// timeouts are whole milliseconds, so 1 ns bounds none but 0 ms.
		cfg.MinSessionTimeout = time.Nanosecond
	}
	cfg.MaxSessionTimeout = s.maxSession
	cfg.InitialRebalanceDelay = s.initialDelay
	cfg.OffsetsRetention = s.retention
	cfg.MaxSize = s.maxSize
	cfg.ConsumerSessionTimeout = s.consumerSession
	cfg.ConsumerHeartbeatInterval = s.consumerHeartbeat
	cfg.ConsumerAssignmentInterval = s.consumerAssignInterval
	cfg.ConsumerAssignors = s.assignors
	cfg.ConsumerMaxSize = s.consumerMaxSize
	cfg.ConsumerMigrationPolicy = s.migrationPolicy
	cfg.HistorySize = s.historySize
	if s.historySize == 0 {
		cfg.HistorySize = -1 // 0 keeps none
	}
	cfg.StormThreshold, cfg.StormWindow = s.stormN, s.stormWindow
	return cfg
}

func serve(args []string) error {
	s := newServeFlags()
	if err := s.parse(args, os.LookupEnv); errors.Is(err, flag.ErrHelp) {
		s.usage(os.Stderr)
		return nil
	} else if err != nil {
		return usageError{err}
	}
	// parse checked the format and level.
	log, err := newLogger(os.Stderr, s.logFormat, s.logLevel)
	if err != nil {
		return usageError{err}
	}
	err = runServe(s, log)
	if err != nil && s.logFormat == "json" {
		// A log collector reads JSON lines: the reason cohort exits is
		// one of them, not the plain "cohort: ..." line of the text
		// format, which main prints otherwise.
		code := exitCode(err, io.Discard)
		log.Error("cohort serve exits", "err", elideLong(err.Error(), longValues(commandValues("serve", args))), "exit_code", code)
		return loggedError{err}
	}
	return err
}

// failedAuthDelay is the node's FailedAuthDelay for the flag: its 0 is no
// wait, as Kafka's connection.failed.authentication.delay.ms=0, which the
// config spells negative (its 0 is the default, 100ms).
func (s *serveFlags) failedAuthDelay() time.Duration {
	if s.failDelay == 0 {
		return -1
	}
	return s.failDelay
}

// runServe runs the node of the flags s (parsed) until a signal stops it,
// logging to log.
func runServe(s *serveFlags, log *slog.Logger) error {
	if err := checkServeEnv(s.fs, os.Environ()); err != nil {
		return err
	}
	cfg := s.groupConfig()
	sec := &node.SecurityConfig{
		SessionLifetime:           s.sessionLife,
		FailedAuthDelay:           s.failedAuthDelay(),
		Authorizer:                s.authorizer,
		AllowEveryoneIfNoACLFound: s.allowNoACL,
		AllowUnauthenticated:      s.allowUnauth,
		BootstrapUser:             s.bootstrapUser,
		OAuth: sasl.OAuthConfig{JWKSFile: s.jwks, Issuer: s.oauthIssuer, Audience: s.oauthAudience,
			PrincipalClaim: s.oauthClaim},
	}
	listeners, advertisedEPs, err := parseListenerFlags(s.listeners, s.listen, s.advertised, s.given)
	if err != nil {
		return err
	}
	if err := checkAdvertise(s.advertise); err != nil {
		return err
	}
	if err := securityFlags(sec, s.tlsCert, s.tlsKey, s.tlsClientCA, s.tlsClientAuth, s.tlsRules, s.saslMechs, s.superUsers); err != nil {
		return err
	}
	var clusterCfg *node.ClusterConfig
	var defaultDataDirWarning string
	if s.etcd != "" {
		if s.leaseTTL < 2*time.Second || s.leaseTTL%time.Second != 0 {
			return usagef("--lease-ttl %s: want whole seconds, at least 2s", shortDuration(s.leaseTTL))
		}
		if (s.etcdCert == "") != (s.etcdKey == "") {
			// As --tls-cert-file and --tls-key-file: flags that do not
			// go together, found before any file is read.
			return usagef("--etcd-cert and --etcd-key: give both")
		}
		eps, err := etcdEndpoints(s.how("etcd"), s.etcd)
		if err != nil {
			return err
		}
		clusterCfg = &node.ClusterConfig{Endpoints: eps, CAFile: s.etcdCA, CertFile: s.etcdCert, KeyFile: s.etcdKey,
			Prefix: s.etcdPrefix, LeaseTTL: s.leaseTTL, Rack: s.rack, Username: s.etcdUser,
			CompactionInterval: s.etcdCompaction}
		if s.etcdCompaction == 0 {
			clusterCfg.CompactionInterval = -1
		}
		if clusterCfg.Password, err = etcdPassword(s.etcdUser, s.etcdPasswordFile); err != nil {
			return err
		}
		if how, ok := s.given["data-dir"]; ok && disk.IsStore(s.dataDir) {
			// Cluster mode never reads it: the groups and offsets in it
			// would seem lost. (A --data-dir without a store, as a shared
			// environment file may give every node, is no reason to stop.)
			return usagef("%s %s holds an embedded store, which cluster mode (--etcd) does not read: its groups and offsets "+
				"would not be served; to start on the state in etcd, remove %s (the store stays as it is), or drop --etcd to serve the store",
				how, s.dataDir, how)
		} else if !ok && disk.IsStore(s.dataDir) {
			// The default, ./data, left by an earlier `cohort serve` in
			// this working directory. Not refused: a node moved into
			// etcd with cohort store copy may keep its old directory
			// where it starts. But its state is not served, which an
			// operator who did not copy it should hear of.
			defaultDataDirWarning = fmt.Sprintf("%s holds an embedded store (the default --data-dir), which cluster mode (--etcd) does not read: "+
				"its groups, offsets, users and ACLs are not served; to serve them in the cluster, stop the nodes and move them into etcd "+
				"with cohort store copy --from-data-dir %s (docs/operations.md); once copied, or if it is not needed, move the directory away",
				s.dataDir, s.dataDir)
		}
	} else if given := s.clusterOnlyGiven(); len(given) > 0 {
		// Settings of cluster mode that a node on --data-dir would
		// silently ignore (never their values: one may be a secret).
		what, them := "a cluster-mode setting", "it"
		if len(given) > 1 {
			what, them = "cluster-mode settings", "them"
		}
		return usagef("%s: %s without --etcd, where the node keeps its state in --data-dir and would ignore %s; add --etcd or remove %s",
			strings.Join(given, ", "), what, them, them)
	}
	if s.backupDir != "" && s.etcd == "" && insideDir(s.dataDir, s.backupDir) {
		// Checked now rather than at the first SIGUSR1, which refused it.
		return usagef("--backup-dir %s is inside --data-dir %s: a backup must go outside the store", s.backupDir, s.dataDir)
	}
	slog.SetDefault(log)
	nodeCfg := node.Config{
		Listeners:               listeners,
		Advertised:              advertisedEPs,
		Security:                sec,
		Advertise:               s.advertise,
		NodeID:                  int32(s.nodeID),
		ClusterID:               s.clusterID,
		DataDir:                 s.dataDir,
		Partitions:              s.partitions,
		Group:                   cfg,
		MaxFrameBytes:           int32(s.maxFrame),
		MaxInflightRequestBytes: inflightBytes(s.maxInflight),
		MaxConnections:          s.maxConns,
		MaxPartitions:           partitionLimit(s.maxPartitions),
		MaxConnectionsPerIP:     s.maxConnsPerIP,
		ConnectionsMaxIdle:      s.maxIdle,
		HTTPListen:              s.httpListen,
		HTTPTLS:                 s.httpTLS,
		HTTPHosts:               splitList(s.httpHosts),
		MetricsAuth:             s.metricsAuth,
		HTTPHandlers:            console.Register,
		Logger:                  log,
		RetentionCheckInterval:  s.retentionCheck,
		Cluster:                 clusterCfg,
	}
	// The node's own checks of its configuration, before anything is
	// logged or set up: a start that is refused says only why.
	if err := node.CheckConfig(nodeCfg); err != nil {
		return usageError{err}
	}

	if s.metrics != "" {
		log.Warn("--metrics-listen (COHORT_METRICS_LISTEN) is deprecated: use --http-listen (COHORT_HTTP_LISTEN)")
	}
	for _, w := range sec.Warnings(listeners) {
		log.Warn(w)
	}
	for _, w := range clusterCfg.Warnings() {
		log.Warn(w)
	}
	if defaultDataDirWarning != "" {
		log.Warn(defaultDataDirWarning)
	}
	if clusterCfg != nil && s.backupDir != "" {
		// Kept, say, from a node's settings before it moved into a
		// cluster (examples/systemd's cohort.env has it): a backup job
		// that signals the node would have no backup, and one line at
		// each SIGUSR1 is easy to miss.
		log.Warn(cmp.Or(s.given["backup-dir"], "--backup-dir") + " is not used in cluster mode: the state is in etcd, and SIGUSR1 " +
			"writes no backup; back etcd up with its own snapshots (etcdctl snapshot save) and remove the setting")
	}
	if clusterCfg != nil && s.etcdPasswordFile != "" && clientconfig.Exposed(s.etcdPasswordFile) {
		// As the CLI warns of its own secret files.
		log.Warn("--etcd-password-file " + exposedWarning(s.etcdPasswordFile))
	}
	var floor *heapfloor.Floor
	normalFloor, loadFloor := int64(s.heapFloorMiB)<<20, int64(0)
	if s.heapFloorMiB > 0 {
		// While the node replays its own store, the floor is sized from
		// the store's size on disk: the collector then runs about once
		// during the load instead of at every doubling of the heap.
		if s.etcd == "" {
			loadFloor = heapfloor.LoadFloor(disk.DirBytes(s.dataDir), normalFloor)
		}
		floor = heapfloor.New(max(normalFloor, loadFloor))
		defer floor.Stop()
		log.Debug("collector heap goal kept at or above a floor", "floor_mib", s.heapFloorMiB, "while_loading_mib", max(normalFloor, loadFloor)>>20)
	}
	if s.hugePages {
		// Before the node starts: loading the stored state is what fills
		// the heap first.
		hp, stop, err := hugepages.Enable(hugepages.DefaultReserve)
		switch {
		case err != nil:
			log.Warn("heap huge pages not advised; the heap uses 4 KiB pages", "err", err)
		case hp.Mode == "madvise":
			log.Info("heap advised to use transparent huge pages", "reserved_mib", hp.Reserved>>20, "advised_mib", hp.Advised>>20)
		default:
			log.Debug("heap huge pages: nothing to advise", "thp_mode", hp.Mode)
		}
		defer stop()
	}
	// SIGHUP is caught from before the listeners open: a certificate
	// rotation that signals as soon as the port answers must find it
	// handled (queued until the node is up), not the signal's default
	// action (exit) or, for a process started under nohup, an ignored signal.
	// SIGINT and SIGTERM are caught from before the start too: one that
	// comes during the start stops the node cleanly once it is up, a second
	// one ends the process at once (watchStopDuringStart).
	// Each kind of signal has a channel of its own: the signal package
	// drops a signal that finds its channel full, so a stop signal sharing
	// one slot with a SIGHUP or SIGUSR1 not yet taken was lost. A repeat
	// of one kind finds its slot taken and is dropped, which loses nothing.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var backupSig chan os.Signal // nil: never ready
	if backupSignal != nil {
		backupSig = make(chan os.Signal, 1)
		signal.Notify(backupSig, backupSignal)
		defer signal.Stop(backupSig)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(stop)
	req := &stopRequest{now: time.Now}
	started := watchStopDuringStart(stop, req, log)
	n, err := node.Start(nodeCfg)
	started()
	if ce := (*node.ConfigError)(nil); errors.As(err, &ce) {
		return usageError{err}
	} else if err != nil {
		return err
	}
	// The store is open, the listeners are bound and served: a service
	// manager waiting for the start (systemd's Type=notify) may go on.
	// Coordinator partitions may still be loading (clients are told to
	// retry); /readyz says when they are served.
	notify := newNotifier(log)
	notify.ready(fmt.Sprintf("serving Kafka clients on %s as node %d", n.Addr(), s.nodeID))
	if loadFloor > normalFloor {
		loadCtx, cancelLoad := context.WithTimeout(context.Background(), loadFloorFor)
		defer cancelLoad()
		go func() {
			// Loaded (or given up on: a partition whose load keeps
			// failing must not keep the raised floor): the usual floor.
			_ = n.WaitLoaded(loadCtx)
			floor.Set(normalFloor)
			log.Debug("collector heap floor back to its usual value after loading", "floor_mib", normalFloor>>20)
		}()
	}
	// Reloads read files (certificates, the JWKS file), which can hang (a
	// network mount): they run on a goroutine of their own, so that a stop
	// signal is acted on meanwhile (one still under way when the node
	// stops is left to finish or not).
	closing := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				reload(n, sec, s.tlsClientCA != "", log)
			case <-closing:
				return
			}
		}
	}()
	var stopped error // why the node stopped by itself; the exit status
	waited := waitErr(n)
	var backingUp atomic.Bool
wait:
	for {
		select {
		case <-backupSig:
			backup(n, s.backupDir, &backingUp, log)
		case sg := <-stop:
			req.take(sg) // (kept already if it came during the start)
			log.Info("shutting down", "signal", sg.String())
			notify.stopping("shutting down on " + sg.String())
			break wait
		case stopped = <-waited:
			if stopped != nil {
				log.Error("server stopped", "err", stopped)
			}
			notify.stopping("the server stopped")
			break wait
		}
	}
	close(closing)
	timeout := time.NewTimer(shutdownTimeout)
	defer timeout.Stop()
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	return finishShutdown(done, stop, req, timeout.C, stopped, log)
}

// shutdownTimeout bounds how long cohort serve waits for the node to close.
const shutdownTimeout = 30 * time.Second

// finishShutdown waits for the node's Close to report on done, or for the
// timeout, and returns the exit status's error: stopped (the node stopped
// by itself) if set, else Close's. A second SIGINT or SIGTERM on stop ends
// the wait at once: the node answers a write only once it is durable, so
// leaving now loses nothing acknowledged (the store recovers as after a
// crash), though a backup under way is cut short and, in cluster mode, the
// other nodes may have to wait for the lease to expire. A signal that
// repeats the one that began the shutdown (req.repeats: GNU timeout sends
// SIGTERM to the process and to its group at once) is ignored.
func finishShutdown(done <-chan error, stop <-chan os.Signal, req *stopRequest, timeout <-chan time.Time, stopped error, log *slog.Logger) error {
	for {
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
		case sg := <-stop:
			if req.repeats(sg) {
				ignoreRepeat(log, sg)
				continue
			}
			log.Warn("signal during the shutdown: exiting before it finished; acknowledged writes are durable already", "signal", sg.String())
			if stopped != nil {
				return stopped
			}
			return fmt.Errorf("shutdown cut short by a second signal (%s)", sg)
		case <-timeout:
			return fmt.Errorf("shutdown did not finish in %s", shutdownTimeout)
		}
	}
}

// reload reads the files a SIGHUP reloads again: the TLS certificate and
// client CAs, the OAUTHBEARER JWKS file, the etcd client certificate.
func reload(n *node.Node, sec *node.SecurityConfig, clientCAs bool, log *slog.Logger) {
	if sec.TLS == nil {
		log.Info("SIGHUP: no TLS certificate to reload")
	} else if err := n.ReloadTLS(); err != nil {
		log.Error("SIGHUP: TLS files not reloaded; the certificate and client CAs in use stay", "err", err)
	} else if clientCAs {
		log.Info("SIGHUP: TLS certificate and client CAs reloaded")
	} else {
		log.Info("SIGHUP: TLS certificate reloaded")
	}
	switch err := n.ReloadOAuthKeys(); {
	case errors.Is(err, node.ErrNotConfigured):
	case err != nil:
		log.Error("SIGHUP: OAUTHBEARER JWKS file not loaded; the keys read before stay in use", "err", err)
	default:
		log.Info("SIGHUP: OAUTHBEARER JWKS file checked; its keys are in use")
	}
	switch err := n.ReloadEtcdTLS(); {
	case errors.Is(err, node.ErrNotConfigured):
	case err != nil:
		log.Error("SIGHUP: etcd client certificate not reloaded; the one in use stays", "err", err)
	default:
		log.Info("SIGHUP: etcd client certificate reloaded")
	}
}

func waitErr(n *node.Node) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- n.Wait() }()
	return ch
}

// loadFloorFor bounds how long the raised heap floor of a load lasts.
const loadFloorFor = 10 * time.Minute

// backup writes a copy of the node's store into a new directory under dir
// (SIGUSR1), in the background: the node keeps serving. One at a time; the
// result is logged. In cluster mode there is no store of the node's to copy:
// the signal says so, whether dir is set or not.
func backup(n *node.Node, dir string, busy *atomic.Bool, log *slog.Logger) {
	if n.Cluster() != nil {
		log.Warn("SIGUSR1: no backup written: in cluster mode the state is in etcd; back it up with etcd's own snapshots (etcdctl snapshot save)")
		return
	}
	if dir == "" {
		log.Warn("SIGUSR1: no backup written: --backup-dir is not set")
		return
	}
	if !busy.CompareAndSwap(false, true) {
		log.Warn("SIGUSR1: a backup is under way; this signal is ignored")
		return
	}
	dest := filepath.Join(dir, "cohort-"+time.Now().UTC().Format("20060102T150405.000Z"))
	log.Info("SIGUSR1: backup started", "dir", dest)
	go func() {
		defer busy.Store(false)
		start := time.Now()
		if err := n.Backup(context.Background(), dest); err != nil {
			log.Error("SIGUSR1: backup failed; the node goes on serving", "dir", dest, "err", err)
			return
		}
		log.Info("SIGUSR1: backup written", "dir", dest, "duration", time.Since(start).Round(time.Millisecond))
	}()
}

// newLogger is cohort serve's logger: text (slog's key=value lines) or json
// (one object a line), at level and above, to w.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		// slog also takes offsets such as INFO+2; the usage names the
		// four levels.
		return nil, fmt.Errorf("--log-level %s: want debug, info, warn or error", shownValue(level))
	}
	opts := &slog.HandlerOptions{Level: l, ReplaceAttr: readableDuration}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %s: want text or json", shownValue(format))
}

// readableDuration writes a time.Duration as Go writes it, "58ms" or "1m30s",
// in both formats: slog's JSON handler would write its nanoseconds as a bare
// number.
func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// inflightBytes turns --max-inflight-request-bytes into
// server.Config.MaxInflightRequestBytes, where 0 means the default and
// negative no limit.
func inflightBytes(n int) int64 {
	if n == 0 {
		return -1
	}
	return int64(n)
}

// partitionLimit is --max-partitions as node.Config.MaxPartitions takes it
// (the flag's 0, no limit, is the config's negative).
func partitionLimit(n int) int64 {
	if n == 0 {
		return -1
	}
	return int64(n)
}

// insideDir reports whether path is dir or lies under it (both made
// absolute; false when either cannot be).
func insideDir(dir, path string) bool {
	d, err1 := filepath.Abs(dir)
	p, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return false
	}
	return p == d || strings.HasPrefix(p, d+string(filepath.Separator))
}
