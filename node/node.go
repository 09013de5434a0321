// Package node assembles one cohort node: the store, the coordinator, the
// topic catalog and the Kafka wire server. cmd/cohort runs it; tests and
// benchmarks start it in-process on 127.0.0.1.
package node

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/buildinfo"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/disk"
)

// CatalogPartition is the store partition holding the topic catalog (the
// coordinator partitions are 0..Partitions-1).
const CatalogPartition int32 = -1

// topicRecordPrefix starts the keys of the topics' records in
// CatalogPartition, one record per topic (catalog.TopicKey after the prefix),
// so that a change writes one topic's record whatever the number of topics.
const topicRecordPrefix = "topic/"

// legacyCatalogKey is the one record in which nodes before the per-topic
// records kept every topic: a node that finds it moves its topics to
// per-topic records and deletes it (migrateCatalog).
const legacyCatalogKey = "catalog"

// groupConfigPrefix starts the keys of the groups' configs in
// CatalogPartition, one record per group (catalog.Catalog.GroupConfigSnapshot)
// after the prefix: keys a cohort that predates group configs never reads.
const groupConfigPrefix = "group-config/"

// DefaultMaxPartitions is Config.MaxPartitions's default: a million
// partitions over all topics (a Metadata answer lists each in about 26
// bytes).
const DefaultMaxPartitions = 1_000_000

// Config configures a node.
type Config struct {
	Listen    string // TCP address for Kafka clients, e.g. "127.0.0.1:9092"
	Advertise string // host:port given to clients; "" = the listen address
	// Listeners, if set, replace Listen: one per security protocol.
	Listeners []server.Listener
	// Advertised are the addresses given to clients by listener name
	// (Kafka's advertised.listeners); a listener without one advertises
	// its bound address. Only Name, Host and Port are used.
	Advertised []server.Endpoint
	// Security configures TLS, SASL and ACLs (nil: none; the listeners
	// must then be PLAINTEXT on loopback unless AllowUnauthenticated).
	Security  *SecurityConfig
	NodeID    int32
	ClusterID string
	// DataDir holds the embedded store. Ignored when Store is set.
	DataDir string
	// Store overrides the embedded store (tests: memstore). The node does
	// not close a store it was given.
	Store store.Store
	// Partitions is the number of coordinator partitions (0: 50; at most
	// MaxPartitionCount).
	Partitions int
	Group      group.Config
	// MaxFrameBytes caps a request frame (0 = 100 MiB).
	MaxFrameBytes int32
	// MaxPartitions bounds the partitions of all catalog topics together
	// (0: DefaultMaxPartitions; negative: no bound): creating or growing a
	// topic past it is refused POLICY_VIOLATION. Every Metadata answer for
	// all topics lists every partition, so the bound is what keeps a few
	// small CreateTopics from making each such answer hundreds of
	// megabytes.
	MaxPartitions int64
	// MaxInflightRequestBytes is server.Config's: the budget of large
	// request frames served at once (0: the server's default, 16 MiB;
	// negative: no limit).
	MaxInflightRequestBytes int64
	// MaxConnections and MaxConnectionsPerIP cap the client connections
	// open at once, in all and from one IP address (0: no cap); see
	// server.Config.
	MaxConnections, MaxConnectionsPerIP int
	// ConnectionsMaxIdle closes a client connection that sent no complete
	// request for this long (0: never); see server.Config.
	ConnectionsMaxIdle time.Duration
	// HTTPListen, if set, is the address of the HTTP listener: Prometheus
	// metrics at /metrics, /healthz, /readyz, and what HTTPHandlers adds.
	HTTPListen string
	// HTTPTLS serves the HTTP listener over TLS (HTTPS) with the
	// certificate of Security.TLS, reloaded with it; a client
	// certificate is asked for (optional) only with MetricsAuth and client
	// CAs. It lets the console take passwords off the host.
	HTTPTLS bool
	// MetricsAuth asks every /metrics scrape for HTTP basic credentials
	// of a user of the node's credential store allowed DESCRIBE on the
	// cluster, or over HTTPS a verified client certificate whose principal
	// is (requireMetricsAuth); /healthz and /readyz stay open. The HTTP
	// listener must then be HTTPS (HTTPTLS) or bound to loopback, and
	// someone must be able to pass: the node enforces ACLs (an
	// authenticating listener or Security.Authorizer), or has super users
	// (or AllowEveryoneIfNoACLFound); otherwise Start refuses.
	MetricsAuth bool
	// HTTPHosts are host names besides localhost and IP addresses under
	// which a loopback HTTP listener answers (a reverse proxy on the same
	// host that passes its own Host header); other names are answered 421,
	// against DNS rebinding (guardHTTP).
	HTTPHosts []string
	// MetricsListen is HTTPListen's deprecated name, used when HTTPListen
	// is empty.
	MetricsListen string
	// HTTPHandlers, if set, adds handlers to the HTTP listener's mux when
	// it is built (the web console); the node is started but not yet
	// serving Kafka clients.
	HTTPHandlers func(mux *http.ServeMux, n *Node)
	// DisableMetrics records no metrics at all (benchmarks measure what
	// they cost); /metrics then serves nothing.
	DisableMetrics bool
	Clock          clock.Clock
	Rand           io.Reader
	Logger         *slog.Logger
	// RetentionCheckInterval is how often expired offsets are swept.
	RetentionCheckInterval time.Duration
	// Cluster, if set, runs the node in cluster mode on etcd (see
	// cluster.go); DataDir and Store are then ignored.
	Cluster *ClusterConfig
	// Tap, if set, sees every answered request (server.Config.Tap).
	Tap func(c server.Client, req kmsg.Request, resp kmsg.Response)
}

// ErrStoreFailed is what Wait returns when the node's store has failed for
// good (the embedded store's fail-stop after a failed write or sync): the
// node cannot acknowledge anything until the process restarts and the store
// recovers what was synced, so it reports the failure instead of refusing
// every write for as long as it runs. Kafka brokers likewise shut down
// when their last log directory fails.
var ErrStoreFailed = errors.New("node: store failed")

// failingStore is a store that can fail for good (disk.Store).
type failingStore interface {
	Failed() <-chan struct{}
	Err() error
}

var _ failingStore = (*disk.Store)(nil)

// Node is a running cohort node.
type Node struct {
	cfg      Config
	log      *slog.Logger
	store    store.Store
	ownStore bool
	coord    *coordinator.Coordinator
	srv      *server.Server
	topo     *server.SingleNodeTopology
	http     *http.Server
	mux      *http.ServeMux
	// httpAddr is the bound address of http.
	httpAddr net.Addr
	cl       *clusterMode // nil unless cluster mode
	cm       *clusterMetrics
	rm       *rebalanceMetrics // nil with DisableMetrics
	// reloads is cohort_reloads_total; nil with DisableMetrics.
	reloads *prometheus.CounterVec
	auth    *authstate.State
	// oauthKeys rereads OAUTHBEARER's JWKS file; nil without OAUTHBEARER.
	oauthKeys sasl.Reloader
	done      chan error
	cancel    context.CancelFunc
}

// ConfigError is a Config that cannot work, found before the node opens
// its store or any listener: settings that do not go together, a listener
// that would authenticate no one on a reachable address. cohort serve exits
// 2 on it, as on any other mistake in its flags. What goes wrong later (a
// port in use, a file that cannot be read) is not a ConfigError.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// CheckConfig makes the checks of cfg that Start makes before it opens
// anything, without opening anything; a failure is a *ConfigError.
func CheckConfig(cfg Config) error {
	_, err := checkConfig(cfg)
	return err
}

// checkConfig is CheckConfig, returning the listeners as Start serves them
// (with their TLS configurations).
func checkConfig(cfg Config) ([]server.Listener, error) {
	fail := func(err error) ([]server.Listener, error) { return nil, &ConfigError{err} }
	ls := cfg.Listeners
	if len(ls) == 0 {
		ls = []server.Listener{{Name: server.ProtocolPlaintext, Protocol: server.ProtocolPlaintext, Addr: cfg.Listen}}
	}
	if cfg.Partitions > MaxPartitionCount {
		// cohort store copy (StorePartitions) refuses a store recording more,
		// and cohort serve --partitions accepts no more.
		return fail(fmt.Errorf("coordinator partitions %d: at most %d (Config.Partitions)", cfg.Partitions, MaxPartitionCount))
	}
	sc := cfg.Security
	if sc == nil {
		sc = &SecurityConfig{}
	}
	listeners, err := sc.checkListeners(ls)
	if err != nil {
		return fail(err)
	}
	if err := checkPorts(listeners, cmp.Or(cfg.HTTPListen, cfg.MetricsListen)); err != nil {
		return fail(err)
	}
	for _, a := range cfg.Advertised {
		if !slices.ContainsFunc(listeners, func(l server.Listener) bool { return l.Name == a.Listener }) {
			return fail(fmt.Errorf("advertised listener %s has no listener of that name", a.Listener))
		}
		given := "--advertised-listeners " + a.Listener + "://" + net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port)))
		if err := checkAdvertisedHost(given, a.Host); err != nil {
			return fail(err)
		}
		if cfg.Advertise != "" && a.Listener == listeners[0].Name {
			// advertisedBroker takes the entry and drops --advertise.
			return fail(fmt.Errorf("--advertise %s and %s both give the address of listener %s: give it once",
				cfg.Advertise, given, a.Listener))
		}
	}
	if host, _, err := net.SplitHostPort(cfg.Advertise); err == nil {
		// A malformed --advertise is advertised's error, once bound.
		if err := checkAdvertisedHost("--advertise "+cfg.Advertise, host); err != nil {
			return fail(err)
		}
	}
	if slices.ContainsFunc(listeners, server.Listener.IsSASL) {
		for _, m := range sc.Mechanisms {
			if !slices.Contains(knownMechanisms, m) {
				return fail(fmt.Errorf("unknown SASL mechanism %q (cohort has %s)", m, strings.Join(knownMechanisms, ", ")))
			}
			if m == sasl.OAuthBearer && sc.OAuth.JWKSFile == "" {
				return fail(errors.New("SASL mechanism OAUTHBEARER needs the keys tokens are verified with (--oauth-jwks-file)"))
			}
		}
	}
	if err := cfg.Cluster.check(); err != nil {
		return fail(err)
	}
	if cfg.HTTPTLS && sc.TLS == nil {
		return fail(errors.New("HTTPS on the HTTP listener (--http-tls) needs the node's TLS certificate (--tls-cert-file, --tls-key-file)"))
	}
	if cfg.HTTPTLS && cmp.Or(cfg.HTTPListen, cfg.MetricsListen) == "" {
		return fail(errors.New("--http-tls needs --http-listen"))
	}
	if cfg.MetricsAuth {
		switch addr := cmp.Or(cfg.HTTPListen, cfg.MetricsListen); {
		case addr == "":
			return fail(errors.New("--metrics-auth needs --http-listen"))
		case cfg.DisableMetrics:
			return fail(errors.New("--metrics-auth: this node records no metrics"))
		case !cfg.HTTPTLS && !isLoopback(addr):
			return fail(fmt.Errorf("--metrics-auth would take passwords over plain HTTP on %s, reachable from other hosts: "+
				"add --http-tls, or bind --http-listen to loopback", addr))
		case !sc.Authorizer && !sc.authEnabled(listeners) && len(sc.SuperUsers) == 0 && !sc.AllowEveryoneIfNoACLFound:
			// A scrape needs DESCRIBE on the cluster (or a super
			// user), and without an authorizer the node refuses to
			// store ACLs (SECURITY_DISABLED): no one could ever scrape.
			return fail(errors.New("--metrics-auth: no one could scrape /metrics, which needs a super user or an ACL " +
				"allowing DESCRIBE on the cluster, and this node manages no ACLs (no listener authenticates and --authorizer is off): " +
				"add --authorizer, an authenticating listener, or --super-users"))
		}
	}
	return listeners, nil
}

// Start opens the store, loads the catalog, starts the coordinator (its
// partitions load in the background) and begins serving.
func Start(cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "cohort"
	}
	// done: the server's end and the store's failure, whichever comes
	// first is what Wait returns; neither sender ever blocks.
	n := &Node{cfg: cfg, log: cfg.Logger, done: make(chan error, 2)}
	// Refuse bad listeners before opening (and creating) the store.
	listeners, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	n.store = cfg.Store
	// A start that fails (a listen address in use, say) leaves no new data
	// directory behind: created is the outermost directory this start
	// creates, removed on failure once the store is closed.
	var created string
	ok := false
	defer func() {
		if !ok {
			n.closeStore()
			if created != "" {
				_ = os.RemoveAll(created)
			}
		}
	}()
	if cfg.Cluster != nil {
		if err := n.openCluster(); err != nil {
			return nil, err
		}
	} else if n.store == nil {
		dir := cfg.DataDir
		if dir == "" {
			dir = "data"
		}
		created = firstMissing(dir)
		if beforeStoreOpen != nil {
			beforeStoreOpen()
		}
		st, err := disk.Open(disk.Options{Dir: dir, Logger: cfg.Logger})
		if err != nil {
			if errors.Is(err, disk.ErrLocked) {
				// Another process created the directory after it was
				// found missing here, and holds it: it is that
				// process's store, never this start's to remove.
				created = ""
			}
			return nil, err
		}
		n.store, n.ownStore = st, true
	}

	if err := n.checkPartitions(); err != nil {
		return nil, err
	}
	cat, err := n.loadCatalog()
	if err != nil {
		return nil, err
	}
	var reg *prometheus.Registry
	var sm *storeMetrics
	var registerer prometheus.Registerer // nil: the server records nothing
	if !cfg.DisableMetrics {
		reg = newRegistry()
		registerer = reg
		sm = newStoreMetrics(reg)
		if n.cl != nil {
			n.cm = newClusterMetrics(reg)
		}
	}

	sec, err := n.openSecurity(listeners)
	if err != nil {
		return nil, err
	}
	if reg != nil {
		n.reloads = newReloadCounter(reg, n.reloadable())
	}
	gcfg := cfg.Group
	if gcfg.Topics == nil {
		gcfg.Topics = cat // consumer-protocol groups are assigned catalog topics
	}
	if gcfg.GroupOverrides == nil {
		// A consumer group's own configs (IncrementalAlterConfigs),
		// kept in the catalog on every node.
		gcfg.GroupOverrides = newGroupOverrides(cat, gcfg, n.log).get
	}
	if sec.Authorizer != nil && gcfg.TopicAccess == nil {
		gcfg.TopicAccess = topicAccess{n.auth} // regexes give only describable topics
	}
	if l, ok := n.store.(store.RecordLimiter); ok && gcfg.MaxRecordBytes == 0 {
		gcfg.MaxRecordBytes = l.MaxRecordBytes()
	}
	if reg != nil {
		n.rm = newRebalanceMetrics(reg, func() int { return n.coord.Partitions() })
		n.rm.hook(&gcfg)
	}
	logStorms(&gcfg, n.log, cfg.Clock)
	n.coord, err = coordinator.New(coordinator.Config{
		Partitions:             cfg.Partitions,
		Group:                  gcfg,
		Store:                  sm.meter(n.store),
		Clock:                  cfg.Clock,
		Rand:                   cfg.Rand,
		Logger:                 cfg.Logger,
		RetentionCheckInterval: cfg.RetentionCheckInterval,
		Owned:                  n.owned(),
		LoadConcurrency:        n.loadConcurrency(),
		OnUnload:               n.partitionUnloaded,
		ErrorHint:              n.storeErrorHint(),
	})
	if err != nil {
		return nil, err
	}
	n.topo = server.SingleNode(server.Broker{NodeID: cfg.NodeID}, cfg.ClusterID)
	n.srv, err = server.New(server.Config{
		MaxRequestPartitions:    requestPartitionLimit(cat.MaxTotalPartitions()),
		Listeners:               listeners,
		Security:                sec,
		Groups:                  groups{n.coord, n.serving()},
		Topology:                n.topology(),
		Catalog:                 cat,
		Group:                   gcfg,
		MaxFrameBytes:           cfg.MaxFrameBytes,
		MaxInflightRequestBytes: cfg.MaxInflightRequestBytes,

		MaxConnections:      cfg.MaxConnections,
		MaxConnectionsPerIP: cfg.MaxConnectionsPerIP,
		ConnectionsMaxIdle:  cfg.ConnectionsMaxIdle,
		Logger:              cfg.Logger,
		Registerer:          registerer,
		Tap:                 cfg.Tap,
	})
	if err != nil {
		return nil, err
	}
	if err := n.srv.Listen(); err != nil {
		return nil, err
	}
	self, err := n.advertisedBroker(listeners)
	if err != nil {
		n.srv.Close()
		return nil, err
	}
	n.topo.SetSelf(self)
	if n.cl != nil {
		n.cl.c.SetSelf(self)
	}

	if reg != nil {
		reg.MustRegister(newNodeCollector(n))
	}
	if addr := cmp.Or(cfg.HTTPListen, cfg.MetricsListen); addr != "" {
		if err := n.startHTTP(addr, reg); err != nil {
			n.srv.Close()
			return nil, err
		}
	}

	n.coord.Start()
	n.startCluster(cat)
	n.watchSecurity()
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- n.srv.Serve(ctx) }()
	if fs, isFailing := n.store.(failingStore); isFailing {
		go n.watchStore(ctx, fs)
	}
	ok = true
	var eps []string
	for _, e := range self.Endpoints {
		eps = append(eps, e.Listener+"://"+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
	}
	n.log.Info("cohort serving", "version", buildinfo.String(), "listen", n.srv.Addr().String(), "advertised", strings.Join(eps, ","),
		"node_id", cfg.NodeID, "cluster_id", cfg.ClusterID, "partitions", n.coord.Partitions(),
		"authorizer", sec.Authorizer != nil)
	return n, nil
}

// requestPartitionLimit is the most partitions one request may name on a
// node whose catalog holds at most catalogBound (0: no bound): as many as the
// catalog may hold, at least the server's default (offsets of topics outside
// the catalog count too), and no limit when the catalog has none.
func requestPartitionLimit(catalogBound int64) int64 {
	if catalogBound == 0 {
		return -1
	}
	return max(server.DefaultMaxRequestPartitions, catalogBound)
}

// beforeStoreOpen, when set (tests only), runs between the check of which
// directories a start creates and the store's Open.
var beforeStoreOpen func()

// firstMissing returns the outermost directory of dir's path that does not
// exist yet ("" if dir exists, or if that cannot be told).
func firstMissing(dir string) string {
	missing := ""
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			return missing
		} else if !errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		missing = d
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// checkPorts refuses two of the node's listeners (its Kafka listeners and
// httpAddr, "" if none) that could not both bind: the same port on the same
// address, or on the wildcard address for either. Kafka refuses listeners
// sharing a port in its configuration check too. Host names are compared
// as written (one that resolves to another listener's address still fails
// at the bind); port 0 is a free port each.
func checkPorts(ls []server.Listener, httpAddr string) error {
	type bind struct{ what, addr string }
	var binds []bind
	for _, l := range ls {
		binds = append(binds, bind{l.Protocol + "://" + l.Addr, l.Addr})
	}
	if httpAddr != "" {
		binds = append(binds, bind{"--http-listen " + httpAddr, httpAddr})
	}
	host := func(h string) (string, bool) { // normalised; whether the wildcard
		if ip := net.ParseIP(h); ip != nil {
			return ip.String(), ip.IsUnspecified()
		}
		return strings.ToLower(h), h == ""
	}
	for i, a := range binds {
		ha, pa, err := net.SplitHostPort(a.addr)
		if err != nil {
			continue
		}
		for _, b := range binds[:i] {
			hb, pb, err := net.SplitHostPort(b.addr)
			if err != nil {
				continue
			}
			na, wa := host(ha)
			nb, wb := host(hb)
			p, err1 := strconv.Atoi(pa)
			q, err2 := strconv.Atoi(pb)
			if err1 != nil || err2 != nil || p == 0 || p != q || na != nb && !wa && !wb {
				continue
			}
			where := "on the same address"
			if wa || wb {
				where = "(one of them on every address)"
			}
			return fmt.Errorf("%s and %s both bind port %d %s: give each listener a port of its own", b.what, a.what, p, where)
		}
	}
	return nil
}

// checkAdvertisedHost refuses an advertised host that no client can connect
// to: empty or blank, or the wildcard address (0.0.0.0, ::), which a listener binds to
// serve every interface but which a client dials as its own machine. Kafka
// refuses an advertised listener on 0.0.0.0 at start too. what names the
// setting as given.
func checkAdvertisedHost(what, host string) error {
	switch ip := net.ParseIP(host); {
	case strings.TrimSpace(host) == "": // blank: as cluster mode's registry reads it
		return fmt.Errorf("%s names no host: a client told to connect there dials its own machine; "+
			"advertise the host name or IP address clients reach this node at", what)
	case ip != nil && ip.IsUnspecified():
		return fmt.Errorf("%s: %s means every interface to a listener, not an address a client can connect to "+
			"(a client dials its own machine); advertise the host name or IP address clients reach this node at", what, host)
	}
	return nil
}

// advertised resolves the address given to clients.
func advertised(adv string, bound net.Addr) (server.Broker, error) {
	tcp, _ := bound.(*net.TCPAddr)
	if adv == "" {
		host := tcp.IP.String()
		if tcp.IP.IsUnspecified() {
			h, err := os.Hostname()
			if err != nil || h == "" {
				h = "127.0.0.1"
			}
			host = h
		}
		return server.Broker{Host: host, Port: int32(tcp.Port)}, nil
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return server.Broker{}, fmt.Errorf("--advertise %q: %w", adv, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return server.Broker{}, fmt.Errorf("--advertise %q: bad port", adv)
	}
	if p == 0 {
		p = tcp.Port
	}
	return server.Broker{Host: host, Port: int32(p)}, nil
}

// listeners returns the configured listeners (Listen as one PLAINTEXT
// listener by default), checked against the security settings.
func (n *Node) listeners() ([]server.Listener, error) {
	return checkConfig(n.cfg)
}

// advertisedBroker is this node as clients see it: an endpoint per
// listener (advertised, else bound), Host/Port being the first one's.
func (n *Node) advertisedBroker(ls []server.Listener) (server.Broker, error) {
	self := server.Broker{NodeID: n.cfg.NodeID}
	for i, l := range ls {
		adv := ""
		if i == 0 {
			adv = n.cfg.Advertise
		}
		for _, a := range n.cfg.Advertised {
			if a.Listener == l.Name {
				adv = net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port)))
			}
		}
		b, err := advertised(adv, n.srv.ListenerAddr(l.Name))
		if err != nil {
			return self, err
		}
		self.Endpoints = append(self.Endpoints, server.Endpoint{Listener: l.Name, Host: b.Host, Port: b.Port})
		if i == 0 {
			self.Host, self.Port = b.Host, b.Port
		}
	}
	for _, a := range n.cfg.Advertised {
		if !slices.ContainsFunc(ls, func(l server.Listener) bool { return l.Name == a.Listener }) {
			return self, fmt.Errorf("advertised listener %s has no listener of that name", a.Listener)
		}
	}
	return self, nil
}

// ReloadTLS reads the TLS certificate, key and client CA files again
// (SIGHUP): new connections get the new certificate and are verified
// against the new CAs, open ones keep theirs.
func (n *Node) ReloadTLS() error {
	if n.cfg.Security == nil || n.cfg.Security.TLS == nil {
		return fmt.Errorf("TLS: %w", ErrNotConfigured)
	}
	return n.countReload(reloadTLS, n.cfg.Security.TLS.Reload())
}

// ReloadEtcdTLS reads the etcd client certificate and key files
// (--etcd-cert, --etcd-key) again (SIGHUP): new connections to etcd present
// the new certificate; the open one keeps the certificate it was made with,
// which etcd does not check again. On an error the certificate in use stays.
// The CAs of --etcd-ca are read at start only.
func (n *Node) ReloadEtcdTLS() error {
	if n.cl == nil || n.cl.tls == nil {
		return fmt.Errorf("etcd client certificate: %w", ErrNotConfigured)
	}
	return n.countReload(reloadEtcdTLS, n.cl.tls.reload())
}

// ErrNotConfigured is returned by ReloadTLS, ReloadEtcdTLS and
// ReloadOAuthKeys when the node has nothing of that kind to reload.
var ErrNotConfigured = errors.New("not configured")

// ReloadOAuthKeys looks at OAUTHBEARER's JWKS file at once (SIGHUP) and
// returns why it does not load; the keys in use stay until a good file
// replaces them. Without a SIGHUP the file is looked at, at most once a
// second, when a client starts an OAUTHBEARER exchange.
func (n *Node) ReloadOAuthKeys() error {
	if n.oauthKeys == nil {
		return fmt.Errorf("OAUTHBEARER: %w", ErrNotConfigured)
	}
	return n.countReload(reloadOAuthJWKS, n.oauthKeys.Reload())
}

// ErrNoBackup is returned by Backup for a node whose state is not in its
// embedded store.
var ErrNoBackup = errors.New("no embedded store to back up")

// Backup writes a consistent copy of the node's embedded store into dir
// (which must not exist) while the node keeps serving: every write the node
// acknowledged before the call is in it (and writes made meanwhile may be). The copy is a data directory:
// start cohort on it to restore. In cluster mode the state is in etcd,
// which has its own snapshots (etcdctl snapshot save); Backup refuses.
func (n *Node) Backup(ctx context.Context, dir string) error {
	st, ok := n.store.(*disk.Store)
	switch {
	case n.cfg.Cluster != nil:
		return fmt.Errorf("%w: in cluster mode the state is in etcd; back it up with etcd's own snapshots (etcdctl snapshot save)", ErrNoBackup)
	case !ok:
		return ErrNoBackup
	}
	return st.Checkpoint(ctx, dir)
}

// Security returns the node's credentials and ACLs.
func (n *Node) Security() *authstate.State { return n.auth }

// partitionsKey holds, in CatalogPartition, the number of coordinator
// partitions the store's groups are spread over. A group lives in partition
// hash(group) mod that number, so a node started with another number would
// look for every group in the wrong partition: its groups and offsets would
// seem gone, and new commits would land apart from the old ones.
var partitionsKey = []byte("partitions")

// checkPartitions refuses a store written with another partition count,
// and records the count in a store that has none (a new store, or one
// written before the count was recorded).
func (n *Node) checkPartitions() error {
	want := n.cfg.Partitions
	if want <= 0 {
		want = 50 // the coordinator's default
	}
	if n.cl != nil {
		return n.checkClusterPartitions(want)
	}
	var stored []byte
	err := n.store.Load(context.Background(), CatalogPartition, func(r store.Record) error {
		if string(r.Key) == string(partitionsKey) {
			stored = append([]byte(nil), r.Value...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the store's partition count: %w", err)
	}
	if stored != nil {
		return n.samePartitions(stored, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.store.Append(ctx, CatalogPartition, []store.Record{{Key: partitionsKey, Value: []byte(strconv.Itoa(want))}}); err != nil {
		return fmt.Errorf("recording the partition count in the store: %w", err)
	}
	return nil
}

// samePartitions compares the stored partition count with want.
func (n *Node) samePartitions(stored []byte, want int) error {
	if bytes.Equal(stored, copyIncomplete) {
		return errCopyIncomplete(n.storeName())
	}
	have, err := strconv.Atoi(string(stored))
	if err != nil || have <= 0 {
		return fmt.Errorf("the partition count stored in %s, %q, is not a positive number", n.storeName(), stored)
	}
	if have != want {
		return fmt.Errorf("%s holds groups spread over %d coordinator partitions, but this node has %d (--partitions): "+
			"it would look for every group in the wrong partition, and their offsets would seem lost; "+
			"start it with --partitions %d (a store's partition count cannot change)", n.storeName(), have, want, have)
	}
	return nil
}

// storeName says where the node's state is, for messages.
func (n *Node) storeName() string {
	switch {
	case n.cfg.Cluster != nil:
		return fmt.Sprintf("the etcd cluster state under prefix %q", n.cfg.Cluster.Prefix)
	case n.ownStore:
		dir := n.cfg.DataDir
		if dir == "" {
			dir = "data"
		}
		return fmt.Sprintf("the data directory %s", dir)
	default:
		return "the store"
	}
}

func (n *Node) loadCatalog() (*catalog.Catalog, error) {
	st := n.store
	persist := func(key string, what string, rec []byte) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return st.Append(ctx, CatalogPartition, []store.Record{{Key: []byte(key), Value: rec}})
	}
	if n.cl != nil {
		// Other nodes change the same records: write only over what this
		// node last saw (casKeys).
		n.cl.keys = newCASKeys(n.cl.cli, n.cl.st.MaxRecordBytes())
		persist = func(key, what string, rec []byte) error {
			// A node that had a lease and lost it is cut off from etcd:
			// fail at once, rather than after the write's timeout, with an
			// error clients retry elsewhere. Before its first lease (the
			// node starting) the write goes to etcd as it always did: a
			// change made right after Start must not fail.
			if n.cl.c.Sessions() > 0 && !n.cl.c.Serving() {
				return fmt.Errorf("%w: node %d has no valid etcd lease (cut off from etcd); make the change through another node", catalog.ErrUnavailable, n.cfg.NodeID)
			}
			// etcd's authentication turned on since the node started
			// without an etcd user: say so as at start.
			return withNoUserHint(n.cl.keys.write(n.cl.st.RecordKey(CatalogPartition, []byte(key)), what, rec))
		}
	}
	maxParts := n.cfg.MaxPartitions
	switch {
	case maxParts == 0:
		maxParts = DefaultMaxPartitions
	case maxParts < 0:
		maxParts = 0 // the catalog's "no bound"
	}
	cat := catalog.New(catalog.Options{
		MaxTotalPartitions: maxParts,
		PersistTopic: func(key string, rec []byte) error {
			return persist(topicRecordPrefix+key, fmt.Sprintf("the record of topic %q", key), rec)
		},
		PersistGroup: func(g string, rec []byte) error {
			return persist(groupConfigPrefix+g, fmt.Sprintf("group %q's configs", g), rec)
		},
		Shared: n.cl != nil,
		Removed: func(names []string) {
			// A deleted topic's offsets go (through this node's
			// DeleteTopics, or another node's in cluster mode). The
			// coordinator exists before any change can come: the
			// start-up restore removes nothing.
			if n.coord != nil {
				n.coord.TopicsDeleted(names)
			}
		},
	})
	var legacy []byte
	topics, groups := map[string][]byte{}, map[string][]byte{}
	err := st.Load(context.Background(), CatalogPartition, func(r store.Record) error {
		k := string(r.Key)
		if k == legacyCatalogKey {
			legacy = bytes.Clone(r.Value)
		} else if t, ok := strings.CutPrefix(k, topicRecordPrefix); ok {
			topics[t] = bytes.Clone(r.Value)
		} else if g, ok := strings.CutPrefix(k, groupConfigPrefix); ok {
			groups[g] = bytes.Clone(r.Value)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading the topic catalog: %w", err)
	}
	if legacy != nil {
		if topics, err = n.migrateCatalog(legacy, topics); err != nil {
			return nil, fmt.Errorf("moving the topic catalog to per-topic records: %w", err)
		}
	}
	if err := cat.RestoreTopics(topics); err != nil {
		return nil, fmt.Errorf("restoring the topic catalog: %w", err)
	}
	for g, data := range groups {
		if err := cat.RestoreGroupConfig(g, data); err != nil {
			return nil, fmt.Errorf("restoring the group configs: %w", err)
		}
	}
	return cat, nil
}

// migrateCatalog moves the topics of the one record older nodes kept the
// catalog in (legacy) to per-topic records and deletes it, returning every
// topic's record. A topic that already has a record of its own (stored: a
// move cut short by a crash, or a topic the newer version kept while an
// older one ran) keeps it, as new or newer than the old record's: only the
// others are written, and the log line counts both apart. On the embedded
// store the records and the deletion are one append. In cluster mode every
// write is made only while the old record is still the one read
// (migrateCASKeys), so that a node that finds another has moved it meanwhile
// (and may already have changed topics since) writes nothing more and reads
// the per-topic records instead.
func (n *Node) migrateCatalog(legacy []byte, stored map[string][]byte) (map[string][]byte, error) {
	old := catalog.New(catalog.Options{})
	if err := old.Restore(legacy); err != nil {
		return nil, err
	}
	write := old.TopicRecords()
	had := 0
	for k := range write {
		if _, ok := stored[k]; ok {
			delete(write, k)
			had++
		}
	}
	records := maps.Clone(stored)
	maps.Copy(records, write)
	logPrefix := ""
	if n.cl != nil {
		moved, current, err := n.cl.keys.migrate(n.cl.st.RecordKey(CatalogPartition, []byte(legacyCatalogKey)),
			n.cl.st.RecordKey(CatalogPartition, []byte(topicRecordPrefix)), write)
		if err != nil || !moved {
			return current, err
		}
		logPrefix = "cluster: "
	} else {
		recs := make([]store.Record, 0, len(write)+1)
		for _, k := range slices.Sorted(maps.Keys(write)) {
			recs = append(recs, store.Record{Key: []byte(topicRecordPrefix + k), Value: write[k]})
		}
		recs = append(recs, store.Record{Key: []byte(legacyCatalogKey)})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := n.store.Append(ctx, CatalogPartition, recs); err != nil {
			return nil, err
		}
	}
	n.log.Info(logPrefix+"topic catalog moved to one record per topic", "written", len(write), "already_had_record", had)
	return records, nil
}

// Addr is the address the Kafka listener is bound to.
func (n *Node) Addr() string { return n.srv.Addr().String() }

// ListenerAddr is the address the listener called name (its protocol, for
// listeners from --listeners) is bound to, or "" if there is none.
func (n *Node) ListenerAddr(name string) string {
	if a := n.srv.ListenerAddr(name); a != nil {
		return a.String()
	}
	return ""
}

// Catalog returns the node's topic catalog.
func (n *Node) Catalog() *catalog.Catalog { return n.srv.Catalog() }

// Coordinator returns the node's coordinator.
func (n *Node) Coordinator() *coordinator.Coordinator { return n.coord }

// WaitLoaded waits until every coordinator partition has loaded.
func (n *Node) WaitLoaded(ctx context.Context) error { return n.coord.WaitLoaded(ctx) }

// Wait returns when the server stops (nil after Close) or when the store
// fails for good (an error wrapping ErrStoreFailed); call Close then. cohort
// serve exits non-zero on the latter, so that a supervisor restarts it.
func (n *Node) Wait() error { return <-n.done }

// watchStore reports a failure of the store through Wait.
func (n *Node) watchStore(ctx context.Context, fs failingStore) {
	select {
	case <-fs.Failed():
		err := fmt.Errorf("%w: %v", ErrStoreFailed, fs.Err())
		n.log.Error("store failed; the node stops (a restart recovers every acknowledged write)", "err", fs.Err())
		n.done <- err
	case <-ctx.Done():
	}
}

// Close stops the node: no new connections, parked requests answered
// NOT_COORDINATOR, in-flight writes finished, the store closed.
func (n *Node) Close() error {
	// The coordinator first: its loops answer every parked request
	// NOT_COORDINATOR and finish in-flight writes; then the server writes
	// those answers out before closing the connections. In cluster mode the
	// node first hands its partitions over (see closeCluster).
	n.closeCluster()
	n.coord.Close()
	ctx, cancel := context.WithTimeout(context.Background(), connGrace)
	err := n.srv.Shutdown(ctx)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		// A client that did not take its answer in time (stopped, or
		// behind a full window) had its connection closed: its loss, as
		// at a crash, not a failure of the node's state.
		n.log.Warn("closed client connections that had not read their answers within the grace", "grace", connGrace)
		err = nil
	}
	n.cancel()
	if n.http != nil {
		n.http.Close()
	}
	if cerr := n.closeStore(); err == nil {
		err = cerr
	}
	if errors.Is(err, server.ErrServerClosed) {
		err = nil
	}
	return err
}

// connGrace is how long Close lets connections write the answers they are
// working on before it closes them.
var connGrace = 10 * time.Second

func (n *Node) closeStore() error {
	var err error
	if n.ownStore && n.store != nil {
		err = n.store.Close()
		n.store = nil
	}
	if n.cl != nil {
		n.cl.closeClient()
	}
	return err
}

// groups adapts the coordinator to the server's Groups interface, and
// checks each group of a filtered ListGroups as it lists them.
type groups struct {
	c *coordinator.Coordinator
	// serving, if set, is asked first: false (cluster mode, lease presumed
	// expired) answers NOT_COORDINATOR without touching any partition.
	serving func() bool
}

func (g groups) Handle(ctx context.Context, c server.Client, req kmsg.Request) (kmsg.Response, error) {
	if g.serving != nil && !g.serving() {
		return group.ErrorResponse(req, group.ErrNotCoordinator), nil
	}
	return g.c.Handle(ctx, group.Client{ID: c.ID, Host: c.Host, Principal: c.Principal}, req)
}

var _ server.GroupsListing = groups{}

// HandleListGroups is server.GroupsListing: the coordinator's partitions
// check each group with describes as they list them (group.Client).
func (g groups) HandleListGroups(ctx context.Context, c server.Client, req *kmsg.ListGroupsRequest, describes func(string) bool) (kmsg.Response, error) {
	if g.serving != nil && !g.serving() {
		return group.ErrorResponse(req, group.ErrNotCoordinator), nil
	}
	return g.c.Handle(ctx, group.Client{ID: c.ID, Host: c.Host, Principal: c.Principal, Describes: describes}, req)
}

// loadConcurrency is how many coordinator partitions replay at once: one per
// core for the node's own disk store (replay is CPU-bound, so the first
// partitions serve while the others load), all at once for etcd or a store
// handed in by the caller.
func (n *Node) loadConcurrency() int {
	if _, ok := n.store.(*disk.Store); ok && n.ownStore && n.cfg.Cluster == nil {
		return runtime.GOMAXPROCS(0)
	}
	return 0
}
