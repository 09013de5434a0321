package clientconfig

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/internal/testpki"
)

func TestValidate(t *testing.T) {
	scram := Config{Mechanism: "scram-sha-256", Username: "u", Password: "p"}
	for _, tc := range []struct {
		name string
		c    Config
		want string // "" = valid
	}{
		{"zero", Config{}, ""},
		{"tls", Config{TLS: true, CAFile: "ca", CertFile: "c", KeyFile: "k", ServerName: "s"}, ""},
		{"scram in lower case", scram, ""},
		{"oauth token", Config{Mechanism: "OAUTHBEARER", Token: "t"}, ""},
		{"oauth token file", Config{Mechanism: "OAUTHBEARER", TokenFile: "f"}, ""},
		{"CA without TLS", Config{CAFile: "ca"}, "TLS is off"},
		{"server name without TLS", Config{ServerName: "x"}, "TLS is off"},
		{"insecure without TLS", Config{InsecureSkipVerify: true}, "TLS is off"},
		{"cert without key", Config{TLS: true, CertFile: "c"}, "both a certificate file and a key file"},
		{"key without cert", Config{TLS: true, KeyFile: "k"}, "both a certificate file and a key file"},
		{"username without mechanism", Config{Username: "u"}, "no SASL mechanism"},
		{"password without mechanism", Config{Password: "p"}, "no SASL mechanism"},
		{"token without mechanism", Config{TokenFile: "f"}, "no SASL mechanism"},
		{"plain without username", Config{Mechanism: "PLAIN", Password: "p"}, "needs a username"},
		{"scram without password", Config{Mechanism: "SCRAM-SHA-512", Username: "u"}, "needs a password"},
		{"scram with a token", Config{Mechanism: "SCRAM-SHA-512", Username: "u", Password: "p", Token: "t"}, "token is given"},
		{"oauth without token", Config{Mechanism: "OAUTHBEARER"}, "needs a token"},
		{"oauth with both", Config{Mechanism: "OAUTHBEARER", Token: "t", TokenFile: "f"}, "not both"},
		{"oauth with username", Config{Mechanism: "OAUTHBEARER", Token: "t", Username: "u"}, "not used"},
		{"gssapi", Config{Mechanism: "GSSAPI"}, "not supported"},
		{"unknown", Config{Mechanism: "SCRAM-SHA-1"}, "unknown SASL mechanism"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if _, oerr := tc.c.Opts(); oerr == nil || oerr.Error() != err.Error() {
				t.Fatalf("Opts: %v, Validate: %v", oerr, err)
			}
		})
	}
}

func TestOptsNone(t *testing.T) {
	opts, err := Config{}.Opts()
	if err != nil || len(opts) != 0 {
		t.Fatalf("zero config: %v %v", opts, err)
	}
}

// listTopics lists the topics of the cluster at addrs with a client made
// from c.
func listTopics(t *testing.T, addrs []string, c Config) ([]string, error) {
	t.Helper()
	opts, err := c.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addrs...), kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ts, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	return ts.Names(), nil
}

func newCluster(t *testing.T, opts ...kfake.Opt) []string {
	t.Helper()
	c, err := kfake.NewCluster(append(opts, kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func TestOptsSASL(t *testing.T) {
	addrs := newCluster(t, kfake.EnableSASL(),
		kfake.Superuser(MechanismPlain, "plainuser", "plain-pw"),
		kfake.Superuser(MechanismSCRAMSHA256, "scram256", "pw-256"),
		kfake.Superuser(MechanismSCRAMSHA512, "scram512", "pw-512"))
	for _, c := range []Config{
		{Mechanism: MechanismPlain, Username: "plainuser", Password: "plain-pw"},
		{Mechanism: "scram-sha-256", Username: "scram256", Password: "pw-256"},
		{Mechanism: MechanismSCRAMSHA512, Username: "scram512", Password: "pw-512"},
	} {
		t.Run(c.Mechanism, func(t *testing.T) {
			ts, err := listTopics(t, addrs, c)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != 1 || ts[0] != "events" {
				t.Fatalf("topics %v", ts)
			}
			bad := c
			bad.Password = "wrong-pw"
			// Kafka answers SASL_AUTHENTICATION_FAILED; kfake closes
			// the connection. Either way the request fails at once.
			_, err = listTopics(t, addrs, bad)
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("wrong password: %v", err)
			}
			if strings.Contains(err.Error(), "wrong-pw") {
				t.Fatalf("error holds the password: %v", err)
			}
		})
	}
	// Without SASL the cluster does not answer.
	if _, err := listTopics(t, addrs, Config{}); err == nil {
		t.Fatal("a client without SASL listed topics")
	}
}

func TestOptsTLS(t *testing.T) {
	ca := testpki.NewCA(t, "test-ca")
	server := ca.Server(t, "kfake")
	client := ca.Client(t, pkix.Name{CommonName: "alice"})
	addrs := newCluster(t,
		kfake.TLS(&tls.Config{
			Certificates: []tls.Certificate{server.TLS},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    ca.Pool(),
			MinVersion:   tls.VersionTLS12,
		}),
		kfake.EnableSASL(), kfake.Superuser(MechanismSCRAMSHA256, "admin", "admin-pw"))
	good := Config{TLS: true, CAFile: ca.CertFile, CertFile: client.CertFile, KeyFile: client.KeyFile,
		Mechanism: MechanismSCRAMSHA256, Username: "admin", Password: "admin-pw"}
	if ts, err := listTopics(t, addrs, good); err != nil || len(ts) != 1 {
		t.Fatalf("mTLS + SCRAM: %v %v", ts, err)
	}
	// The certificate is for 127.0.0.1 and localhost: another name fails.
	wrongName := good
	wrongName.ServerName = "elsewhere.example"
	if _, err := listTopics(t, addrs, wrongName); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("wrong server name: %v", err)
	}
	sameName := good
	sameName.ServerName = "localhost"
	if _, err := listTopics(t, addrs, sameName); err != nil {
		t.Fatalf("server name localhost: %v", err)
	}
	// Without the CA, the system roots do not trust the test CA.
	noCA := good
	noCA.CAFile = ""
	if _, err := listTopics(t, addrs, noCA); err == nil {
		t.Fatal("a server certificate of an unknown CA was accepted")
	}
	insecure := noCA
	insecure.InsecureSkipVerify = true
	if _, err := listTopics(t, addrs, insecure); err != nil {
		t.Fatalf("insecure: %v", err)
	}
	// The server requires a client certificate.
	noCert := good
	noCert.CertFile, noCert.KeyFile = "", ""
	if _, err := listTopics(t, addrs, noCert); err == nil {
		t.Fatal("accepted without a client certificate")
	}
	// Plaintext to a TLS listener fails.
	if _, err := listTopics(t, addrs, Config{Mechanism: MechanismSCRAMSHA256, Username: "admin", Password: "admin-pw"}); err == nil {
		t.Fatal("plaintext to a TLS listener worked")
	}
}

func TestTLSConfigFiles(t *testing.T) {
	ca := testpki.NewCA(t, "test-ca")
	pair := ca.Client(t, pkix.Name{CommonName: "c"})
	tc, err := Config{TLS: true, CAFile: ca.CertFile, CertFile: pair.CertFile, KeyFile: pair.KeyFile}.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if tc.MinVersion != tls.VersionTLS12 || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.InsecureSkipVerify {
		t.Fatalf("config %+v", tc)
	}
	if tc, err := (Config{}).TLSConfig(); tc != nil || err != nil {
		t.Fatalf("TLS off: %v %v", tc, err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{TLS: true, CAFile: filepath.Join(t.TempDir(), "missing.pem")}, "TLS CA file"},
		{Config{TLS: true, CAFile: notPEM}, "no PEM certificate"},
		{Config{TLS: true, CertFile: pair.CertFile, KeyFile: ca.CertFile}, "TLS client certificate"},
		{Config{TLS: true, CertFile: pair.CertFile, KeyFile: filepath.Join(t.TempDir(), "missing.pem")}, "TLS client certificate"},
	} {
		if _, err := tc.c.Opts(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.c, err, tc.want)
		}
	}
}

// TestOAuthBearerTokenFile: the token file is read at every
// authentication, so a renewed token is used by the next connection.
func TestOAuthBearerTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("token-one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mech, err := Config{Mechanism: "oauthbearer", TokenFile: file}.SASLMechanism()
	if err != nil {
		t.Fatal(err)
	}
	if mech.Name() != MechanismOAuthBearer {
		t.Fatal(mech.Name())
	}
	first := func() string {
		t.Helper()
		_, msg, err := mech.Authenticate(context.Background(), "127.0.0.1:9092")
		if err != nil {
			t.Fatal(err)
		}
		return string(msg)
	}
	if m := first(); m != "n,,\x01auth=Bearer token-one\x01\x01" {
		t.Fatalf("first message %q", m)
	}
	if err := os.WriteFile(file, []byte("token-two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if m := first(); !strings.Contains(m, "Bearer token-two\x01") {
		t.Fatalf("renewed token not used: %q", m)
	}
	os.WriteFile(file, []byte(" \n"), 0o600)
	if _, _, err := mech.Authenticate(context.Background(), "h:1"); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty token file: %v", err)
	}
	os.Remove(file)
	if _, _, err := mech.Authenticate(context.Background(), "h:1"); err == nil {
		t.Fatal("missing token file accepted")
	}
	static, err := Config{Mechanism: MechanismOAuthBearer, Token: "static-tok"}.SASLMechanism()
	if err != nil {
		t.Fatal(err)
	}
	if _, msg, err := static.Authenticate(context.Background(), "h:1"); err != nil || !bytes.Contains(msg, []byte("Bearer static-tok\x01")) {
		t.Fatalf("static token: %q %v", msg, err)
	}
}

// TestExposedSecretFiles: a password, token or properties file holding a
// password that other users may read is reported; one only its owner can
// read, standard input, and a properties file without a secret are not.
func TestExposedSecretFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // not reduced by the umask
			t.Fatal(err)
		}
		return p
	}
	props := "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n" +
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"p\";\n"
	open, closed := file("pw-open", "p\n", 0o644), file("pw-closed", "p\n", 0o600)
	propsOpen, propsNoSecret := file("props-open", props, 0o640), file("props-tls", "security.protocol=SSL\n", 0o644)
	tokenOpen := file("token-open", "eyJ", 0o604)
	for _, tc := range []struct {
		c    Config
		want []string
	}{
		{Config{PasswordFile: open}, []string{open}},
		{Config{PasswordFile: closed}, nil},
		{Config{PasswordFile: "-"}, nil},
		{Config{PropertiesFile: propsOpen}, []string{propsOpen}},
		{Config{PropertiesFile: propsNoSecret}, nil},
		{Config{TokenFile: tokenOpen, PropertiesFile: propsOpen}, []string{tokenOpen, propsOpen}},
	} {
		if got := tc.c.ExposedSecretFiles(); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}
