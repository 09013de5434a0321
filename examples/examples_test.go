// Package examples_test builds the example programs and runs each briefly
// against an in-process cohort node.
package examples_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cohort-dev/cohort/internal/testbin"
	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/member/membertest"
	"github.com/cohort-dev/cohort/security/clientconfig"
)

func build(t *testing.T, pkg string) string {
	t.Helper()
	return testbin.Command(t, "github.com/cohort-dev/cohort/examples/"+pkg)
}

// runAll starts the binary once per name with args and returns each one's
// output after they exit (they stop themselves with -run-for).
func runAll(t *testing.T, bin string, names []string, args ...string) []string {
	t.Helper()
	outs := make([]string, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var buf bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, append([]string{"-name", n}, args...)...)
			cmd.Stdout, cmd.Stderr = &buf, &buf
			if err := cmd.Run(); err != nil {
				t.Errorf("%s %s: %v\n%s", bin, n, err, buf.String())
			}
			outs[i] = buf.String()
		}()
	}
	wg.Wait()
	return outs
}

func TestExamples(t *testing.T) {
	testwait.WallClock(t, "the examples as processes against a node")
	addr := membertest.StartCohort(t, nil).Addr()
	common := []string{"-addr", addr, "-session-timeout", "1s", "-run-for", "3s"}

	t.Run("election", func(t *testing.T) {
		outs := runAll(t, build(t, "election"), []string{"a", "b"}, common...)
		writers := 0
		for _, o := range outs {
			writers += strings.Count(o, "writer: active")
			if !strings.Contains(o, "candidate: done") {
				t.Fatalf("no clean exit:\n%s", o)
			}
		}
		if writers < 1 {
			t.Fatalf("no writer:\n%s", strings.Join(outs, "\n"))
		}
	})
	t.Run("workers", func(t *testing.T) {
		outs := runAll(t, build(t, "workers"), []string{"w1", "w2"}, append(common, "-resources", "6")...)
		for _, o := range outs {
			if !strings.Contains(o, "msg=start") || !strings.Contains(o, "worker: done") {
				t.Fatalf("worker did not run resources:\n%s", o)
			}
		}
	})
	t.Run("consumer", func(t *testing.T) {
		outs := runAll(t, build(t, "consumer"), []string{"c1", "c2"}, append(common, "-assignor", "cooperative-sticky")...)
		for _, o := range outs {
			if !strings.Contains(o, "msg=assigned") || !strings.Contains(o, "consumer: done") {
				t.Fatalf("consumer was not assigned:\n%s", o)
			}
			// The topic one of them created is not reported as a
			// refusal by the other.
			if strings.Contains(o, "TOPIC_ALREADY_EXISTS") || strings.Contains(o, "could not create") {
				t.Fatalf("an existing topic was reported:\n%s", o)
			}
		}
		if n := strings.Count(outs[0]+outs[1], "created topic"); n != 1 {
			t.Fatalf("%d consumers say they created the topic, want 1:\n%s\n%s", n, outs[0], outs[1])
		}
	})
}

// TestExamplesSASLSSL runs the examples against kfake with TLS and
// SCRAM-SHA-256: the security flags with the password from the
// environment, and a Kafka client properties file (--command-config).
func TestExamplesSASLSSL(t *testing.T) {
	testwait.WallClock(t, "the examples as processes against kfake over SASL/TLS")
	ca := testpki.NewCA(t, "examples-ca")
	pair := ca.Server(t, "kfake")
	addr := membertest.StartKfake(t, kfake.EnableSASL(),
		kfake.Superuser(clientconfig.MechanismSCRAMSHA256, "app", "app-pw"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair.TLS}, MinVersion: tls.VersionTLS12}))
	common := []string{"-addr", addr, "-session-timeout", "1s", "-run-for", "2s"}

	t.Run("election, flags and $COHORT_SASL_PASSWORD", func(t *testing.T) {
		t.Setenv(clientconfig.PasswordEnv, "app-pw")
		outs := runAll(t, build(t, "election"), []string{"a"}, append(common, "--tls", "--tls-ca-file", ca.CertFile,
			"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "app")...)
		if !strings.Contains(outs[0], "writer: active") {
			t.Fatalf("no writer over SASL_SSL:\n%s", outs[0])
		}
	})
	t.Run("consumer, command config", func(t *testing.T) {
		props := filepath.Join(t.TempDir(), "client.properties")
		content := "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nssl.truststore.type=PEM\n" +
			"ssl.truststore.location=" + ca.CertFile + "\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"app\" password=\"app-pw\";\n"
		if err := os.WriteFile(props, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		outs := runAll(t, build(t, "consumer"), []string{"c"}, append(common, "--command-config", props)...)
		if !strings.Contains(outs[0], "msg=assigned") {
			t.Fatalf("consumer was not assigned over SASL_SSL:\n%s", outs[0])
		}
	})
}
