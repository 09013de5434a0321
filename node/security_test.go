package node

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/internal/testready"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
	"github.com/cohort-dev/cohort/store/memstore"
)

const adminPassword = "admin-secret-1"

// secureConfig is a node with one SASL_PLAINTEXT listener on loopback,
// SCRAM and PLAIN, and a bootstrap super user "admin".
func secureConfig(t testing.TB, st store.Store) Config {
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	return Config{
		Listeners: []server.Listener{{Protocol: server.ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}},
		Store:     st,
		Group:     cfg,
		Rand:      seeded{rand.NewChaCha8([32]byte{5})},
		Logger:    slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
		ClusterID: "test",
		Security: &SecurityConfig{
			Mechanisms:        []string{sasl.ScramSHA256, sasl.ScramSHA512, sasl.Plain},
			BootstrapUser:     "admin",
			BootstrapPassword: adminPassword,
			SuperUsers:        []string{"User:admin"},
			FailedAuthDelay:   time.Millisecond,
		},
	}
}

func scramClient(t testing.TB, addr, user, pass string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	mech := scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	return client(t, addr, append([]kgo.Opt{kgo.SASL(mech), kgo.RequestRetries(0)}, opts...)...)
}

func TestSecureByDefault(t *testing.T) {
	for _, tc := range []struct {
		name      string
		listener  server.Listener
		allow     bool
		wantError bool
	}{
		{"PLAINTEXT on every interface", server.Listener{Protocol: server.ProtocolPlaintext, Addr: "0.0.0.0:0"}, false, true},
		{"PLAINTEXT on every interface, allowed", server.Listener{Protocol: server.ProtocolPlaintext, Addr: "0.0.0.0:0"}, true, false},
		{"PLAINTEXT on an empty host", server.Listener{Protocol: server.ProtocolPlaintext, Addr: ":0"}, false, true},
		{"PLAINTEXT on loopback", server.Listener{Protocol: server.ProtocolPlaintext, Addr: "127.0.0.1:0"}, false, false},
		{"SASL_PLAINTEXT on every interface", server.Listener{Protocol: server.ProtocolSASLPlaintext, Addr: "0.0.0.0:0"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := secureConfig(t, memstore.New())
			cfg.Listeners = []server.Listener{tc.listener}
			cfg.Security.AllowUnauthenticated = tc.allow
			n, err := Start(cfg)
			if err == nil {
				n.Close()
			}
			if (err != nil) != tc.wantError {
				t.Fatalf("Start: %v, want error %v", err, tc.wantError)
			}
			if err != nil && (!strings.Contains(err.Error(), "--allow-unauthenticated") || strings.Contains(err.Error(), "\n")) {
				t.Fatalf("error %q: want one line naming --allow-unauthenticated", err)
			}
		})
	}
}

// TestRefusedListenerCreatesNoDataDir: the listener check runs before the
// embedded store is opened.
func TestRefusedListenerCreatesNoDataDir(t *testing.T) {
	dir := t.TempDir() + "/data"
	cfg := secureConfig(t, nil)
	cfg.DataDir = dir
	cfg.Listeners = []server.Listener{{Protocol: server.ProtocolPlaintext, Addr: "0.0.0.0:0"}}
	if n, err := Start(cfg); err == nil {
		n.Close()
		t.Fatal("Start succeeded")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data directory exists after a refused start: %v", err)
	}
}

func TestParseListeners(t *testing.T) {
	ls, err := ParseListeners("PLAINTEXT://127.0.0.1:9092, sasl_ssl://0.0.0.0:9094")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[1].Protocol != server.ProtocolSASLSSL || ls[1].Name != "SASL_SSL" || ls[1].Addr != "0.0.0.0:9094" {
		t.Fatalf("parsed %+v", ls)
	}
	for _, bad := range []string{"", "127.0.0.1:9092", "HTTP://127.0.0.1:80", "PLAINTEXT://nohost", "SSL://a:1,SSL://b:2", "SSL://a:99999"} {
		if _, err := ParseListeners(bad); err == nil {
			t.Errorf("ParseListeners(%q) succeeded", bad)
		}
	}
}

// TestSCRAMAndACLsEndToEnd: the bootstrap admin creates a user and an ACL
// over the wire; the user authenticates with SCRAM and PLAIN, is allowed
// exactly what the ACL grants, and a wrong password fails cleanly.
func TestSCRAMAndACLsEndToEnd(t *testing.T) {
	n := startLoaded(t, secureConfig(t, memstore.New()))
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := kadm.NewClient(scramClient(t, n.Addr(), "admin", adminPassword))
	createUser(ctx, t, admin, "app", "app-password")
	acls := kadm.NewACLs().Allow("User:app").Groups("orders").Operations(kadm.OpRead)
	if res, err := admin.CreateACLs(ctx, acls); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}

	app := kadm.NewClient(scramClient(t, n.Addr(), "app", "app-password"))
	described, err := app.DescribeGroups(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := described["orders"].Err; err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("orders (READ implies DESCRIBE): %v", err)
	}
	// kadm reports a group-level authorization failure as the call's error.
	described, err = app.DescribeGroups(ctx, "payments")
	if err == nil {
		err = described["payments"].Err
	}
	if !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("payments: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	// PLAIN checks the same stored credential.
	plain := kadm.NewClient(client(t, n.Addr(), kgo.SASL(plainMech("app", "app-password")), kgo.RequestRetries(0)))
	if _, err := plain.ListGroups(ctx); err != nil {
		t.Fatalf("PLAIN with the SCRAM password: %v", err)
	}
	// A wrong password: an authentication error, not a hang.
	bad := kadm.NewClient(scramClient(t, n.Addr(), "app", "wrong"))
	if _, err := bad.ListGroups(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// createUser sets both SCRAM credentials of user, in two requests: Kafka
// allows one change per user in one AlterUserScramCredentials.
func createUser(ctx context.Context, t testing.TB, adm *kadm.Client, user, pass string) {
	t.Helper()
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha512, kadm.ScramSha256} {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m, Iterations: 4096, Password: pass}})
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Error(); err != nil {
			t.Fatalf("AlterUserSCRAMs: %v", err)
		}
	}
}

// TestDeletedUserCannotReauthenticate: a connection authenticated before
// its user was deleted cannot authenticate again (KIP-368).
func TestDeletedUserCannotReauthenticate(t *testing.T) {
	var now atomicTime
	now.set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := secureConfig(t, memstore.New())
	cfg.Security.SessionLifetime = time.Minute
	cfg.Security.Now = now.get
	n := startLoaded(t, cfg)
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := kadm.NewClient(scramClient(t, n.Addr(), "admin", adminPassword))
	createUser(ctx, t, admin, "temp", "temp-password")

	c := dialRaw(t, n.Addr())
	if life := c.scramLogin(t, "temp", "temp-password"); life != 60000 {
		t.Fatalf("session lifetime %d ms, want 60000", life)
	}
	if code := c.heartbeat(t); code == 0 {
		t.Fatalf("heartbeat of an unknown member: want an error code, got 0")
	}
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha512, kadm.ScramSha256} {
		res, err := admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "temp", Mechanism: m}}, nil)
		if err != nil || res.Error() != nil {
			t.Fatalf("deleting temp: %v %v", err, res.Error())
		}
	}
	// Re-authentication (before the session ends) fails and closes.
	if err := c.scramLoginErr("temp", "temp-password"); err == nil {
		t.Fatal("a deleted user re-authenticated")
	}
	c.expectClosed(t)
	// A second connection whose session simply runs out is closed at its
	// next request.
	createUser(ctx, t, admin, "temp2", "pw2")
	c2 := dialRaw(t, n.Addr())
	c2.scramLogin(t, "temp2", "pw2")
	now.add(61 * time.Second)
	c2.send(t, kmsg.NewPtrListGroupsRequest())
	c2.expectClosed(t)
}

// TestSecurityStateSurvivesSIGKILL: users and ACLs created over the wire
// are back after the process is killed and restarted without the
// bootstrap user.
func TestSecurityStateSurvivesSIGKILL(t *testing.T) {
	bin := cohortBinary(t)
	dir := t.TempDir()
	addr := freePort(t)
	start := func(extra ...string) *testready.Child {
		args := append([]string{"serve", "--listeners", "SASL_PLAINTEXT://" + addr, "--data-dir", dir, "--log-level", "warn",
			"--super-users", "User:admin", "--sasl-mechanisms", "SCRAM-SHA-512"}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Env = os.Environ()
		if slices.Contains(extra, "--bootstrap-user") {
			// Without it the variable is refused.
			cmd.Env = append(cmd.Env, "COHORT_BOOTSTRAP_PASSWORD="+adminPassword)
		}
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return testready.Start(t, cmd, childReadyWithin)
	}
	cmd := start("--bootstrap-user", "admin")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kadm.NewClient(scramClient(t, addr, "admin", adminPassword, kgo.RequestRetries(5)))
	createUser(ctx, t, admin, "app", "app-password")
	if res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:app").Groups("g1").Operations(kadm.OpRead)); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	admin.Close()

	cmd = start() // no bootstrap user this time: admin must still exist
	defer func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() }()
	admin2 := kadm.NewClient(scramClient(t, addr, "admin", adminPassword, kgo.RequestRetries(5)))
	users, err := admin2.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(users["app"].CredInfos) != 2 || len(users["admin"].CredInfos) != 2 {
		t.Fatalf("users after restart: %+v", users)
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	described, err := req.RequestWith(ctx, scramClient(t, addr, "admin", adminPassword, kgo.RequestRetries(5)))
	if err != nil || described.ErrorCode != 0 {
		t.Fatalf("DescribeACLs: %v %+v", err, described)
	}
	found := false
	for _, r := range described.Resources {
		for _, a := range r.ACLs {
			found = found || (a.Principal == "User:app" && r.ResourceName == "g1")
		}
	}
	if !found {
		t.Fatalf("ACL of User:app on g1 lost: %+v", described.Resources)
	}
	app := kadm.NewClient(scramClient(t, addr, "app", "app-password", kgo.RequestRetries(5)))
	if d, err := app.DescribeGroups(ctx, "g1"); err != nil || d["g1"].Err != nil && !errors.Is(d["g1"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("app after restart: %v %v", err, d["g1"].Err)
	}
}

// startSecureCluster starts two secure nodes (secureConfig) sharing an
// embedded etcd under prefix, closed when the test ends.
func startSecureCluster(t *testing.T, prefix string) []*Node {
	t.Helper()
	ec := etcdtest.Start(t, 1)
	nodes := make([]*Node, 2)
	for i := range nodes {
		cfg := secureConfig(t, nil)
		cfg.NodeID = int32(i + 1)
		cfg.Partitions = 4
		cfg.Cluster = &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: testLeaseTTL}
		n, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes[i] = n
	}
	return nodes
}

// TestClusterACLSeenByOtherNode: an ACL and a user created through one
// node are enforced by another within 2 s.
func TestClusterACLSeenByOtherNode(t *testing.T) {
	nodes := startSecureCluster(t, "/sec-test/")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kadm.NewClient(scramClient(t, nodes[0].Addr(), "admin", adminPassword, kgo.RequestRetries(10)))
	createUser(ctx, t, admin, "app", "app-password")
	// The user reaches node 2 (a SCRAM login works there) and, without an
	// ACL, may not see the topic.
	var err error
	if !testwait.Until(2*time.Second, func() bool {
		err = describeTopicAs(ctx, nodes[1].Addr(), "app", "app-password", "t")
		if err == nil {
			t.Fatal("app sees topic t without an ACL")
		}
		return errors.Is(err, kerr.TopicAuthorizationFailed)
	}) {
		t.Fatalf("the user created through node 1 is not usable on node 2 after 2s: %v", err)
	}
	start := time.Now()
	if res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:app").Topics("t").Operations(kadm.OpDescribe)); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}
	// Node 2 must authenticate app and let it describe topic t within 2s.
	if !testwait.Until(2*time.Second-time.Since(start), func() bool {
		err = describeTopicAs(ctx, nodes[1].Addr(), "app", "app-password", "t")
		return err == nil
	}) {
		t.Fatalf("after %v node 2 still answers %v", time.Since(start), err)
	}
	t.Logf("ACL enforced by the other node after %v", time.Since(start))
}

// describeTopicAs asks addr's Metadata for topic as user: nil when the
// topic is visible (UNKNOWN_TOPIC_OR_PARTITION: visible but absent, as no
// topic was created), the error otherwise.
func describeTopicAs(ctx context.Context, addr, user, pass, topic string) error {
	mech := scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(mech), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return errors.New("no topic in the answer")
	}
	if code := resp.Topics[0].ErrorCode; code != 0 && code != kerr.UnknownTopicOrPartition.Code {
		return kerr.ErrorForCode(code)
	}
	return nil
}

// TestClusterListenerEndpoints: each node registers an endpoint per
// listener, and a client is told the endpoints of the listener it
// connected on, for every node.
func TestClusterListenerEndpoints(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	nodes := make([]*Node, 2)
	for i := range nodes {
		cfg := secureConfig(t, nil)
		cfg.NodeID = int32(i + 1)
		cfg.Partitions = 4
		cfg.Listeners = []server.Listener{
			{Protocol: server.ProtocolPlaintext, Addr: "127.0.0.1:0"},
			{Protocol: server.ProtocolSASLPlaintext, Addr: "127.0.0.1:0"},
		}
		// Port 0: the bound port, under another host name.
		cfg.Advertised = []server.Endpoint{{Listener: server.ProtocolSASLPlaintext, Host: "localhost", Port: 0}}
		cfg.Cluster = &ClusterConfig{Endpoints: ec.Endpoints(), Prefix: "/listeners-test/", LeaseTTL: testLeaseTTL}
		n, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes[i] = n
	}
	want := func(listener, host string) map[int32]string {
		m := map[int32]string{}
		for i, n := range nodes {
			_, port, _ := net.SplitHostPort(n.ListenerAddr(listener))
			m[int32(i+1)] = net.JoinHostPort(host, port)
		}
		return m
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		listener, host string
		opts           []kgo.Opt
	}{
		{server.ProtocolSASLPlaintext, "localhost", []kgo.Opt{kgo.SASL(scram.Auth{User: "admin", Pass: adminPassword}.AsSha512Mechanism())}},
		{server.ProtocolPlaintext, "127.0.0.1", nil},
	} {
		cl := client(t, nodes[0].ListenerAddr(tc.listener), tc.opts...)
		exp := want(tc.listener, tc.host)
		var got map[int32]string
		testwait.Until(20*time.Second, func() bool {
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			got = map[int32]string{}
			for _, b := range resp.Brokers {
				got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			}
			return maps.Equal(got, exp)
		})
		if !maps.Equal(got, exp) {
			t.Fatalf("%s: brokers %v, want %v", tc.listener, got, exp)
		}
	}
}

// TestSIGHUPReloadsCertificate: cohort serve reloads its TLS certificate
// on SIGHUP; connections made before keep working.
func TestSIGHUPReloadsCertificate(t *testing.T) {
	bin := cohortBinary(t)
	ca := testpki.NewCA(t, "ca")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	addr, httpAddr := freePort(t), freePort(t)
	serve := exec.Command(bin, "serve", "--listeners", "SSL://"+addr, "--data-dir", t.TempDir(), "--log-level", "warn",
		"--tls-cert-file", first.CertFile, "--tls-key-file", first.KeyFile, "--http-listen", httpAddr, "--http-tls")
	serve.Stdout, serve.Stderr = os.Stderr, os.Stderr
	cmd := testready.Start(t, serve, childReadyWithin)
	defer func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() }()
	served := func() (string, *tls.Conn) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, ca.ClientConfig(nil))
		if err != nil {
			t.Fatal(err)
		}
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName, c
	}
	cn, old := served()
	defer old.Close()
	if cn != "first" {
		t.Fatalf("serving %q", cn)
	}
	for src, dst := range map[string]string{second.CertFile: first.CertFile, second.KeyFile: first.KeyFile} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Process.Signal(syscall.SIGHUP)
	if !testwait.Until(10*time.Second, func() bool {
		var c *tls.Conn
		cn, c = served()
		c.Close()
		return cn == "second"
	}) {
		t.Fatalf("still serving %q 10s after SIGHUP", cn)
	}
	// The HTTPS listener (--http-tls) serves the reloaded certificate too.
	hc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", httpAddr, ca.ClientConfig(nil))
	if err != nil {
		t.Fatalf("HTTPS listener: %v", err)
	}
	if cn := hc.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "second" {
		t.Fatalf("the HTTPS listener serves %q after SIGHUP", cn)
	}
	hc.Close()
	// The connection from before the reload still gets answers.
	rc := &rawSASL{nc: old}
	old.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("connection from before SIGHUP: %v", err)
	}
}

// TestClientAuthAppliesToSSLListenersOnly: with --tls-client-auth required,
// an SSL listener refuses a client without a certificate, while a SASL_SSL
// listener does not ask for one (the client is its SASL identity, KIP-684).
func TestClientAuthAppliesToSSLListenersOnly(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "cohort")
	srvTLS, err := tlsconfig.New(tlsconfig.Options{CertFile: pair.CertFile, KeyFile: pair.KeyFile, ClientCAFile: ca.CertFile, ClientAuth: tlsconfig.ClientAuthRequired})
	if err != nil {
		t.Fatal(err)
	}
	cfg := secureConfig(t, memstore.New())
	cfg.Listeners = []server.Listener{{Protocol: server.ProtocolSSL, Addr: "127.0.0.1:0"}, {Protocol: server.ProtocolSASLSSL, Addr: "127.0.0.1:0"}}
	cfg.Security.TLS = srvTLS
	n := startLoaded(t, cfg)
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sasled := kadm.NewClient(scramClient(t, n.ListenerAddr(server.ProtocolSASLSSL), "admin", adminPassword, kgo.DialTLSConfig(ca.ClientConfig(nil))))
	if _, err := sasled.ListGroups(ctx); err != nil {
		t.Fatalf("SASL_SSL without a client certificate: %v", err)
	}
	certless := kadm.NewClient(client(t, n.ListenerAddr(server.ProtocolSSL), kgo.DialTLSConfig(ca.ClientConfig(nil)), kgo.RequestRetries(0)))
	shortCtx, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if _, err := certless.ListGroups(shortCtx); err == nil {
		t.Fatal("SSL with required client certificates served a client without one")
	}
}

// TestRegexSubscriptionGivesOnlyDescribableTopics: on a node with an
// authorizer, a consumer subscribing by regex is assigned only the topics
// its principal may DESCRIBE, as in Kafka; a grant made later reaches it at
// its next heartbeat. (cohort matched the regex against every topic.)
func TestRegexSubscriptionGivesOnlyDescribableTopics(t *testing.T) {
	n := startLoaded(t, secureConfig(t, memstore.New()))
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := kadm.NewClient(scramClient(t, n.Addr(), "admin", adminPassword))
	for _, topic := range []string{"orders-eu", "orders-us"} {
		if _, err := admin.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	details, err := admin.ListTopics(ctx, "orders-eu", "orders-us")
	if err != nil {
		t.Fatal(err)
	}
	nameOf := map[[16]byte]string{}
	for name, d := range details {
		nameOf[d.ID] = name
	}
	createUser(ctx, t, admin, "app", "app-password")
	grant := func(acls *kadm.ACLBuilder) {
		t.Helper()
		if res, err := admin.CreateACLs(ctx, acls); err != nil || res[0].Err != nil {
			t.Fatalf("CreateACLs: %v %v", err, res)
		}
	}
	grant(kadm.NewACLs().Allow("User:app").Groups("rg").Operations(kadm.OpRead))
	grant(kadm.NewACLs().Allow("User:app").Topics("orders-eu").Operations(kadm.OpDescribe))

	app := scramClient(t, n.Addr(), "app", "app-password")
	heartbeat := func(epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "rg", "member-1", epoch
		req.RebalanceTimeoutMillis = -1
		if epoch == 0 {
			regex := "orders-.*"
			req.SubscribedTopicRegex, req.RebalanceTimeoutMillis = &regex, 60000
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp, err := req.RequestWith(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat: error %d", resp.ErrorCode)
		}
		return resp
	}
	given := func(r *kmsg.ConsumerGroupHeartbeatResponse) []string {
		var out []string
		for _, tp := range r.Assignment.Topics {
			for _, p := range tp.Partitions {
				out = append(out, nameOf[tp.TopicID]+"/"+strconv.Itoa(int(p)))
			}
		}
		slices.Sort(out)
		return out
	}
	r := heartbeat(0)
	if r.Assignment == nil || !slices.Equal(given(r), []string{"orders-eu/0", "orders-eu/1"}) {
		t.Fatalf("joined with regex orders-.*: assignment %v, want orders-eu only", r.Assignment)
	}
	grant(kadm.NewACLs().Allow("User:app").Topics("orders-us").Operations(kadm.OpDescribe))
	r = heartbeat(r.MemberEpoch)
	if r.Assignment == nil || !slices.Equal(given(r), []string{"orders-eu/0", "orders-eu/1", "orders-us/0", "orders-us/1"}) {
		t.Fatalf("after DESCRIBE on orders-us: assignment %v", r.Assignment)
	}
}

// TestClusterRegexACLGrantFromOtherNode: in a cluster, a DESCRIBE granted
// through one node reaches a regex consumer whose group another node may
// coordinate: its next heartbeats bring the newly describable topic (the
// ACLs reach every node through etcd, and the group's filter follows their
// version). kadm sends each CreateAcls to any node it knows, not only the
// one it was given: the two grants below may go through different nodes,
// and a node publishes its own change with those stored before it
// elsewhere (authstate's Shared), so the wait for the topic grant also
// covers the group grant made before it.
func TestClusterRegexACLGrantFromOtherNode(t *testing.T) {
	nodes := startSecureCluster(t, "/regex-acl/")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin1 := kadm.NewClient(scramClient(t, nodes[0].Addr(), "admin", adminPassword, kgo.RequestRetries(10)))
	admin2 := kadm.NewClient(scramClient(t, nodes[1].Addr(), "admin", adminPassword, kgo.RequestRetries(10)))
	for _, topic := range []string{"orders-eu", "orders-us"} {
		if _, err := admin1.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	createUser(ctx, t, admin1, "app", "app-password")
	for _, acls := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:app").Groups("rg").Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:app").Topics("orders-eu").Operations(kadm.OpDescribe),
	} {
		if res, err := admin1.CreateACLs(ctx, acls); err != nil || res[0].Err != nil {
			t.Fatalf("CreateACLs: %v %v", err, res)
		}
	}
	// The user and the ACLs reach both nodes through etcd.
	for _, n := range nodes {
		if !testwait.Until(5*time.Second, func() bool { return describeTopicAs(ctx, n.Addr(), "app", "app-password", "orders-eu") == nil }) {
			t.Fatalf("app cannot describe orders-eu on node %s after 5s", n.Addr())
		}
	}
	// kgo keeps the coordinator it found for a ConsumerGroupHeartbeat even
	// when the answer is NOT_COORDINATOR (its own consumer handles that), so
	// a retriable answer, while the two nodes settle which one coordinates
	// the group, starts a new client.
	newApp := func() *kgo.Client {
		return scramClient(t, nodes[1].Addr(), "app", "app-password", kgo.RequestRetries(10))
	}
	app := newApp()
	epoch := int32(0)
	// topicsGiven heartbeats and returns the number of topics assigned (-1:
	// the assignment is unchanged; -2: a retriable error, while the cluster
	// settles which node coordinates the group).
	topicsGiven := func() int {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = 1, "rg", "member-1", epoch, -1
		if epoch == 0 {
			regex := "orders-.*"
			req.SubscribedTopicRegex, req.RebalanceTimeoutMillis = &regex, 60000
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp, err := req.RequestWith(ctx, app)
		if err != nil {
			if kerr.IsRetriable(err) {
				app = newApp()
				return -2
			}
			t.Fatalf("heartbeat: %v", err)
		}
		if resp.ErrorCode != 0 {
			if e := kerr.ErrorForCode(resp.ErrorCode); kerr.IsRetriable(e) {
				app = newApp()
				return -2
			}
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		epoch = resp.MemberEpoch
		if resp.Assignment == nil {
			return -1
		}
		return len(resp.Assignment.Topics)
	}
	n := -2
	if !testwait.Until(20*time.Second, func() bool { n = topicsGiven(); return n != -2 }) || n != 1 {
		t.Fatalf("joined with regex orders-.*: %d topics, want orders-eu only", n)
	}
	start := time.Now()
	if res, err := admin2.CreateACLs(ctx, kadm.NewACLs().Allow("User:app").Topics("orders-us").Operations(kadm.OpDescribe)); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs through node 2: %v %v", err, res)
	}
	if !testwait.Until(5*time.Second, func() bool { return topicsGiven() == 2 }) {
		t.Fatalf("the grant through node 2 did not reach the member after %v", time.Since(start))
	}
	t.Logf("granted topic given after %v", time.Since(start))
}

// testJWKS returns a JWK set of one new RSA public key.
func testJWKS(t *testing.T) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(crand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReloadOAuthKeys: the node rereads OAUTHBEARER's JWKS file on demand
// (cohort serve does it on SIGHUP) and reports a file that does not load;
// the node answers "not configured" when it has no such file.
func TestReloadOAuthKeys(t *testing.T) {
	good := testJWKS(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(good)
	cfg := secureConfig(t, memstore.New())
	cfg.Security.Mechanisms = append(cfg.Security.Mechanisms, sasl.OAuthBearer)
	cfg.Security.OAuth.JWKSFile = path
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.ReloadOAuthKeys(); err != nil {
		t.Fatalf("reload of the good file: %v", err)
	}
	write([]byte("{not json"))
	if err := n.ReloadOAuthKeys(); err == nil || !strings.Contains(err.Error(), path) || errors.Is(err, ErrNotConfigured) {
		t.Fatalf("reload of a broken file: %v", err)
	}
	write(append(good, ' ')) // another size: read again
	if err := n.ReloadOAuthKeys(); err != nil {
		t.Fatalf("reload of the repaired file: %v", err)
	}

	plain := secureConfig(t, memstore.New())
	n2, err := Start(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if err := n2.ReloadOAuthKeys(); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("ReloadOAuthKeys without OAUTHBEARER: %v", err)
	}
	if err := n2.ReloadTLS(); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("ReloadTLS without TLS: %v", err)
	}
}

// logTail collects a child's stderr (or a node's log), safe to read while
// it writes; unless silent it also copies it to the test's stderr.
type logTail struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	silent bool
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.silent {
		os.Stderr.Write(p)
	}
	return l.buf.Write(p)
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logTail) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), s)
}

// TestSIGHUPChecksOAuthKeys: on SIGHUP cohort serve rereads the JWKS file
// and logs whether its keys are in use, so an operator who rotated keys
// learns at once that the new file does not load.
func TestSIGHUPChecksOAuthKeys(t *testing.T) {
	bin := cohortBinary(t)
	good := testJWKS(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	serve := exec.Command(bin, "serve", "--listeners", "SASL_PLAINTEXT://"+addr, "--data-dir", t.TempDir(), "--log-level", "info",
		"--sasl-mechanisms", "OAUTHBEARER", "--oauth-jwks-file", path)
	logs := &logTail{}
	serve.Stdout, serve.Stderr = os.Stderr, logs
	cmd := testready.Start(t, serve, childReadyWithin)
	defer func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() }()

	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	if !testwait.Until(10*time.Second, func() bool { return logs.has("OAUTHBEARER JWKS file not loaded") && logs.has(path) }) {
		t.Fatal("no log line for the broken JWKS file 10s after SIGHUP")
	}
	if err := os.WriteFile(path, append(good, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	if !testwait.Until(10*time.Second, func() bool { return logs.has("OAUTHBEARER JWKS file checked; its keys are in use") }) {
		t.Fatal("no log line for the repaired JWKS file 10s after SIGHUP")
	}
	if !logs.has("no TLS certificate to reload") {
		t.Error("SIGHUP without TLS did not say there is no certificate to reload")
	}
}

// TestClusterUnknownUserSaltShared: both nodes of a cluster, and a node
// after a restart, answer an unknown SCRAM user with the same salt and the
// iteration count of the stored users: nothing tells it from a real user
// (whose salt is stored), as it did when each process drew its own key.
func TestClusterUnknownUserSaltShared(t *testing.T) {
	nodes := startSecureCluster(t, "/unknown-users/")
	firstAnswer := func(addr, user string) string {
		t.Helper()
		c := dialRaw(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = "SCRAM-SHA-512"
		if resp, err := c.roundTrip(hs); err != nil || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
			t.Fatalf("handshake: %v %+v", err, resp)
		}
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.SetVersion(1)
		au.SASLAuthBytes = []byte("n,,n=" + user + ",r=clientnonce")
		resp, err := c.roundTrip(au)
		if err != nil || resp.(*kmsg.SASLAuthenticateResponse).ErrorCode != 0 {
			t.Fatalf("client-first for %s: %v %+v", user, err, resp)
		}
		s1 := string(resp.(*kmsg.SASLAuthenticateResponse).SASLAuthBytes)
		return s1[strings.Index(s1, ",s="):] // salt and iterations, without the nonce
	}
	// Users as `cohort user set` makes them (kadm: 24-byte salts, and the
	// CLI's 8,192 iterations), outnumbering the bootstrap admin's 4,096.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(scramClient(t, nodes[0].Addr(), "admin", adminPassword, kgo.RequestRetries(10)))
	for _, u := range []string{"app1", "app2"} {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: u, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: u + "-pw"}})
		if err != nil || res.Error() != nil {
			t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
		}
	}
	var real string
	if !testwait.Until(5*time.Second, func() bool { // until node 2 has seen both users
		real = firstAnswer(nodes[1].Addr(), "app2")
		return strings.HasSuffix(real, ",i=8192") && strings.HasSuffix(firstAnswer(nodes[1].Addr(), "nosuchuser"), ",i=8192")
	}) {
		t.Fatalf("node 2: app2 answered %q, an unknown user %q", real, firstAnswer(nodes[1].Addr(), "nosuchuser"))
	}
	one, two := firstAnswer(nodes[0].Addr(), "nosuchuser"), firstAnswer(nodes[1].Addr(), "nosuchuser")
	if one != two {
		t.Fatalf("the nodes answer an unknown user differently: %q and %q", one, two)
	}
	if !strings.HasSuffix(one, real[strings.Index(real, ",i="):]) {
		t.Fatalf("unknown user %q, stored user %q: different iteration counts", one, real)
	}
	if len(one) != len(real) {
		t.Fatalf("unknown user %q, stored user %q: salts of different lengths", one, real)
	}
}

// TestOpenNodeRefusesCredentialChanges: a node that authenticates no one
// refuses SCRAM credential changes from its clients (Kafka accepts them), so
// a stranger who reaches it cannot set the password of the user the operator
// later makes a super user: after a restart with SASL, --bootstrap-user
// creates that user with the operator's password, not the stranger's.
func TestOpenNodeRefusesCredentialChanges(t *testing.T) {
	st := memstore.New()
	open := startNode(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := client(t, open.Addr(), kgo.RequestRetries(0))
	stranger := kadm.NewClient(cl)
	if _, err := stranger.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "admin", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "strangers-pw"}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("anonymous AlterUserScramCredentials on an open node (kadm): %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	// The answer says why (kadm keeps only the code).
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "admin", 2, 4096, []byte("salt"), make([]byte, 64)
	req.Upsertions = append(req.Upsertions, up)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Results[0]; r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "--bootstrap-user") {
		t.Fatalf("anonymous AlterUserScramCredentials on an open node: %d %v, want CLUSTER_AUTHORIZATION_FAILED naming --bootstrap-user", r.ErrorCode, r.ErrorMessage)
	}
	described, err := stranger.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatalf("DescribeUserScramCredentials on an open node: %v", err)
	}
	if len(described) != 0 {
		t.Fatalf("credentials after the refused change: %v", described)
	}
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}

	n := startLoaded(t, secureConfig(t, st))
	t.Cleanup(func() { n.Close() })
	if _, err := kadm.NewClient(scramClient(t, n.Addr(), "admin", adminPassword)).ListGroups(ctx); err != nil {
		t.Fatalf("the bootstrap admin with the operator's password: %v", err)
	}
	if _, err := kadm.NewClient(scramClient(t, n.Addr(), "admin", "strangers-pw")).ListGroups(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("the stranger's password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}
