package member_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/consumer"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/election"
	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/clientconfig"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/memstore"
	"github.com/cohort-dev/cohort/workers"
)

// TestClientOptsSASLSSL: a member, a consumer group, an election candidate
// and a worker pool that create their own client from Brokers use
// ClientOpts, so they join through a listener that requires TLS and
// SCRAM-SHA-256. Without the options none of them could connect.
func TestClientOptsSASLSSL(t *testing.T) {
	ca := testpki.NewCA(t, "member-ca")
	pair := ca.Server(t, "kfake")
	addr := membertest.StartKfake(t, kfake.EnableSASL(),
		kfake.Superuser(clientconfig.MechanismSCRAMSHA256, "app", "app-pw"),
		kfake.SeedTopics(2, "events"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair.TLS}, MinVersion: tls.VersionTLS12}))
	opts, err := clientconfig.Config{TLS: true, CAFile: ca.CertFile,
		Mechanism: clientconfig.MechanismSCRAMSHA256, Username: "app", Password: "app-pw"}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	mc := func(group string) member.Config {
		return member.Config{Brokers: []string{addr}, ClientOpts: opts, Group: group,
			SessionTimeout: 6 * time.Second, Logger: membertest.Logger(t)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s: not assigned over SASL_SSL", what)
		}
	}
	type closer interface{ Close(context.Context) error }
	var started []closer
	defer func() {
		for _, c := range started {
			c.Close(ctx)
		}
	}()

	memberDone := make(chan struct{})
	cfg := mc("sec-member")
	cfg.ProtocolType, cfg.Protocols = "sec", func() []member.Protocol { return []member.Protocol{{Name: "v1"}} }
	cfg.Assign = func(context.Context, member.Generation) (map[string][]byte, error) { return nil, nil }
	cfg.Assigned = func(context.Context, member.Generation) { closeOnce(memberDone) }
	m, err := member.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	started = append(started, m)

	groupDone := make(chan struct{})
	g, err := consumer.StartGroup(consumer.GroupConfig{Member: mc("sec-consumers"), Topics: []string{"events"},
		Assigned: func(_ context.Context, _ member.Generation, added []assign.TopicPartitions) {
			if len(added) == 1 && len(added[0].Partitions) == 2 {
				closeOnce(groupDone)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	started = append(started, g)

	electDone := make(chan struct{})
	e, err := election.Start(election.Config{Member: mc("sec-election")}, func(ctx context.Context, _ int32) {
		closeOnce(electDone)
		<-ctx.Done()
	})
	if err != nil {
		t.Fatal(err)
	}
	started = append(started, e)

	workDone := make(chan struct{})
	p, err := workers.Start(workers.Config{Member: mc("sec-workers"),
		Resources: func(context.Context) ([]workers.Resource, error) { return []workers.Resource{{Name: "r1"}}, nil },
		Start:     func(_ context.Context, _ string, _ int32) { closeOnce(workDone) },
		Stop:      func(string) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	started = append(started, p)

	wait("member", memberDone)
	wait("consumer group", groupDone)
	wait("election", electDone)
	wait("workers", workDone)
}

// TestNewClientOpts: NewClient applies its options after its defaults.
func TestNewClientOpts(t *testing.T) {
	cl, err := member.NewClient([]string{"127.0.0.1:1"}, kgo.ClientID("from-opts"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.ClientID); got != "from-opts" {
		t.Fatalf("client id %v", got)
	}
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// secureCohort starts a cohort node with SCRAM and ACLs and the user app
// (password appPassword) that no ACL grants anything. It returns the
// node's address and an admin client.
func secureCohort(t *testing.T) (string, *kadm.Client) {
	t.Helper()
	n, adm := membertest.SecureCohort(t, "app", appPassword)
	return n.Addr(), adm
}

const appPassword = "app-secret-7f3k"

// TestRefusedCredentialsAndGroupAreFatal: kgo reports a refused SASL
// authentication and a group the principal may not use (FindCoordinator
// answered GROUP_AUTHORIZATION_FAILED) as the request's error, without a
// response. The member stops with a FatalError naming the refusal, as
// Kafka's clients raise both to the application; it retried both for ever,
// logging nothing above Debug, and never reported a generation. The error
// does not hold the password.
func TestRefusedCredentialsAndGroupAreFatal(t *testing.T) {
	addr, _ := secureCohort(t)
	for _, tc := range []struct {
		name, pass string
		want       error
	}{
		{"wrong password", "not-the-" + appPassword, kerr.SaslAuthenticationFailed},
		{"no READ on the group", appPassword, kerr.GroupAuthorizationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := member.Start(member.Config{Brokers: []string{addr}, Group: "g1", ProtocolType: "p",
				ClientOpts: []kgo.Opt{kgo.SASL(scram.Auth{User: "app", Pass: tc.pass}.AsSha512Mechanism())},
				Protocols:  func() []member.Protocol { return []member.Protocol{{Name: "v1"}} },
				Assign:     func(context.Context, member.Generation) (map[string][]byte, error) { return nil, nil },
				Logger:     membertest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Abandon()
			select {
			case <-m.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("member still retrying after 10s, Err %v; want it stopped with %v", m.Err(), tc.want)
			}
			var fe *member.FatalError
			if err := m.Err(); !errors.As(err, &fe) || !errors.Is(err, tc.want) {
				t.Fatalf("Err %v (%T), want a *member.FatalError wrapping %v", err, err, tc.want)
			}
			if strings.Contains(m.Err().Error(), tc.pass) {
				t.Fatalf("Err %q holds the password", m.Err())
			}
		})
	}
}

// TestRefusedCertificateIsFatal: on an SSL listener that requires client
// certificates, a member that does not trust the node's certificate, or
// that has no certificate of its own, fails its TLS handshake on every
// attempt. It stops with a FatalError naming the certificate, as Kafka's
// clients raise an SslAuthenticationException; it retried for ever,
// logging nothing above Debug. The same member with a certificate joins.
func TestRefusedCertificateIsFatal(t *testing.T) {
	ca := testpki.NewCA(t, "member-ca")
	other := testpki.NewCA(t, "other-ca")
	srv := ca.Server(t, "cohort")
	srvTLS, err := tlsconfig.New(tlsconfig.Options{CertFile: srv.CertFile, KeyFile: srv.KeyFile,
		ClientCAFile: ca.CertFile, ClientAuth: tlsconfig.ClientAuthRequired})
	if err != nil {
		t.Fatal(err)
	}
	cfg := membertest.CohortConfig(t, "", memstore.New())
	cfg.Listeners = []server.Listener{{Protocol: server.ProtocolSSL, Addr: "127.0.0.1:0"}}
	cfg.Security = &node.SecurityConfig{TLS: srvTLS, SuperUsers: []string{"User:app"}}
	addr := membertest.StartNode(t, cfg).ListenerAddr(server.ProtocolSSL)
	app := ca.Client(t, pkix.Name{CommonName: "app"})
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		want string // "" for a member that joins
	}{
		{"with a certificate", ca.ClientConfig(&app), ""},
		{"node certificate not trusted", other.ClientConfig(&app), "certificate signed by unknown authority"},
		{"no client certificate", ca.ClientConfig(nil), "certificate required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assigned := make(chan struct{})
			m, err := member.Start(member.Config{Brokers: []string{addr}, Group: "g1", ProtocolType: "p",
				ClientOpts: []kgo.Opt{kgo.DialTLSConfig(tc.tls)},
				Protocols:  func() []member.Protocol { return []member.Protocol{{Name: "v1"}} },
				Assign:     func(context.Context, member.Generation) (map[string][]byte, error) { return nil, nil },
				Assigned:   func(context.Context, member.Generation) { closeOnce(assigned) },
				Logger:     membertest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Abandon()
			select {
			case <-assigned:
				if tc.want != "" {
					t.Fatal("assigned")
				}
				return
			case <-m.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("member still retrying after 10s, Err %v", m.Err())
			}
			var fe *member.FatalError
			if err := m.Err(); tc.want == "" || !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Err %v (%T), want a *member.FatalError about %q", err, err, tc.want)
			}
		})
	}
}
