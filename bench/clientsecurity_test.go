package bench

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/security/clientconfig"
)

// TestRunOverSASLSSL runs every kind of case against kfake with TLS and
// SCRAM-SHA-512, through kgo clients and through raw connections: both
// speak TLS and authenticate.
func TestRunOverSASLSSL(t *testing.T) {
	ca := testpki.NewCA(t, "bench-client-ca")
	pair := ca.Server(t, "kfake")
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser(clientconfig.MechanismSCRAMSHA512, "runner", "runner-pw"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair.TLS}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	sec := clientconfig.Config{TLS: true, CAFile: ca.CertFile,
		Mechanism: clientconfig.MechanismSCRAMSHA512, Username: "runner", Password: "runner-pw"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, client := range []string{"raw", "kgo"} {
		t.Run(client, func(t *testing.T) {
			cfg := Config{
				Bootstrap: kf.ListenAddrs()[0], Security: sec, Client: client,
				Members: []int{2}, HeartbeatMembers: 2, HeartbeatGroups: []int{1},
				Committers: []int{2}, PartitionsPerCommit: []int{3},
				Duration: 100 * time.Millisecond,
			}
			res, err := Run(ctx, "kfake SASL_SSL", cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rebalance) != 1 || res.Rebalance[0].Initial <= 0 {
				t.Fatalf("rebalance %+v", res.Rebalance)
			}
			for _, tp := range append(res.Heartbeat, res.Commit...) {
				if tp.Done == 0 || tp.Errors != 0 { // Done: a 100 ms window may hold no whole request on a loaded machine
					t.Fatalf("%s: %+v", tp.Kind, tp)
				}
			}
		})
	}
	// A wrong password through kgo is covered by package clientconfig;
	// here the raw path, which authenticates on its own.
	t.Run("raw connection authenticates", func(t *testing.T) {
		s, err := newSecurity(sec)
		if err != nil {
			t.Fatal(err)
		}
		c, err := dialRaw(ctx, kf.ListenAddrs()[0], "raw-check", s)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		bad := sec
		bad.Password = "not-it"
		if s, err = newSecurity(bad); err != nil {
			t.Fatal(err)
		}
		if c, err := dialRaw(ctx, kf.ListenAddrs()[0], "raw-check", s); err == nil {
			c.Close()
			t.Fatal("raw connection authenticated with a wrong password")
		}
	})
	if err := (&Config{Bootstrap: "x", Security: clientconfig.Config{Mechanism: "PLAIN"}}).Validate(); err == nil {
		t.Fatal("Validate accepted PLAIN without credentials")
	}
}
