package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/security/clientconfig"
)

// secureCluster is kfake over TLS with SASL and ACLs, and the flags that
// connect to it as its super user.
type secureCluster struct {
	addr  string
	ca    *testpki.CA
	flags []string
}

func startSecureKfake(t *testing.T) secureCluster {
	t.Helper()
	ca := testpki.NewCA(t, "cli-ca")
	pair := ca.Server(t, "kfake")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(clientconfig.MechanismSCRAMSHA256, "admin", "admin-pw"),
		kfake.SeedTopics(1, "events"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair.TLS}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	pw := writeTemp(t, "admin-pw", "admin-pw\n")
	addr := c.ListenAddrs()[0]
	return secureCluster{addr: addr, ca: ca, flags: []string{"--bootstrap", addr, "--tls", "--tls-ca-file", ca.CertFile,
		"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "admin", "--sasl-password-file", pw}}
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// canLogin reports whether user can authenticate with pass over mech.
func (sc secureCluster) canLogin(t *testing.T, mech, user, pass string) bool {
	t.Helper()
	opts, err := clientconfig.Config{TLS: true, CAFile: sc.ca.CertFile, Mechanism: mech, Username: user, Password: pass}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(sc.addr), kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).ListBrokers(ctx)
	return err == nil
}

// table reduces CLI output to its rows, fields separated by one space.
func table(s string) string {
	return strings.TrimSpace(regexp.MustCompile(` {2,}`).ReplaceAllString(s, " "))
}

func TestUserCommands(t *testing.T) {
	sc := startSecureKfake(t)
	run := func(stdin string, args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		err := users(env{stdin: strings.NewReader(stdin), stdout: &out, stderr: io.Discard}, args[0], append(args[1:], sc.flags...))
		return table(out.String()), err
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, err := run(stdin, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}

	// The new password comes from stdin; one trailing newline is dropped.
	// (kfake's SCRAM login announces 4096 iterations whatever the stored
	// count, so only 4096-iteration credentials can log in to it.)
	out := must("alice-pw\n", "user", "set", "alice", "--iterations", "4096")
	if want := "USER MECHANISM ITERATIONS RESULT\nalice SCRAM-SHA-256 4096 set\nalice SCRAM-SHA-512 4096 set"; out != want {
		t.Fatalf("user set:\n%s", out)
	}
	// A user name with a newline and a tab stays one cell of one row.
	out = must("x-pw", "user", "set", "evil\nFAKE-ROW\tx", "--iterations", "4096", "--mechanism", "scram-sha-256")
	if want := "USER MECHANISM ITERATIONS RESULT\n\"evil\\nFAKE-ROW\\tx\" SCRAM-SHA-256 4096 set"; out != want {
		t.Fatalf("user set of a name with a newline:\n%s", out)
	}
	for _, mech := range []string{clientconfig.MechanismSCRAMSHA256, clientconfig.MechanismSCRAMSHA512} {
		if !sc.canLogin(t, mech, "alice", "alice-pw") {
			t.Fatalf("alice cannot log in with %s", mech)
		}
	}
	if sc.canLogin(t, clientconfig.MechanismSCRAMSHA256, "alice", "alice-pw\n") {
		t.Fatal("the trailing newline is part of the password")
	}
	// The default: both mechanisms, 8192 iterations.
	if out = must("bob-pw", "user", "set", "bob"); out != "USER MECHANISM ITERATIONS RESULT\nbob SCRAM-SHA-256 8192 set\nbob SCRAM-SHA-512 8192 set" {
		t.Fatalf("user set bob:\n%s", out)
	}
	out = must("", "users")
	if !strings.Contains(out, "admin SCRAM-SHA-256 4096") || !strings.Contains(out, "alice SCRAM-SHA-256 4096\nalice SCRAM-SHA-512 4096") ||
		!strings.Contains(out, "bob SCRAM-SHA-256 8192\nbob SCRAM-SHA-512 8192") {
		t.Fatalf("users:\n%s", out)
	}

	// One mechanism, from a file.
	pw := writeTemp(t, "new", "alice-new\n")
	must("", "user", "set", "alice", "--mechanism", "scram-sha-512", "--iterations", "4096", "--password-file", pw)
	if !sc.canLogin(t, clientconfig.MechanismSCRAMSHA512, "alice", "alice-new") || !sc.canLogin(t, clientconfig.MechanismSCRAMSHA256, "alice", "alice-pw") {
		t.Fatal("only the SCRAM-SHA-512 password should have changed")
	}
	must("", "user", "set", "alice", "--mechanism", "SCRAM-SHA-256", "--iterations", "16384", "--password-file", pw)
	if out = must("", "users", "alice"); out != "USER MECHANISM ITERATIONS\nalice SCRAM-SHA-256 16384\nalice SCRAM-SHA-512 4096" {
		t.Fatalf("users alice:\n%s", out)
	}

	if out = must("", "user", "delete", "alice", "--mechanism", "SCRAM-SHA-256"); out != "USER MECHANISM RESULT\nalice SCRAM-SHA-256 deleted" {
		t.Fatalf("delete 256:\n%s", out)
	}
	if sc.canLogin(t, clientconfig.MechanismSCRAMSHA256, "alice", "alice-pw") {
		t.Fatal("deleted credential still works")
	}
	// Both: the one she has goes, the missing one is not an error.
	if out = must("", "user", "delete", "alice"); out != "USER MECHANISM RESULT\nalice SCRAM-SHA-256 none\nalice SCRAM-SHA-512 deleted" {
		t.Fatalf("delete both:\n%s", out)
	}
	if _, err := run("", "user", "delete", "alice"); err == nil || !strings.Contains(err.Error(), "no SCRAM credentials") {
		t.Fatalf("deleting a user without credentials: %v", err)
	}
	if _, err := run("", "user", "delete", "alice", "--mechanism", "SCRAM-SHA-512"); err == nil {
		t.Fatal("deleting a missing SCRAM-SHA-512 credential did not fail")
	}
	if out, err := run("", "users", "alice", "bob"); out != "USER MECHANISM ITERATIONS\nbob SCRAM-SHA-256 8192\nbob SCRAM-SHA-512 8192" ||
		err == nil || err.Error() != "users: alice has no SCRAM credentials" {
		t.Fatalf("users alice after delete:\n%s", out)
	}
}

// TestUserArgs: argument errors are found before connecting (no server).
func TestUserArgs(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"user"}, "", "want set|delete NAME"},
		{[]string{"user", "set"}, "", "want set|delete NAME"},
		{[]string{"user", "rename", "a"}, "", "want set|delete NAME"},
		{[]string{"user", "set", "a", "b"}, "", "want set|delete NAME"},
		{[]string{"user", "set", "a", "--mechanism", "SCRAM-SHA-1"}, "pw", "--mechanism"},
		{[]string{"user", "set", "a", "--iterations", "1000"}, "pw", "--iterations 1000"},
		{[]string{"user", "set", "a", "--iterations", "20000"}, "pw", "--iterations 20000"},
		{[]string{"user", "set", "a"}, "", "no password on standard input (it is empty)"},
		{[]string{"user", "set", "a"}, "\n", "no password on standard input (it is empty)"},
		{[]string{"user", "set", "a"}, "\r\n", "no password on standard input (it is empty)"},
		{[]string{"user", "set", "a", "--password-file", "-"}, "", "no password on standard input (it is empty)"},
		{[]string{"user", "set", "a", "--password-file", writeTemp(t, "empty", "\n")}, "", "empty is empty"},
		{[]string{"user", "set", "a", "--password-file", filepath.Join(t.TempDir(), "nope")}, "", "new password"},
		{[]string{"user", "set", "a", "--sasl-mechanism", "PLAIN", "--sasl-username", "x", "--sasl-password-file", "-"}, "pw", "cannot hold both"},
		{[]string{"user", "set", "a", "--password"}, "", "user set: --password is not one of its flags"},
		{[]string{"users", "--sasl-mechanism", "PLAIN"}, "", "needs a username"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			fsArgs := append(tc.args[1:], "--bootstrap", "127.0.0.1:1")
			err := users(env{stdin: strings.NewReader(tc.stdin), stdout: &out, stderr: io.Discard}, tc.args[0], fsArgs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAdminOverSASLSSL: the admin commands take the security flags, or a
// Kafka client properties file.
func TestAdminOverSASLSSL(t *testing.T) {
	sc := startSecureKfake(t)
	var out bytes.Buffer
	if err := topicsCmd(env{stdout: &out, stderr: io.Discard}, "topics", sc.flags); err != nil || !strings.Contains(out.String(), "events") {
		t.Fatalf("topics: %v\n%s", err, out.String())
	}
	props := writeTemp(t, "client.properties", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"+
		"ssl.ca.location="+sc.ca.CertFile+"\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-pw";`+"\n")
	out.Reset()
	if err := topicsCmd(env{stdout: &out, stderr: io.Discard}, "topics", []string{"--bootstrap", sc.addr, "--command-config", props}); err != nil || !strings.Contains(out.String(), "events") {
		t.Fatalf("topics with --command-config: %v\n%s", err, out.String())
	}
	// Without security the listener does not answer.
	out.Reset()
	if err := topicsCmd(discardEnv(), "topics", []string{"--bootstrap", sc.addr, "--timeout", "2s"}); err == nil {
		t.Fatal("plaintext admin command worked against SASL_SSL")
	}
}

// A node that authenticates no one refuses credential changes; the CLI says
// what that means (kadm drops the node's own message).
func TestUserSetOnOpenNodeSaysWhy(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	var out bytes.Buffer
	err := users(env{stdin: strings.NewReader("bob-pw"), stdout: &out, stderr: io.Discard}, "user",
		[]string{"set", "bob", "--mechanism", "SCRAM-SHA-256", "--bootstrap", n.Addr()})
	if err == nil || !strings.Contains(err.Error(), "CLUSTER_AUTHORIZATION_FAILED") || !strings.Contains(err.Error(), "--bootstrap-user") {
		t.Fatalf("user set on an open node: %v, want CLUSTER_AUTHORIZATION_FAILED with the --bootstrap-user hint\n%s", err, out.String())
	}
}

// TestUserSetStdinTwiceIsUsage: the new password and the SASL password
// both from standard input are settings that cannot go together, a usage
// error (exit 2, docs/cli.md) found before connecting, with the new
// password's stdin given explicitly or by default.
func TestUserSetStdinTwiceIsUsage(t *testing.T) {
	for _, extra := range [][]string{nil, {"--password-file", "-"}} {
		args := append([]string{"set", "a", "--bootstrap", "127.0.0.1:1", "--sasl-mechanism", "PLAIN",
			"--sasl-username", "x", "--sasl-password-file", "-"}, extra...)
		err := users(env{stdin: strings.NewReader("pw\n"), stdout: io.Discard, stderr: io.Discard}, "user", args)
		if code := exitCode(err, io.Discard); code != exitUsage || err == nil || !strings.Contains(err.Error(), "cannot hold both") {
			t.Errorf("user %q: exit %d (%v), want %d and the reason", args, code, err, exitUsage)
		}
	}
}
