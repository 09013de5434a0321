// Package examples_test builds the example programs and runs each briefly
// against an in-process cohort node.
package examples_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cohort-dev/cohort/internal/testbin"
	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/member/membertest"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/clientconfig"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/memstore"
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
	t.Run("kgobalancer copartition", func(t *testing.T) {
		outs := runAll(t, build(t, "kgobalancer"), []string{"k1", "k2"}, append(common,
			"-group", "kgob-copartition", "-assignor", "copartition", "-topics", "orders,payments")...)
		checkCopartitioned(t, outs, []string{"orders", "payments"}, 6)
	})
	t.Run("kgobalancer cooperative-sticky", func(t *testing.T) {
		outs := runAll(t, build(t, "kgobalancer"), []string{"k1", "k2"}, append(common,
			"-group", "kgob-cooperative", "-assignor", "cooperative-sticky", "-topics", "events")...)
		checkCooperative(t, outs)
	})
}

// ownershipLine is one line the kgobalancer example prints from a kgo
// callback.
type ownershipLine struct {
	what       string // assigned, revoked or lost
	generation string
	partitions []string // topic/partition
}

var ownershipRE = regexp.MustCompile(`msg=(assigned|revoked|lost) .*generation=(\d+) partitions=(\S*)`)

func ownershipLines(out string) []ownershipLine {
	var lines []ownershipLine
	for _, m := range ownershipRE.FindAllStringSubmatch(out, -1) {
		l := ownershipLine{what: m[1], generation: m[2]}
		if ps := strings.Trim(m[3], `"`); ps != "" {
			l.partitions = strings.Split(ps, ",")
		}
		lines = append(lines, l)
	}
	return lines
}

// checkCopartitioned: in a generation both members were assigned in (an
// eager assignor reports the whole assignment), they split every partition
// of the topics between them, and each member has partition p of every
// topic or of none.
func checkCopartitioned(t *testing.T, outs []string, topics []string, partitions int) {
	t.Helper()
	byGen := map[string]map[int][]string{} // generation -> consumer -> partitions
	for i, o := range outs {
		if !strings.Contains(o, "consumer: done") {
			t.Fatalf("no clean exit:\n%s", o)
		}
		for _, l := range ownershipLines(o) {
			if l.what == "assigned" {
				if byGen[l.generation] == nil {
					byGen[l.generation] = map[int][]string{}
				}
				byGen[l.generation][i] = l.partitions
			}
		}
	}
	shared := false
	for gen, members := range byGen {
		if len(members) != len(outs) {
			continue
		}
		shared = true
		owner := map[string]int{}
		for i, ps := range members {
			if len(ps) == 0 {
				t.Errorf("generation %s: consumer %d got nothing", gen, i)
			}
			idx := map[string]map[string]bool{}
			for _, tp := range ps {
				if o, dup := owner[tp]; dup {
					t.Errorf("generation %s: %s assigned to consumers %d and %d", gen, tp, o, i)
				}
				owner[tp] = i
				topic, p, _ := strings.Cut(tp, "/")
				if idx[topic] == nil {
					idx[topic] = map[string]bool{}
				}
				idx[topic][p] = true
			}
			for _, tp := range topics[1:] {
				if !maps.Equal(idx[tp], idx[topics[0]]) {
					t.Errorf("generation %s: consumer %d has %s %v but %s %v", gen, i, topics[0], idx[topics[0]], tp, idx[tp])
				}
			}
		}
		if len(owner) != len(topics)*partitions {
			t.Errorf("generation %s: %d partitions assigned, want %d", gen, len(owner), len(topics)*partitions)
		}
	}
	if !shared {
		t.Fatalf("no generation assigned both consumers:\n%s", strings.Join(outs, "\n"))
	}
}

// checkCooperative: each consumer owned partitions, and none gave up all
// it owned to be handed some back (what an eager rebalance does): under
// KIP-429 a consumer keeps what it is still assigned.
func checkCooperative(t *testing.T, outs []string) {
	t.Helper()
	for _, o := range outs {
		if !strings.Contains(o, "consumer: done") {
			t.Fatalf("no clean exit:\n%s", o)
		}
		held := map[string]bool{}
		owned, emptied := false, false
		for _, l := range ownershipLines(o) {
			switch l.what {
			case "assigned":
				if emptied && len(l.partitions) > 0 {
					t.Fatalf("a consumer gave up all its partitions and was then assigned again:\n%s", o)
				}
				for _, tp := range l.partitions {
					held[tp] = true
					owned = true
				}
			case "revoked":
				for _, tp := range l.partitions {
					delete(held, tp)
				}
				emptied = owned && len(held) == 0
			case "lost":
				t.Fatalf("partitions lost:\n%s", o)
			}
		}
		if !owned {
			t.Fatalf("consumer never owned a partition:\n%s", o)
		}
	}
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

// TestExamplesStopWhenRefused: an example whose credentials the server
// refuses exits with status 1 and says why, without the password. The
// member stops for good on SASL_AUTHENTICATION_FAILED, but the examples
// waited only for a signal or -run-for, so each one sat there, its
// candidate, pool or group stopped, until it was killed.
func TestExamplesStopWhenRefused(t *testing.T) {
	testwait.WallClock(t, "the examples as processes against a node with SASL")
	cfg := membertest.CohortConfig(t, "", memstore.New())
	cfg.Listeners = []server.Listener{{Protocol: server.ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}
	cfg.Security = &node.SecurityConfig{Mechanisms: []string{sasl.ScramSHA256}, BootstrapUser: "app",
		BootstrapPassword: "app-secret-1", SuperUsers: []string{"User:app"}, FailedAuthDelay: time.Millisecond}
	addr := membertest.StartNode(t, cfg).Addr()
	const wrong = "wrong-pw-4c9e"
	t.Setenv(clientconfig.PasswordEnv, wrong)
	var wg sync.WaitGroup
	for _, ex := range []string{"election", "workers", "consumer"} {
		bin := build(t, ex)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var buf bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, "-addr", addr, "-session-timeout", "1s",
				"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "app")
			cmd.Stdout, cmd.Stderr = &buf, &buf
			err := cmd.Run()
			out := buf.String()
			var ee *exec.ExitError
			switch {
			case ctx.Err() != nil:
				t.Errorf("%s still running after 20s with a refused password:\n%s", ex, out)
			case !errors.As(err, &ee) || ee.ExitCode() != 1:
				t.Errorf("%s: %v, want exit status 1:\n%s", ex, err, out)
			case !strings.Contains(out, "stopped") || !strings.Contains(out, "SASL_AUTHENTICATION_FAILED"):
				t.Errorf("%s does not say it stopped on SASL_AUTHENTICATION_FAILED:\n%s", ex, out)
			case strings.Contains(out, wrong):
				t.Errorf("%s logs the password:\n%s", ex, out)
			}
		}()
	}
	wg.Wait()
}
