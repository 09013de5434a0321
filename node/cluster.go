package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/cluster"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/etcdwatch"
	"github.com/cohort-dev/cohort/internal/nodehook"
	"github.com/cohort-dev/cohort/security/authstate"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store"
	etcdstore "github.com/cohort-dev/cohort/store/etcd"
)

// ClusterConfig selects cluster mode: the node keeps its state in etcd and
// shares the coordinator partitions with the other nodes registered under
// the same prefix (package cluster).
type ClusterConfig struct {
	// Endpoints of the etcd cluster, e.g. "127.0.0.1:2379" or
	// "https://etcd1:2379".
	Endpoints []string
	// CAFile, CertFile, KeyFile configure TLS to etcd (CAFile alone:
	// server verification only; CertFile+KeyFile: client certificate).
	CAFile, CertFile, KeyFile string
	// Username and Password authenticate the node to etcd when etcd has
	// authentication enabled (etcd's users and roles); empty: none. The
	// user needs read-write permission on the key range under Prefix and
	// nothing else. The password is never logged or put in an error.
	Username, Password string
	// Prefix of every key cohort writes (default "/cohort/"); several
	// cohort clusters can share one etcd with different prefixes.
	Prefix string
	// LeaseTTL is the lease of this node's registration and partitions
	// (default 10s): how long a dead node's partitions stay unserved.
	LeaseTTL time.Duration
	// Rack is advertised to clients in Metadata.
	Rack string
	// DialTimeout bounds the first connection to etcd (default 5s).
	DialTimeout time.Duration
	// CompactionInterval is how often one node of the cluster compacts
	// etcd's history up to the revision of one interval earlier
	// (etcdstore.Compactor; default 5 minutes, negative: never, for an
	// etcd that compacts by itself).
	CompactionInterval time.Duration
	// MultiAppend makes the coordinator pack the batches of all its
	// partitions into shared etcd transactions (store/etcd.Multi). Faster
	// under load; the cost is that when one partition of a round has lost
	// its ownership, every partition in that round answers NOT_COORDINATOR
	// once (clients retry). Off by default.
	MultiAppend bool

	// dialOptions are added to the etcd client's (tests: interceptors
	// that count the node's etcd requests).
	dialOptions []grpc.DialOption
	// clock is the cluster's clock (tests: one whose time the test moves,
	// so that a node presumes its lease lost when the test says so
	// rather than after a wall-clock TTL); nil: the wall clock.
	clock clock.Clock
}

// The tests of other packages set clock through nodehook.SetClusterClock;
// it stays out of ClusterConfig's exported fields.
func init() {
	nodehook.SetClusterClock = func(cc any, clk clock.Clock) { cc.(*ClusterConfig).clock = clk }
}

// clusterMode holds a node's cluster-mode parts.
type clusterMode struct {
	cli    *clientv3.Client
	st     *etcdstore.Store
	c      *cluster.Cluster
	cancel context.CancelFunc
	done   chan struct{}
	// stopAuth stops following credential and ACL changes.
	stopAuth func()
	// tls is the TLS configuration of cli (nil without TLS).
	tls *etcdTLS
	// keys reads and writes the catalog's records (compare-and-swap).
	keys *casKeys
}

// etcdTLS is the node's TLS configuration for etcd. The client certificate
// is read again by reload (SIGHUP, ReloadEtcdTLS): the configuration hands
// the one last read to every new connection, so a rotated certificate takes
// effect without a new etcd client. The CAs that verify etcd are read at
// start only: Go checks a server's name only against the RootCAs fixed in
// the configuration, and a hand-made check of a replaceable pool would not
// know the name of the endpoint dialled when it is an IP address.
type etcdTLS struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
	cfg               *tls.Config
}

// newEtcdTLS reads the files of cc; nil without TLS to etcd.
func newEtcdTLS(cc *ClusterConfig) (*etcdTLS, error) {
	if cc.CAFile == "" && cc.CertFile == "" && cc.KeyFile == "" {
		return nil, nil
	}
	t := &etcdTLS{certFile: cc.CertFile, keyFile: cc.KeyFile, cfg: &tls.Config{MinVersion: tls.VersionTLS12}}
	if cc.CAFile != "" {
		pem, err := tlsconfig.ReadPEMFile(cc.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-ca %s: no PEM certificates", cc.CAFile)
		}
		t.cfg.RootCAs = pool
	}
	if (cc.CertFile == "") != (cc.KeyFile == "") {
		return nil, errors.New("--etcd-cert and --etcd-key go together")
	}
	if cc.CertFile != "" {
		if err := t.reload(); err != nil {
			return nil, err
		}
		t.cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return t.cert.Load(), nil
		}
	}
	return t, nil
}

// reload reads the client certificate and key again; on an error the one in
// use stays.
func (t *etcdTLS) reload() error {
	if t.certFile == "" {
		return fmt.Errorf("etcd client certificate: %w", ErrNotConfigured)
	}
	cert, err := tlsconfig.LoadKeyPair(t.certFile, t.keyFile)
	if err != nil {
		return fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
	}
	t.cert.Store(&cert)
	return nil
}

// config is the configuration for the etcd client; nil without TLS.
func (t *etcdTLS) config() *tls.Config {
	if t == nil {
		return nil
	}
	return t.cfg
}

// etcdPrefix is the prefix of the node's keys in etcd.
func etcdPrefix(cc *ClusterConfig) string {
	if cc.Prefix == "" {
		return etcdstore.DefaultPrefix
	}
	return cc.Prefix
}

// withNoUserHint adds to err what to do about it if it is etcd refusing a
// node without an etcd user (cluster.NoUserHint); other errors are
// returned as they are.
func withNoUserHint(err error) error {
	if h := cluster.NoUserHint(err); h != "" {
		return &catalog.Advised{Err: err, Advice: h}
	}
	return err
}

// etcdError says what an operator can do about an authentication or
// permission error from etcd (etcd's own message names neither the user nor
// the prefix).
func etcdError(cc *ClusterConfig, err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return fmt.Errorf("%w (the etcd user %q or its password is wrong)", err, cc.Username)
	case errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrInvalidAuthToken) && cc.Username == "", errors.Is(err, rpctypes.ErrInvalidAuthMgmt) && cc.Username == "":
		return fmt.Errorf("%w (%s)", err, cluster.NoUserAdvice)
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		who := fmt.Sprintf("the etcd user %q", cc.Username)
		if cc.Username == "" {
			who = "the etcd user of --etcd-cert (its certificate's CN)"
		}
		return fmt.Errorf("%w (%s needs read-write permission on the keys under %q)", err, who, etcdPrefix(cc))
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w (is etcd listening there? With TLS: does --etcd-ca trust etcd's certificate, and does etcd ask for a client certificate, --etcd-cert?)", err)
	}
	return err
}

// check refuses what cc cannot mean (nil: not cluster mode): no endpoint,
// or TLS files with an http:// endpoint, for which the etcd client drops
// TLS whatever its configuration holds (the first endpoint's scheme even
// decides for all of them): the node would talk to etcd in plain text,
// password included, as if the TLS flags applied.
func (cc *ClusterConfig) check() error {
	if cc == nil {
		return nil
	}
	if len(cc.Endpoints) == 0 {
		return errors.New("--etcd names no etcd endpoint: want host:port or https://host:port, comma-separated")
	}
	for i, ep := range cc.Endpoints {
		if endpointHasUserInfo(ep) {
			// Not quoted: what precedes the '@' may be a password.
			return fmt.Errorf("--etcd endpoint %d of %d holds a user name and password (user:password@host): the etcd client does not use them, "+
				"and a password there is on the command line and in every error naming the endpoints; give the user in --etcd-user "+
				"and its password in --etcd-password-file or COHORT_ETCD_PASSWORD", i+1, len(cc.Endpoints))
		}
	}
	// A prefix's bytes end up where a partition number starts in the
	// keys of a cluster whose prefix is a shorter one (P d <partition>);
	// cohort's partitions start with 0 or 0xff, which UTF-8 without NUL
	// never holds, so clusters at nested prefixes cannot share a key.
	if p := cc.Prefix; !utf8.ValidString(p) || strings.ContainsRune(p, 0) {
		return fmt.Errorf("--etcd-prefix %q: want UTF-8 text without NUL", p)
	}
	var tlsFlags []string
	for _, f := range [][2]string{{cc.CAFile, "--etcd-ca"}, {cc.CertFile, "--etcd-cert"}, {cc.KeyFile, "--etcd-key"}} {
		if f[0] != "" {
			tlsFlags = append(tlsFlags, f[1])
		}
	}
	if len(tlsFlags) == 0 {
		return nil
	}
	for _, ep := range cc.Endpoints {
		if len(ep) > 7 && strings.EqualFold(ep[:7], "http://") {
			rest := ep[7:]
			return fmt.Errorf("--etcd %s is plain text, to which %s would not apply (the etcd client drops TLS for http:// endpoints): "+
				"write it https://%s or %s", ep, strings.Join(tlsFlags, " and "), rest, rest)
		}
	}
	return nil
}

// endpointHasUserInfo reports whether an etcd endpoint (host:port or
// scheme://host:port) has a user part before its host, user@ or
// user:password@. Unix socket endpoints (unix://, unixs://) name paths and
// are left alone.
func endpointHasUserInfo(ep string) bool {
	rest := ep
	if scheme, after, ok := strings.Cut(ep, "://"); ok {
		if s := strings.ToLower(scheme); s == "unix" || s == "unixs" {
			return false
		}
		rest = after
	}
	authority, _, _ := strings.Cut(rest, "/")
	return strings.Contains(authority, "@")
}

// Warnings are the start-up warnings about cc: a password sent to etcd in
// clear text over the network.
func (cc *ClusterConfig) Warnings() []string {
	if cc == nil || cc.Password == "" || cc.CAFile != "" || cc.CertFile != "" {
		return nil
	}
	for _, ep := range cc.Endpoints {
		if strings.HasPrefix(ep, "https://") || strings.HasPrefix(ep, "unixs://") || strings.HasPrefix(ep, "unix://") {
			continue
		}
		if !isLoopback(strings.TrimPrefix(ep, "http://")) {
			return []string{fmt.Sprintf("the etcd user's password travels in clear text to %s: give etcd https:// endpoints (and --etcd-ca)", ep)}
		}
	}
	return nil
}

// DialEtcd connects to the etcd of cc as a node does (its TLS files, user
// and password) and checks, with one read under its prefix, that etcd
// answers and lets the user read there: for tools that work on a
// cluster's state without being a node (cohort store copy). It ends early
// when ctx does (a tool's Ctrl-C: the error is then ctx's, not a deadline
// of the dial), and ctx is the client's own context from then on.
func DialEtcd(ctx context.Context, cc *ClusterConfig) (*clientv3.Client, error) {
	if err := cc.check(); err != nil {
		return nil, err
	}
	cli, _, err := dialEtcd(ctx, cc)
	return cli, err
}

// dialEtcd connects to etcd and checks that it answers under the prefix.
func dialEtcd(ctx context.Context, cc *ClusterConfig) (*clientv3.Client, *etcdTLS, error) {
	if len(cc.Endpoints) == 0 {
		return nil, nil, errors.New("cluster mode: no etcd endpoints")
	}
	etls, err := newEtcdTLS(cc)
	if err != nil {
		return nil, nil, err
	}
	dial := cc.DialTimeout
	if dial <= 0 {
		dial = 5 * time.Second
	}
	if (cc.Username == "") != (cc.Password == "") {
		return nil, nil, errors.New("cluster mode: an etcd user needs its password, and a password its user")
	}
	// gRPC's default reconnect backoff grows to 120 s: after a long
	// outage the node would stay out for up to that long once etcd is
	// back. At most 2 s between attempts instead (each costs one dial).
	reconnect := grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 5 * time.Second,
		Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second}})
	cli, err := clientv3.New(clientv3.Config{Context: ctx, Endpoints: cc.Endpoints, DialTimeout: dial, TLS: etls.config(), Logger: zap.NewNop(),
		DialKeepAliveTime: 5 * time.Second, DialKeepAliveTimeout: 5 * time.Second,
		DialOptions: append([]grpc.DialOption{reconnect}, cc.dialOptions...),
		Username:    cc.Username, Password: cc.Password})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("connecting to etcd %v: %w", cc.Endpoints, context.Cause(ctx))
		}
		// With a user the client authenticates while it connects: a
		// failed handshake ends here, not at the read below.
		return nil, nil, fmt.Errorf("connecting to etcd %v: %w", cc.Endpoints, withTLSCauses(cc, etls, dial, etcdError(cc, err)))
	}
	// Fail early (and clearly) when etcd is not reachable or refuses the
	// node: one read under the prefix, the only keys a node with a
	// restricted etcd user may read.
	gctx, cancel := context.WithTimeout(ctx, dial)
	_, err = cli.Get(gctx, etcdPrefix(cc), clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		cli.Close()
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("etcd %v: %w", cc.Endpoints, context.Cause(ctx))
		}
		return nil, nil, fmt.Errorf("etcd %v not usable: %w", cc.Endpoints, withTLSCauses(cc, etls, dial, etcdError(cc, err)))
	}
	return cli, etls, nil
}

// withTLSCauses adds to err, if it is etcd not answering in time, the
// causes of the TLS handshakes with cc's endpoints that fail (tlsCauses):
// the etcd client retries a failed handshake until the deadline and says
// no more. Other errors are returned as they are.
func withTLSCauses(cc *ClusterConfig, etls *etcdTLS, timeout time.Duration, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if causes := tlsCauses(cc.Endpoints, etls.config(), timeout); causes != "" {
		return fmt.Errorf("%w: %s", err, causes)
	}
	return err
}

// tlsCauses probes every endpoint of eps with a TLS handshake (tlsCause),
// all at once and within timeout in all, and says, in the order of eps,
// "TLS with <endpoint>: <cause>" for each whose handshake failed, joined
// by "; " ("" when none failed). cfg nil is a node without TLS flags: the
// etcd client still talks TLS to an https:// endpoint, verified against
// the system's CAs, and those are probed so; a host:port endpoint is plain
// text then, and one that answers TLS is said to (plainAnswersTLS).
func tlsCauses(eps []string, cfg *tls.Config, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	causes := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		switch {
		case cfg != nil:
			wg.Go(func() { causes[i] = tlsCause(ctx, ep, cfg) })
		case strings.HasPrefix(ep, "https://"):
			wg.Go(func() { causes[i] = tlsCause(ctx, ep, &tls.Config{}) })
		case !strings.Contains(ep, "://"):
			wg.Go(func() { causes[i] = plainAnswersTLS(ctx, ep) })
		}
	}
	wg.Wait()
	var out []string
	for i, err := range causes {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no TLS handshake within %s", timeout)
		}
		if err != nil {
			out = append(out, fmt.Sprintf("TLS with %s: %v", eps[i], err))
		}
	}
	return strings.Join(out, "; ")
}

// tlsCause is the error a TLS handshake with etcd endpoint ep meets with
// cfg (nil: an endpoint other than host:port or https://, or the
// handshake succeeds), before ctx ends: etcd's certificate not trusted,
// or etcd's refusal of the client's certificate (or of none), which TLS
// 1.3 tells only after the handshake, in place of the first data (waited
// for at most 2 s).
func tlsCause(ctx context.Context, ep string, cfg *tls.Config) error {
	addr, ok := strings.CutPrefix(ep, "https://")
	if !ok && strings.Contains(ep, "://") {
		return nil
	}
	addr, _, _ = strings.Cut(addr, "/")
	c := cfg.Clone()
	c.NextProtos = []string{"h2"} // as gRPC asks
	conn, err := (&tls.Dialer{Config: c}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(2 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetReadDeadline(deadline)
	var ne net.Error
	if _, err := conn.Read(make([]byte, 1)); err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		return err
	}
	return nil
}

// plainAnswersTLS is the error of a host:port endpoint, which a node
// without TLS flags talks to in plain text, that completes a TLS handshake
// (its certificate unchecked: only whether it speaks TLS is asked): etcd
// there wants TLS, and the etcd client waits out its deadline without
// saying so. nil when the handshake fails (a plain etcd, nothing there).
func plainAnswersTLS(ctx context.Context, ep string) error {
	addr, _, _ := strings.Cut(ep, "/")
	// A TLS server answers a ClientHello at once: a silent endpoint
	// (down, or plain and waiting for more) adds no more than this.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	conn.Close()
	return fmt.Errorf("it answers TLS, but without --etcd-ca, --etcd-cert or --etcd-key a host:port endpoint is plain text: "+
		"write it https://%s, with --etcd-ca if a private CA signed etcd's certificate (and --etcd-cert, --etcd-key if etcd asks "+
		"for a client certificate)", addr)
}

// openCluster connects to etcd and makes the fenced store the node's store.
func (n *Node) openCluster() error {
	cc := n.cfg.Cluster
	cli, etls, err := dialEtcd(context.Background(), cc)
	if err != nil {
		return err
	}
	m := &clusterMode{cli: cli, tls: etls}
	var c *cluster.Cluster
	m.st, err = etcdstore.New(etcdstore.Options{Client: cli, Prefix: cc.Prefix, Fenced: true, Logger: n.log,
		Valid: func() bool { return c != nil && c.Serving() }})
	if err != nil {
		cli.Close()
		return err
	}
	parts := n.cfg.Partitions
	if parts <= 0 {
		parts = 50
	}
	c, err = cluster.New(cluster.Config{Client: cli, Store: m.st, ClusterID: n.cfg.ClusterID, NodeID: n.cfg.NodeID,
		Partitions: parts, LeaseTTL: cc.LeaseTTL, Logger: n.log, Clock: cc.clock})
	if err != nil {
		cli.Close()
		return err
	}
	if cc.Rack != "" {
		r := cc.Rack
		c.SetSelf(server.Broker{Rack: &r})
	}
	m.c = c
	n.cl = m
	n.store, n.ownStore = m.st, true
	if cc.MultiAppend {
		n.store = etcdstore.Multi{Store: m.st}
	}
	return nil
}

// storeErrorHint is the coordinator's Config.ErrorHint: in cluster mode,
// what to do when etcd refuses the node for want of an etcd user (its
// authentication turned on while the node runs without one).
func (n *Node) storeErrorHint() func(error) string {
	if n.cl == nil {
		return nil
	}
	return cluster.NoUserHint
}

// owned is the coordinator's initial ownership: nothing in cluster mode (the
// cluster acquires partitions), everything otherwise.
func (n *Node) owned() func(int32) bool {
	if n.cl == nil {
		return nil
	}
	return func(int32) bool { return false }
}

func (n *Node) serving() func() bool {
	if n.cl == nil {
		return nil
	}
	return n.cl.c.Serving
}

func (n *Node) topology() server.Topology {
	if n.cl == nil {
		return n.topo
	}
	return n.cl.c
}

// startCluster joins the cluster and follows catalog changes made through
// other nodes.
func (n *Node) startCluster(cat *catalog.Catalog) {
	if n.cl == nil {
		return
	}
	if r := n.cfg.Cluster.Rack; r != "" {
		self := n.topo.Self()
		self.Rack = &r
		n.cl.c.SetSelf(self)
	}
	if n.cm != nil {
		n.cl.c.Start(observedPartitions{n.coord, n.cm})
	} else {
		n.cl.c.Start(n.coord)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cl.cancel, n.cl.done = cancel, make(chan struct{})
	var wg sync.WaitGroup
	follow := func(key string, isPrefix bool, what string, apply func(key string) error, all func(keys []string) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.follow(ctx, key, isPrefix, what, apply, all)
		}()
	}
	// Each key is read again under the catalog's lock (catalog.Sync): the
	// value read is never older than a change this node already made.
	topicsPrefix := n.cl.st.RecordKey(CatalogPartition, []byte(topicRecordPrefix))
	syncTopic := func(key string) error {
		t := strings.TrimPrefix(key, topicsPrefix)
		return n.cl.keys.sync(ctx, key, func(read func() ([]byte, error)) error { return cat.SyncTopic(t, read) })
	}
	follow(topicsPrefix, true, "topic catalog", syncTopic, func([]string) error {
		return n.cl.keys.syncPrefix(ctx, topicsPrefix, cat.SyncTopics) // one read of every topic
	})
	groupsPrefix := n.cl.st.RecordKey(CatalogPartition, []byte(groupConfigPrefix))
	syncGroup := func(key string) error {
		g := strings.TrimPrefix(key, groupsPrefix)
		return n.cl.keys.sync(ctx, key, func(read func() ([]byte, error)) error { return cat.SyncGroupConfig(g, read) })
	}
	follow(groupsPrefix, true, "group configs", syncGroup, func(keys []string) error {
		for _, g := range cat.ConfiguredGroups() { // removed while not watched
			keys = append(keys, groupsPrefix+g)
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			if err := syncGroup(k); err != nil {
				return err
			}
		}
		return nil
	})
	if every := n.cfg.Cluster.CompactionInterval; every >= 0 {
		if every == 0 {
			every = 5 * time.Minute
		}
		c := etcdstore.NewCompactor(n.cl.cli, n.cfg.Cluster.Prefix, every, n.cfg.Clock)
		var observe func(string)
		if n.cm != nil {
			observe = func(result string) { n.cm.compactions.WithLabelValues(result).Inc() }
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Run(ctx, n.log, observe)
		}()
	}
	go func() {
		wg.Wait()
		close(n.cl.done)
	}()
}

// follow keeps, until ctx ends, this node's copy of what etcd holds at key
// (or, isPrefix, under it) in step. Once a watch is set up it brings every
// key up to date (all, given the keys etcd has: a change made between this
// node's load, or a broken watch, and the watch is not missed), then, for
// each watched change of a key, has apply read that key again. Reading
// rather than taking the event's value, under the catalog's lock, means a
// late event of an older write can never roll the copy back past a newer
// one. A failed read sets the watch up again and reads everything again.
func (n *Node) follow(ctx context.Context, key string, isPrefix bool, what string, apply func(key string) error, all func(keys []string) error) {
	scope := []clientv3.OpOption{}
	if isPrefix {
		scope = append(scope, clientv3.WithPrefix())
	}
	for ctx.Err() == nil {
		wctx, wcancel := context.WithCancel(etcdwatch.Context(ctx))
		wc := n.cl.cli.Watch(wctx, key, append(scope, clientv3.WithCreatedNotify())...)
		if wr, ok := <-wc; ok && wr.Created {
			rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
			r, err := n.cl.cli.Get(rctx, key, append(scope, clientv3.WithKeysOnly())...)
			rcancel()
			if err == nil {
				keys := make([]string, 0, len(r.Kvs))
				for _, kv := range r.Kvs {
					keys = append(keys, string(kv.Key))
				}
				err = all(keys)
			}
			if err != nil {
				n.log.Warn("cluster: reading the "+what+" from etcd failed; retrying", "err", err)
				wcancel()
				sleepCtx(ctx, time.Second)
				continue
			}
		watch:
			for wr := range wc {
				for _, ev := range wr.Events {
					if err := apply(string(ev.Kv.Key)); err != nil {
						n.log.Warn("cluster: "+what+" update from etcd not applied; reading it all again", "key", string(ev.Kv.Key), "err", err)
						break watch
					}
				}
			}
		}
		wcancel()
		sleepCtx(ctx, time.Second) // a broken watch: set it up again, and read everything again
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// watchSecurity follows, in cluster mode, the credential and ACL changes
// made through other nodes.
func (n *Node) watchSecurity() {
	if n.cl == nil || n.auth == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.cl.stopAuth = func() { cancel(); <-done }
	go func() {
		defer close(done)
		var observe func(error)
		if n.cm != nil {
			observe = n.cm.securitySync
		}
		authstate.Watch(ctx, n.cl.cli, n.cl.st.RecordKey(authstate.Partition, nil), n.auth, n.log, observe)
	}()
}

// Cluster returns the node's cluster membership (nil unless cluster mode).
func (n *Node) Cluster() *cluster.Cluster {
	if n.cl == nil {
		return nil
	}
	return n.cl.c
}

// closeCluster hands the node's partitions over: each stops being served at
// once (parked requests answered NOT_COORDINATOR) and the lease is revoked
// so other nodes take over without waiting for it to expire.
func (n *Node) closeCluster() {
	if n.cl == nil {
		return
	}
	n.cl.c.Close()
	if n.cl.stopAuth != nil {
		n.cl.stopAuth()
	}
	if n.cl.cancel != nil {
		n.cl.cancel()
		<-n.cl.done
	}
}

func (m *clusterMode) closeClient() {
	if m.cli != nil {
		m.cli.Close()
		m.cli = nil
	}
}

// Store returns the node's store (cluster mode: the fenced etcd store).
func (n *Node) Store() store.Store { return n.store }

// checkClusterPartitions is checkPartitions in cluster mode: the count is
// created in one etcd transaction if no node has recorded it yet, so that
// two nodes starting at once with different counts cannot both record
// theirs; otherwise it is compared.
func (n *Node) checkClusterPartitions(want int) error {
	key := n.cl.st.RecordKey(CatalogPartition, partitionsKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := n.cl.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.Itoa(want))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("recording the partition count in etcd: %w", etcdError(n.cfg.Cluster, err))
	}
	if r.Succeeded {
		return nil
	}
	kvs := r.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return errors.New("the partition count in etcd vanished while it was read; start again")
	}
	return n.samePartitions(kvs[0].Value, want)
}
