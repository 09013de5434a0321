package testbed

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/memstore"
)

// Names of the secure bed's principals and resources.
const (
	// AppUser may READ and DESCRIBE the groups prefixed AppGroupPrefix and
	// the topic AppTopic, nothing else.
	AppUser        = "app"
	AppGroupPrefix = "sec-"
	AppTopic       = "t"
	// OtherGroup (with an offset committed by the super user) and
	// HiddenTopic exist, and AppUser has no ACL on either.
	OtherGroup  = "other-group"
	HiddenTopic = "hidden"
	adminUser   = "admin"
	// Test-only passwords: they reach clients through their configuration
	// (a properties file, the environment), never a command line.
	adminPassword = "admin-test-password"
	appPassword   = "app-test-password"
	oauthKeyID    = "secure-bed"
)

// Secure is an in-process cohort node with security: a SASL_SSL listener
// (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN and OAUTHBEARER with a JWKS of the
// bed's own key) and an SSL listener requiring a client certificate from
// CA, the super user "admin", the user AppUser and its ACLs, all created over
// the wire as an operator would, and the topic AppTopic. Each bed has its own
// node, so that its authentication metrics count one client's attempts.
type Secure struct {
	Node *node.Node
	// CA issued the server certificate and verifies client certificates.
	CA *testpki.CA
	// SASLAddr and SSLAddr are the bound addresses of the two listeners.
	SASLAddr, SSLAddr string
	metrics           string // host:port of /metrics
	oauthKey          *ecdsa.PrivateKey
}

// StartSecure starts a secure bed and registers its shutdown with t.Cleanup.
func StartSecure(t testing.TB) *Secure {
	t.Helper()
	testwait.WallClock(t, "stock Kafka clients over SASL/TLS")
	s := &Secure{CA: testpki.NewCA(t, "cohort-test-ca")}
	srvPair := s.CA.Server(t, "cohort")
	// Client certificates are required on the SSL listener. The SASL_SSL
	// listener must not ask for one: Kafka ignores ssl.client.auth on
	// SASL_SSL listeners unless it is set for that listener (KIP-684), and
	// the SASL clients of these tests present none.
	tlsSrv, err := tlsconfig.New(tlsconfig.Options{
		CertFile: srvPair.CertFile, KeyFile: srvPair.KeyFile,
		ClientCAFile: s.CA.CertFile, ClientAuth: tlsconfig.ClientAuthRequired,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.oauthKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: &s.oauthKey.PublicKey, KeyID: oauthKeyID, Algorithm: string(jose.ES256), Use: "sig",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	gcfg.MinSessionTimeout = time.Second
	cfg := node.Config{
		Listeners: []server.Listener{
			{Protocol: server.ProtocolSASLSSL, Addr: "127.0.0.1:0"},
			{Protocol: server.ProtocolSSL, Addr: "127.0.0.1:0"},
		},
		Store:     memstore.New(),
		Group:     gcfg,
		ClusterID: "cohort-secure-bed",
		Logger:    slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Security: &node.SecurityConfig{
			TLS:               tlsSrv,
			Mechanisms:        []string{sasl.ScramSHA256, sasl.ScramSHA512, sasl.Plain, sasl.OAuthBearer},
			OAuth:             sasl.OAuthConfig{JWKSFile: jwksFile},
			BootstrapUser:     adminUser,
			BootstrapPassword: adminPassword,
			SuperUsers:        []string{"User:" + adminUser},
		},
	}
	// The node does not report the address of its metrics listener, so
	// the bed picks a free port; another process may take it in between,
	// hence the retry.
	for try := 0; ; try++ {
		s.metrics = freePort(t)
		cfg.MetricsListen = s.metrics
		s.Node, err = node.Start(cfg)
		if err == nil || try == 4 || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Node.Close() })
	s.SASLAddr = s.Node.ListenerAddr(server.ProtocolSASLSSL)
	s.SSLAddr = s.Node.ListenerAddr(server.ProtocolSSL)
	if s.SASLAddr == "" || s.SSLAddr == "" {
		t.Fatalf("listeners SASL_SSL %q, SSL %q: want both bound", s.SASLAddr, s.SSLAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Node.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	s.provision(ctx, t)
	return s
}

// provision creates, as the super user over the wire, the user AppUser,
// its ACLs and the topic AppTopic.
func (s *Secure) provision(ctx context.Context, t testing.TB) {
	t.Helper()
	adm := s.Admin(t)
	// One mechanism per request: like Kafka's KRaft controller, cohort
	// refuses a request that alters one user twice (DUPLICATE_RESOURCE).
	for _, mech := range []kadm.ScramMechanism{kadm.ScramSha512, kadm.ScramSha256} {
		users, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
			{User: AppUser, Mechanism: mech, Iterations: 4096, Password: appPassword},
		})
		if err == nil {
			err = users.Error()
		}
		if err != nil {
			t.Fatalf("creating user %s (%v): %v", AppUser, mech, err)
		}
	}
	app := "User:" + AppUser
	s.Allow(ctx, t, kadm.NewACLs().Allow(app).Groups(AppGroupPrefix).
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead, kadm.OpDescribe))
	s.Allow(ctx, t, kadm.NewACLs().Allow(app).Topics(AppTopic).Operations(kadm.OpRead, kadm.OpDescribe))
	for _, topic := range []string{AppTopic, HiddenTopic} {
		if resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("creating topic %s: %v %v", topic, err, resp.Err)
		}
	}
	offs := kadm.Offsets{}
	offs.AddOffset(HiddenTopic, 0, 1, -1)
	if resp, err := adm.CommitOffsets(ctx, OtherGroup, offs); err != nil || resp.Error() != nil {
		t.Fatalf("committing an offset of %s: %v %v", OtherGroup, err, resp.Error())
	}
}

// Allow creates ACLs as the super user.
func (s *Secure) Allow(ctx context.Context, t testing.TB, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := s.Admin(t).CreateACLs(ctx, b)
	if err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateACLs %s %v: %v", r.Principal, r.Operation, r.Err)
		}
	}
}

// Admin is a franz-go admin client of the super user (SCRAM-SHA-512 over
// SASL_SSL), closed by t.Cleanup.
func (s *Secure) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(s.Client(t, scram.Auth{User: adminUser, Pass: adminPassword}.AsSha512Mechanism()))
}

// Client is a franz-go client of the SASL_SSL listener authenticating
// with mech, verifying the server against CA; closed by t.Cleanup.
func (s *Secure) Client(t testing.TB, mech kgosasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(s.clientOpts(mech), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// clientOpts are the franz-go options of a SASL_SSL client with mech.
func (s *Secure) clientOpts(mech kgosasl.Mechanism) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(s.SASLAddr),
		kgo.DialTLSConfig(s.CA.ClientConfig(nil)),
		kgo.SASL(mech),
		kgo.DialTimeout(5 * time.Second),
	}
}

// AppPassword is AppUser's password; wrong is a different one.
func (s *Secure) AppPassword(wrong bool) string {
	if wrong {
		return appPassword + "-wrong"
	}
	return appPassword
}

// Token is an OAUTHBEARER token (ES256 JWT) for sub, valid for ttl and
// signed with the key of the bed's JWKS file, or with a fresh key the
// bed does not know when forged.
func (s *Secure) Token(t testing.TB, sub string, ttl time.Duration, forged bool) string {
	t.Helper()
	key := s.oauthKey
	if forged {
		var err error
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", oauthKeyID))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{
		Subject:  sub,
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(ttl)),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// AuthFailures reads cohort_server_authentications_total{mechanism,
// result="failure"} from the node's /metrics.
func (s *Secure) AuthFailures(t testing.TB, mechanism string) int {
	t.Helper()
	return s.Counter(t, "cohort_server_authentications_total", map[string]string{"mechanism": mechanism, "result": "failure"})
}

// Counter reads the counter name{labels} (labels may be a subset of the
// series' labels; the matching series are summed, e.g. over listeners) from
// the node's /metrics: 0 when no series matches, as before its first
// increment.
func (s *Secure) Counter(t testing.TB, name string, labels map[string]string) int {
	t.Helper()
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		t.Fatalf("reading metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reading metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sum := 0.0
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+"{")
		if !ok {
			continue
		}
		series, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && strings.Contains(","+series+",", ","+k+"="+strconv.Quote(v)+",")
		}
		if !match {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric %s: %v", sc.Text(), err)
		}
		sum += f
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading metrics: %v", err)
	}
	return int(sum)
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
