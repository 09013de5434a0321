// Package etcdtest starts etcd servers in-process (go.etcd.io/etcd/server/v3/embed)
// on 127.0.0.1 for tests: one member, or a cluster of several whose members
// can be stopped and restarted to take away and give back quorum.
package etcdtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/cohort-dev/cohort/internal/testport"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// Cluster is a set of in-process etcd members.
type Cluster struct {
	t       testing.TB
	dir     string
	names   []string
	peer    []string
	client  []string
	initial string

	mu      sync.Mutex
	members []*embed.Etcd // nil when stopped
	tls     *TLS          // nil: plain client URLs

	configure func(*embed.Config) // nil: etcd's defaults, save the bcrypt cost (see start)
}

// TLS serves a cluster's client URLs over TLS (peer URLs stay plain).
type TLS struct {
	// CertFile and KeyFile are the members' certificate for clients.
	CertFile, KeyFile string
	// ClientCAFile, when set, makes the members require a client
	// certificate that it verifies.
	ClientCAFile string
	// Client is the configuration Client connects with.
	Client *tls.Config
}

// freePort is an address below the ephemeral port range: a stopped member
// restarts on the same peer and client URLs, and a port from the kernel's
// ephemeral range may meanwhile be taken as the local port of some outgoing
// connection (internal/testport).
func freePort(t testing.TB) string { return testport.Reserve(t) }

// Start starts an n-member cluster and waits until it serves. It is stopped
// when the test ends.
//
// Under -short it skips the test (testwait.WallClock): a test on embedded
// etcd runs on the wall clock (leases, elections) and is left out of the
// inner loop.
func Start(t testing.TB, n int) *Cluster { return start(t, n, nil, nil) }

// StartTLS is Start with the client URLs served over TLS as tc says.
func StartTLS(t testing.TB, n int, tc TLS) *Cluster { return start(t, n, &tc, nil) }

// StartWith is Start with each member's configuration changed by configure
// before it starts (and restarts): etcd's limits, such as
// QuotaBackendBytes, MaxRequestBytes or MaxTxnOps.
func StartWith(t testing.TB, n int, configure func(*embed.Config)) *Cluster {
	return start(t, n, nil, configure)
}

func start(t testing.TB, n int, tc *TLS, configure func(*embed.Config)) *Cluster {
	t.Helper()
	testwait.WallClock(t, "embedded etcd")
	c := &Cluster{t: t, dir: t.TempDir(), members: make([]*embed.Etcd, n), tls: tc, configure: configure}
	scheme := "http://"
	if tc != nil {
		scheme = "https://"
	}
	var init []string
	for i := 0; i < n; i++ {
		c.names = append(c.names, fmt.Sprintf("m%d", i))
		c.peer = append(c.peer, "http://"+freePort(t))
		c.client = append(c.client, scheme+freePort(t))
		init = append(init, c.names[i]+"="+c.peer[i])
	}
	c.initial = strings.Join(init, ",")
	t.Cleanup(c.Close)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); errs[i] = c.start(i, "new") }(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// SetTLS changes the TLS of the members started from now on (Restart) of a
// cluster started with StartTLS.
func (c *Cluster) SetTLS(tc TLS) {
	c.mu.Lock()
	c.tls = &tc
	c.mu.Unlock()
}

func (c *Cluster) start(i int, state string) error {
	cfg := embed.NewConfig()
	cfg.Name = c.names[i]
	cfg.Dir = filepath.Join(c.dir, c.names[i])
	pu, _ := url.Parse(c.peer[i])
	cu, _ := url.Parse(c.client[i])
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.InitialCluster = c.initial
	cfg.ClusterState = state
	cfg.InitialClusterToken = "cohort-test"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// bcrypt's lowest cost (etcd's default is 10): the member runs in the
	// test process, so every login (Authenticate) hashes the password under
	// the race detector, 64 times the work at cost 10. On 2 loaded cores a
	// login at cost 10 took 5.6 s on average, past the 5 s DialTimeout of
	// the tests' etcd clients, which then failed with "context deadline
	// exceeded". What the tests check of logins is whether and how often
	// they happen, not what they cost.
	cfg.BcryptCost = 4
	c.mu.Lock()
	if tc := c.tls; tc != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: tc.CertFile, KeyFile: tc.KeyFile,
			TrustedCAFile: tc.ClientCAFile, ClientCertAuth: tc.ClientCAFile != ""}
	}
	c.mu.Unlock()
	if c.configure != nil {
		c.configure(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcdtest: starting %s: %w", cfg.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdtest: %s: %w", cfg.Name, err)
	case <-time.After(60 * time.Second):
		e.Close()
		return fmt.Errorf("etcdtest: %s not ready after 60s", cfg.Name)
	}
	c.mu.Lock()
	c.members[i] = e
	c.mu.Unlock()
	return nil
}

// Endpoints returns the client URLs of all members.
func (c *Cluster) Endpoints() []string { return append([]string(nil), c.client...) }

// Client returns a client of all members, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	var tlsCfg *tls.Config
	c.mu.Lock()
	if c.tls != nil {
		tlsCfg = c.tls.Client
	}
	c.mu.Unlock()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, TLS: tlsCfg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Stop stops member i (its data stays for Restart).
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	e := c.members[i]
	c.members[i] = nil
	c.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped member i again from its data. With fewer than a
// quorum of members running it does not become ready on its own, so
// restarting members to regain quorum must happen concurrently: use
// RestartAll.
func (c *Cluster) Restart(i int) error { return c.start(i, "existing") }

// RestartAll restarts the given stopped members concurrently.
func (c *Cluster) RestartAll(idx ...int) error {
	errs := make(chan error, len(idx))
	for _, i := range idx {
		go func(i int) { errs <- c.start(i, "existing") }(i)
	}
	var first error
	for range idx {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close stops every member.
func (c *Cluster) Close() {
	for i := range c.members {
		c.Stop(i)
	}
}

// EnableAuth turns on etcd's authentication: a root user (password
// rootPassword) and, for each entry of users (name to password), a user
// whose role may read and write the keys under prefix. A user named in
// noAccess gets no role at all. After it, clients need credentials.
func (c *Cluster) EnableAuth(t testing.TB, rootPassword, prefix string, users map[string]string, noAccess ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := c.Client(t)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("etcdtest: enabling authentication: %v", err)
		}
	}
	must(cli.UserAdd(ctx, "root", rootPassword))
	must(cli.UserGrantRole(ctx, "root", "root"))
	must(cli.RoleAdd(ctx, "prefix-rw"))
	must(cli.RoleGrantPermission(ctx, "prefix-rw", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite)))
	for name, pass := range users {
		must(cli.UserAdd(ctx, name, pass))
		must(cli.UserGrantRole(ctx, name, "prefix-rw"))
	}
	for _, name := range noAccess {
		must(cli.UserAdd(ctx, name, name+"-password"))
	}
	must(cli.AuthEnable(ctx))
}
