package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/disk"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "0s",
		100 * time.Millisecond:  "100ms",
		3 * time.Second:         "3s",
		10 * time.Minute:        "10m",
		30 * time.Minute:        "30m",
		90 * time.Minute:        "1h30m",
		168 * time.Hour:         "168h",
		time.Hour + time.Second: "1h0m1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(shortDuration(d)); err != nil || back != d {
			t.Errorf("%q does not parse back to %v: %v, %v", shortDuration(d), d, back, err)
		}
	}
}

// TestServeUsage: -h names each flag's type, prints durations short, and
// gives every flag a description and its environment variable.
func TestServeUsage(t *testing.T) {
	s := newServeFlags()
	var out bytes.Buffer
	s.usage(&out)
	help := out.String()
	for _, want := range []string{
		"--min-session-timeout duration", "--max-session-timeout duration", "--initial-rebalance-delay duration",
		"--offsets-retention duration", "--offsets-retention-check-interval duration", "--lease-ttl duration",
		"--sasl-session-lifetime duration", "--failed-auth-delay duration",
		"--node-id int", "--group-max-size int", "--max-request-bytes int", "--partitions int",
		"--data-dir string", "default 30m,", "default 168h,", "default 100ms,", "default \"./data\",",
		"env COHORT_OFFSETS_RETENTION_CHECK_INTERVAL",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("serve -h lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`\d+[hm]0[ms]`).FindString(help); m != "" {
		t.Errorf("serve -h prints a long duration %q", m)
	}
	n := 0
	s.fs.VisitAll(func(f *flag.Flag) {
		n++
		if strings.TrimSpace(f.Usage) == "" {
			t.Errorf("--%s has no description", f.Name)
		}
		if !strings.Contains(help, "--"+f.Name+"\n") && !strings.Contains(help, "--"+f.Name+" ") {
			t.Errorf("serve -h does not list --%s", f.Name)
		}
	})
	if n != len(s.order)-strings.Count(strings.Join(s.order, "\n"), "#") {
		t.Errorf("%d flags, %d listed in order", n, len(s.order))
	}
}

// TestServeFlagParsing: the environment, then the command line; typed
// values with their ranges.
func TestServeFlagParsing(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	s := newServeFlags()
	err := s.parse([]string{"--data-dir", "/from-flag", "--partitions", "7"},
		env("COHORT_DATA_DIR", "/from-env", "COHORT_MAX_SESSION_TIMEOUT", "1h", "COHORT_AUTHORIZER", "true"))
	if err != nil {
		t.Fatal(err)
	}
	if s.dataDir != "/from-flag" || s.maxSession != time.Hour || !s.authorizer || s.partitions != 7 {
		t.Fatalf("data-dir %q max-session %v authorizer %v partitions %d", s.dataDir, s.maxSession, s.authorizer, s.partitions)
	}
	for _, c := range []struct {
		args []string
		env  []string
		want string // in the error
	}{
		{[]string{"--partitions", "x"}, nil, "partitions"},
		{[]string{"--partitions", "0"}, nil, "--partitions 0"},
		{[]string{"--partitions", "40000"}, nil, "--partitions 40000"},
		// Their own ranges, not the generic one from 0 (0 is refused).
		{[]string{"--partitions", "-3"}, nil, "--partitions -3: want 1 to 32767"},
		{[]string{"--max-request-bytes", "-1"}, nil, "--max-request-bytes -1: want 1 to 2147483647"},
		{[]string{"--max-request-bytes", "0"}, nil, "--max-request-bytes 0: want 1 to 2147483647"},
		{[]string{"--node-id", "-1"}, nil, "--node-id -1"},
		{[]string{"--initial-rebalance-delay", "-3s"}, nil, "--initial-rebalance-delay -3s"},
		{[]string{"--offsets-retention", "0"}, nil, "--offsets-retention 0: want a positive duration"},
		{nil, []string{"COHORT_OFFSETS_RETENTION", "0s"}, "--offsets-retention 0: want a positive duration"},
		{[]string{"--min-session-timeout", "0", "--max-session-timeout", "0"}, nil, "--max-session-timeout 0: want a positive duration"},
		{[]string{"--min-session-timeout", "1h"}, nil, "--min-session-timeout 1h is above --max-session-timeout 30m"},
		{[]string{"extra"}, nil, "unexpected arguments"},
		// As the other commands name an unknown flag, with the nearest
		// one (it was the flag package's "flag provided but not
		// defined: -lisen").
		{[]string{"--lisen", "127.0.0.1:1"}, nil, "serve: --lisen is not one of its flags (did you mean --listen? cohort serve -h lists them)"},
		{[]string{"--frobnicate"}, nil, "serve: --frobnicate is not one of its flags (cohort serve -h lists them)"},
		{nil, []string{"COHORT_MAX_SESSION_TIMEOUT", "7d"}, `$COHORT_MAX_SESSION_TIMEOUT "7d": want a duration`},
		{nil, []string{"COHORT_GROUP_MAX_SIZE", "many"}, `$COHORT_GROUP_MAX_SIZE "many": want an integer`},
		{[]string{"--consumer-session-timeout", "5s"}, nil, "--consumer-session-timeout 5s must be above --consumer-heartbeat-interval 5s"},
		{[]string{"--consumer-heartbeat-interval", "1m"}, nil, "--consumer-session-timeout 45s must be above --consumer-heartbeat-interval 1m"},
		{[]string{"--consumer-heartbeat-interval", "0s"}, nil, "must be positive"},
		// The heartbeat answer carries the interval as int32 milliseconds:
		// 1000h went to members as -694967296.
		{[]string{"--consumer-heartbeat-interval", "1000h", "--consumer-session-timeout", "2000h"}, nil,
			"--consumer-heartbeat-interval 1000h: want at most 596h31m23.647s"},
		{[]string{"--consumer-assignors", "uniform,sticky"}, nil, `unknown assignor "sticky": want some of uniform, range`},
		{[]string{"--consumer-assignors", ""}, nil, `unknown assignor ""`},
		{[]string{"--consumer-assignors", "range,Range"}, nil, "range is named twice"},
		{[]string{"--consumer-group-max-size", "-1"}, nil, "--consumer-group-max-size -1"},
		{[]string{"--consumer-assignment-interval", "-1s"}, nil, "--consumer-assignment-interval -1s: want a non-negative duration"},
		{[]string{"--consumer-migration-policy", "sideways"}, nil, `--consumer-migration-policy "sideways": want bidirectional, upgrade, downgrade or disabled`},
		{nil, []string{"COHORT_CONSUMER_SESSION_TIMEOUT", "2s", "COHORT_CONSUMER_HEARTBEAT_INTERVAL", "3s"}, "--consumer-session-timeout 2s must be above"},
		{[]string{"--log-format", "xml"}, nil, `--log-format "xml": want text or json`},
		{[]string{"--max-connections-per-ip", "-1"}, nil, "--max-connections-per-ip -1: want an integer from 0"},
		{[]string{"--log-level", "loud"}, nil, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"--max-inflight-request-bytes", "-1"}, nil, "--max-inflight-request-bytes -1: want an integer from 0"},
		{[]string{"--etcd-compaction-interval", "30s"}, nil, "--etcd-compaction-interval 30s: want 0 (never) or at least 1m"},
		{[]string{"--etcd-compaction-interval", "-5m"}, nil, "--etcd-compaction-interval -5m"},
	} {
		err := newServeFlags().parse(c.args, env(c.env...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("args %q env %q: error %v, want one containing %q", c.args, c.env, err, c.want)
		}
	}
}

// TestServeConsumerHeartbeatIntervalFitsTheAnswer: a ConsumerGroupHeartbeat
// answer carries the interval as int32 milliseconds, and the session
// timeout, above it, is bounded as Kafka's int config
// group.consumer.session.timeout.ms is (2^31-1 ms, maxFlagDuration): the
// largest interval below the largest session timeout is accepted and
// reaches group.Config; 2^31 ms is refused before the node starts, as is a
// session timeout one millisecond above its bound.
func TestServeConsumerHeartbeatIntervalFitsTheAnswer(t *testing.T) {
	most := time.Duration(math.MaxInt32) * time.Millisecond
	noEnv := func(string) (string, bool) { return "", false }
	s := newServeFlags()
	err := s.parse([]string{"--consumer-heartbeat-interval", (most - time.Millisecond).String(), "--consumer-session-timeout", most.String()}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.groupConfig().ConsumerHeartbeatInterval; got != most-time.Millisecond {
		t.Fatalf("heartbeat interval %v, want %v", got, most-time.Millisecond)
	}
	err = newServeFlags().parse([]string{"--consumer-heartbeat-interval", (most + time.Millisecond).String(),
		"--consumer-session-timeout", "1000h"}, noEnv)
	if err == nil || !strings.Contains(err.Error(), "--consumer-heartbeat-interval") {
		t.Fatalf("an interval of 2^31 ms: %v, want an error naming --consumer-heartbeat-interval", err)
	}
	err = newServeFlags().parse([]string{"--consumer-session-timeout", (most + time.Millisecond).String()}, noEnv)
	if err == nil || !strings.Contains(err.Error(), "--consumer-session-timeout 596h31m23.648s: want at most 596h31m23.647s") {
		t.Fatalf("a session timeout of 2^31 ms: %v, want an error naming --consumer-session-timeout", err)
	}
}

// TestServeConsumerFlags: the consumer-protocol flags reach group.Config,
// their defaults are Kafka's, assignor names are kept in lower case in the
// order given, and a bad combination is a usage error (exit 2) on one line.
func TestServeConsumerFlags(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	s := newServeFlags()
	if err := s.parse(nil, noEnv); err != nil {
		t.Fatal(err)
	}
	cfg := s.groupConfig()
	if cfg.ConsumerSessionTimeout != 45*time.Second || cfg.ConsumerHeartbeatInterval != 5*time.Second ||
		!slices.Equal(cfg.ConsumerAssignors, []string{"uniform", "range"}) || cfg.ConsumerMaxSize != 0 ||
		cfg.ConsumerMigrationPolicy != group.MigrationBidirectional || cfg.ConsumerAssignmentInterval != time.Second {
		t.Fatalf("defaults: %+v", cfg)
	}
	s = newServeFlags()
	err := s.parse([]string{"--consumer-session-timeout", "10s", "--consumer-heartbeat-interval", "500ms",
		"--consumer-assignors", " Range , uniform", "--consumer-group-max-size", "7", "--consumer-migration-policy", "Upgrade",
		"--consumer-assignment-interval", "0s"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	cfg = s.groupConfig()
	if cfg.ConsumerSessionTimeout != 10*time.Second || cfg.ConsumerHeartbeatInterval != 500*time.Millisecond ||
		!slices.Equal(cfg.ConsumerAssignors, []string{"range", "uniform"}) || cfg.ConsumerMaxSize != 7 ||
		cfg.ConsumerMigrationPolicy != group.MigrationUpgrade || cfg.ConsumerAssignmentInterval != 0 {
		t.Fatalf("set: %+v", cfg)
	}
	c := cli{t: t}
	for _, args := range [][]string{
		{"serve", "--consumer-session-timeout", "1s", "--consumer-heartbeat-interval", "1s"},
		{"serve", "--consumer-assignors", "uniform,cooperative-sticky"},
	} {
		_, errOut, code := c.run(args...)
		if code != exitUsage || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "cohort: --consumer-") {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and one line about the flag", args, code, errOut)
		}
	}
}

// TestREADMEServeFlags compares the README's tables of serve flags (those
// headed "flag of `cohort serve`") with the flag set: every flag in exactly
// one row, no row naming a flag that does not exist, and each default that
// is not empty shown as -h shows it.
func TestREADMEServeFlags(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := newServeFlags()
	seen := map[string]int{}
	tables := 0
	inTable := false
	flagName := regexp.MustCompile("`--([a-z0-9-]+)`")
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| flag of `cohort serve` |") {
			inTable = true
			tables++
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Errorf("README row %q: want 3 cells", line)
			continue
		}
		var names []string
		for _, m := range flagName.FindAllStringSubmatch(cells[0], -1) {
			names = append(names, m[1])
		}
		defaults := strings.Split(strings.TrimSpace(cells[1]), ", ")
		if len(defaults) != 1 && len(defaults) != len(names) {
			t.Errorf("README row %q: %d defaults for %d flags", line, len(defaults), len(names))
			continue
		}
		for i, name := range names {
			seen[name]++
			f := s.fs.Lookup(name)
			if f == nil {
				t.Errorf("README lists --%s, which cohort serve does not have", name)
				continue
			}
			def := defaults[0]
			if len(defaults) > 1 {
				def = defaults[i]
			}
			if want := defaultText(f); want != "" && !strings.Contains(def, "`"+want+"`") {
				t.Errorf("README gives --%s the default %q, want `%s`", name, def, want)
			}
		}
	}
	if tables < 3 {
		t.Errorf("found %d tables of serve flags in the README, want 3 (node, security, cluster)", tables)
	}
	s.fs.VisitAll(func(f *flag.Flag) {
		if seen[f.Name] != 1 {
			t.Errorf("--%s is in %d rows of the README's flag tables, want 1", f.Name, seen[f.Name])
		}
	})
}

// TestServeReadOnlyDataDir: a data directory cohort may not write in is
// reported as such, not as one locked by another process. Root ignores
// permission bits, so the test skips there (it is probed, not assumed);
// store/disk's TestLockErrorKinds covers the classification everywhere.
func TestServeReadOnlyDataDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	if f, err := os.Create(filepath.Join(dir, "probe")); err == nil {
		f.Close()
		t.Skipf("this process writes in a 0555 directory anyway (euid %d): permission bits cannot be tested here", os.Geteuid())
	}
	err := serve([]string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "error"})
	if err == nil {
		t.Fatal("serve on a read-only data directory started")
	}
	msg := err.Error()
	if strings.Contains(msg, "another cohort process") || !strings.Contains(msg, "not writable") || !strings.Contains(msg, dir) {
		t.Fatalf("error %q: want 'not writable' naming %s, and no mention of another process", msg, dir)
	}
}

// TestServeListenInUse: when the listen address is taken, serve fails
// naming it and creates no data directory.
func TestServeListenInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := filepath.Join(t.TempDir(), "data")
	err = serve([]string{"--listen", taken.Addr().String(), "--data-dir", dir, "--log-level", "error"})
	if err == nil || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Fatalf("serve on a taken address: %v, want an error naming %s", err, taken.Addr())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data directory after the failed start: %v; want none", err)
	}
}

// TestNewLogger: --log-format json writes one JSON object a line with the
// level, message and attributes; text writes slog's key=value lines; both
// drop what is below --log-level.
func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("backup written", "dir", "/b/cohort-1", "n", 3, "duration", 58*time.Millisecond)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("json log %q: %v", buf.String(), err)
	}
	if got["level"] != "INFO" || got["msg"] != "backup written" || got["dir"] != "/b/cohort-1" || got["n"] != 3.0 {
		t.Errorf("json log %v", got)
	}
	if got["duration"] != "58ms" { // not 58000000 (nanoseconds)
		t.Errorf("json log: duration %v, want \"58ms\"", got["duration"])
	}
	buf.Reset()
	log, err = newLogger(&buf, "text", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("slow", "ms", 5, "took", 90*time.Second)
	if s := buf.String(); !strings.Contains(s, "level=WARN msg=slow ms=5 took=1m30s") || strings.Contains(s, "hidden") {
		t.Errorf("text log %q", s)
	}
}

// TestServeEtcdUser: the etcd user's password comes from a file or
// COHORT_ETCD_PASSWORD, never a flag; serve refuses half a credential, a
// password given twice, and, against an etcd with authentication, a wrong
// password, saying so without repeating it.
func TestServeEtcdUser(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ec.EnableAuth(t, "root-pass", "/cli/", map[string]string{"cohort": "s3cret-etcd"})
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, wrong, empty := file("good", "s3cret-etcd\n"), file("wrong", "wr0ng-etcd\r\nsecond line\n"), file("empty", "\n")

	for _, tc := range []struct {
		name string
		env  string // COHORT_ETCD_PASSWORD, "-" unset
		args []string
		want string
	}{
		{"user without password", "-", []string{"--etcd-user", "cohort"}, "set its password in --etcd-password-file or the environment variable COHORT_ETCD_PASSWORD"},
		{"password without user", "-", []string{"--etcd-password-file", good}, "needs --etcd-user"},
		{"env password without user", "s3cret-etcd", nil, "needs --etcd-user"},
		{"password twice", "s3cret-etcd", []string{"--etcd-user", "cohort", "--etcd-password-file", good}, "both set"},
		{"empty file", "-", []string{"--etcd-user", "cohort", "--etcd-password-file", empty}, "the first line is empty"},
		{"wrong password from a file", "-", []string{"--etcd-user", "cohort", "--etcd-password-file", wrong}, `the etcd user "cohort" or its password is wrong`},
		{"wrong password from the environment", "wr0ng-etcd", []string{"--etcd-user", "cohort"}, `the etcd user "cohort" or its password is wrong`},
		{"no user", "-", nil, "give it an etcd user: --etcd-user, with the password in --etcd-password-file or COHORT_ETCD_PASSWORD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env == "-" {
				t.Setenv("COHORT_ETCD_PASSWORD", "")
				os.Unsetenv("COHORT_ETCD_PASSWORD")
			} else {
				t.Setenv("COHORT_ETCD_PASSWORD", tc.env)
			}
			args := append([]string{"--listen", "127.0.0.1:0", "--log-level", "error", "--etcd", strings.Join(ec.Endpoints(), ","),
				"--etcd-prefix", "/cli/"}, tc.args...)
			err := serve(args)
			if err == nil {
				t.Fatal("serve started")
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "s3cret") || strings.Contains(msg, "wr0ng") {
				t.Fatalf("error %q: want %q, and no password", msg, tc.want)
			}
		})
	}
	t.Run("password file", func(t *testing.T) {
		t.Setenv("COHORT_ETCD_PASSWORD", "")
		os.Unsetenv("COHORT_ETCD_PASSWORD")
		if pw, err := etcdPassword("cohort", good); err != nil || pw != "s3cret-etcd" {
			t.Fatalf("etcdPassword: %q %v", pw, err)
		}
		if pw, err := etcdPassword("cohort", wrong); err != nil || pw != "wr0ng-etcd" {
			t.Fatalf("etcdPassword of a CRLF file: %q %v", pw, err)
		}
		// An empty variable (a unit file's placeholder) counts as unset.
		t.Setenv("COHORT_ETCD_PASSWORD", "")
		if pw, err := etcdPassword("cohort", good); err != nil || pw != "s3cret-etcd" {
			t.Fatalf("etcdPassword with an empty COHORT_ETCD_PASSWORD: %q %v", pw, err)
		}
	})
}

// TestServeClusterOnlyNeedsEtcd: a cluster-mode setting given without
// --etcd, on the command line or through its environment variable, is a
// usage error (exit 2) naming each such setting, never its value; a node
// on --data-dir would ignore it (even a --lease-ttl that cluster mode
// refuses). An empty variable counts as unset.
func TestServeClusterOnlyNeedsEtcd(t *testing.T) {
	t.Setenv("COHORT_ETCD_PASSWORD", "")
	os.Unsetenv("COHORT_ETCD_PASSWORD")
	data := t.TempDir()
	for _, c := range []struct {
		args  []string
		env   []string // name, value pairs
		names []string // in the error
	}{
		{[]string{"--lease-ttl", "1s"}, nil, []string{"--lease-ttl"}},
		{[]string{"--lease-ttl", "10s"}, nil, []string{"--lease-ttl"}},
		{[]string{"--rack", "r1", "--etcd-compaction-interval", "10m"}, nil, []string{"--etcd-compaction-interval", "--rack"}},
		{[]string{"--etcd-prefix", "/x/"}, nil, []string{"--etcd-prefix"}},
		{nil, []string{"COHORT_ETCD_PREFIX", "/x/"}, []string{"$COHORT_ETCD_PREFIX"}},
		{nil, []string{"COHORT_ETCD_PASSWORD", "s3cret-etcd"}, []string{"$COHORT_ETCD_PASSWORD"}},
		{[]string{"--etcd-ca", "/ca.pem", "--etcd-user", "bob"}, []string{"COHORT_RACK", "r1"}, []string{"--etcd-ca", "--etcd-user", "$COHORT_RACK"}},
	} {
		t.Run(strings.Join(append(slices.Clone(c.args), c.env...), " "), func(t *testing.T) {
			for i := 0; i+1 < len(c.env); i += 2 {
				t.Setenv(c.env[i], c.env[i+1])
			}
			// An empty variable (a shared environment file's
			// placeholder) is not a setting given.
			t.Setenv("COHORT_ETCD_KEY", "")
			args := append([]string{"--listen", "127.0.0.1:0", "--log-level", "error", "--data-dir", filepath.Join(data, "d")}, c.args...)
			done := make(chan error, 1)
			go func() { done <- serve(args) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("serve %q started (it runs until the test process ends)", c.args)
			}
			if code := exitCode(err, io.Discard); code != exitUsage {
				t.Fatalf("exit %d (%v), want %d", code, err, exitUsage)
			}
			msg := err.Error()
			if !strings.Contains(msg, "without --etcd") || strings.Contains(msg, "s3cret") || strings.Contains(msg, "ETCD_KEY") {
				t.Errorf("error %q", msg)
			}
			for _, n := range c.names {
				if !strings.Contains(msg, n) {
					t.Errorf("error %q does not name %s", msg, n)
				}
			}
		})
	}
	// With --etcd they are read (here refused, before connecting, for
	// the lease TTL cluster mode does not take).
	err := serve([]string{"--listen", "127.0.0.1:0", "--log-level", "error", "--etcd", "127.0.0.1:1", "--lease-ttl", "1s"})
	if err == nil || !strings.Contains(err.Error(), "--lease-ttl 1s: want whole seconds") {
		t.Errorf("--etcd --lease-ttl 1s: %v", err)
	}
}

// TestServeBootstrapPasswordNeedsUser: COHORT_BOOTSTRAP_PASSWORD without
// --bootstrap-user is a usage error (exit 2) naming the missing flag and
// not the value, as --bootstrap-user without the password is; an empty
// variable counts as unset.
func TestServeBootstrapPasswordNeedsUser(t *testing.T) {
	t.Setenv("COHORT_BOOTSTRAP_PASSWORD", "s3cret-bootstrap")
	var sec node.SecurityConfig
	err := securityFlags(&sec, "", "", "", "none", "", "", "")
	if code := exitCode(err, io.Discard); code != exitUsage {
		t.Fatalf("COHORT_BOOTSTRAP_PASSWORD without --bootstrap-user: exit %d (%v), want %d", code, err, exitUsage)
	}
	if msg := err.Error(); !strings.Contains(msg, "--bootstrap-user") || strings.Contains(msg, "s3cret") {
		t.Errorf("error %q: want one naming --bootstrap-user, without the password", msg)
	}
	// The whole command refuses before it opens anything.
	err = serve([]string{"--listen", "127.0.0.1:0", "--log-level", "error", "--data-dir", filepath.Join(t.TempDir(), "d")})
	if code := exitCode(err, io.Discard); code != exitUsage {
		t.Fatalf("serve: exit %d (%v), want %d", code, err, exitUsage)
	}

	sec = node.SecurityConfig{BootstrapUser: "admin"}
	if err := securityFlags(&sec, "", "", "", "none", "", "", ""); err != nil || sec.BootstrapPassword != "s3cret-bootstrap" {
		t.Errorf("with --bootstrap-user: %v", err)
	}
	t.Setenv("COHORT_BOOTSTRAP_PASSWORD", "")
	sec = node.SecurityConfig{}
	if err := securityFlags(&sec, "", "", "", "none", "", "", ""); err != nil {
		t.Errorf("an empty COHORT_BOOTSTRAP_PASSWORD: %v", err)
	}
}

// TestServeSuperUsers: --super-users is separated by ';' as Kafka's
// super.users is; a principal may hold commas (a certificate's DN), but a
// comma before a second "User:" is refused instead of making one principal
// named "a,User:b".
func TestServeSuperUsers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  string
	}{
		{"User:admin;User:ops", []string{"User:admin", "User:ops"}, ""},
		{" User:CN=app,OU=team ; User:x ", []string{"User:CN=app,OU=team", "User:x"}, ""},
		{"User:admin,User:bob", nil, `"User:admin,User:bob" holds two principals: separate them with ';'`},
		{"admin", nil, `"admin" is not a principal`},
	} {
		var sec node.SecurityConfig
		err := securityFlags(&sec, "", "", "", "none", "", "", c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one containing %q", c.in, err, c.err)
		case c.err == "" && (err != nil || !slices.Equal(sec.SuperUsers, c.want)):
			t.Errorf("%q: %q, %v; want %q", c.in, sec.SuperUsers, err, c.want)
		}
	}
}

// TestServeBenchUsageExit2: a malformed serve or bench flag, or flags that
// do not go together, exit 2 as docs/cli.md's exit-code table says (they
// exited 1); what is wrong outside the flags (a certificate file that
// cannot be read, a port in use) still exits 1.
func TestServeBenchUsageExit2(t *testing.T) {
	t.Setenv("COHORT_ETCD_PASSWORD", "")
	os.Unsetenv("COHORT_ETCD_PASSWORD")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	data := t.TempDir()
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--tls-client-auth", "bogus", "--tls-cert-file", "/x", "--tls-key-file", "/y"}, exitUsage},
		{[]string{"--tls-client-auth", "required", "--tls-cert-file", "/x", "--tls-key-file", "/y"}, exitUsage},
		{[]string{"--tls-client-ca-file", "/ca", "--tls-cert-file", "/x", "--tls-key-file", "/y"}, exitUsage},
		{[]string{"--tls-cert-file", "/x"}, exitUsage},
		{[]string{"--tls-principal-rules", "RULE:bogus"}, exitUsage},
		{[]string{"--super-users", "admin"}, exitUsage},
		{[]string{"--listeners", "FOO://127.0.0.1:1"}, exitUsage},
		{[]string{"--listeners", "PLAINTEXT://127.0.0.1:1", "--listen", "127.0.0.1:2"}, exitUsage},
		{[]string{"--listen", "127.0.0.1:1", "--etcd-user", "bob"}, exitUsage},
		{[]string{"--etcd", "127.0.0.1:1", "--lease-ttl", "1500ms"}, exitUsage},
		{[]string{"--etcd", "127.0.0.1:1", "--etcd-user", "bob"}, exitUsage}, // no password anywhere
		// A client certificate without its key, or the key alone, as
		// --tls-cert-file without --tls-key-file (they exited 1).
		{[]string{"--etcd", "127.0.0.1:1", "--etcd-cert", "/x"}, exitUsage},
		{[]string{"--etcd", "127.0.0.1:1", "--etcd-key", "/y"}, exitUsage},
		// TLS files with a plain-text endpoint, and no endpoint (exit 1).
		{[]string{"--etcd", "http://127.0.0.1:1", "--etcd-ca", "/x"}, exitUsage},
		{[]string{"--etcd", " , "}, exitUsage},
		{[]string{"--listen", "127.0.0.1:0", "--offsets-retention-check-interval", "0"}, exitUsage},
		{[]string{"--listen", "127.0.0.1:0", "--backup-dir", filepath.Join(data, "d", "backups")}, exitUsage},
		// Found by the node before it opens anything (they exited 1).
		{[]string{"--listeners", "SASL_SSL://127.0.0.1:0"}, exitUsage},                                   // no certificate
		{[]string{"--listen", "0.0.0.0:0"}, exitUsage},                                                   // authenticates no one (not bound)
		{[]string{"--listen", "127.0.0.1:0", "--metrics-auth", "--http-listen", "0.0.0.0:0"}, exitUsage}, // password over plain HTTP (not bound)
		{[]string{"--listen", "127.0.0.1:0", "--http-tls", "--http-listen", "127.0.0.1:0"}, exitUsage},   // no certificate
		// No authorizer, no super user: no one could ever scrape.
		{[]string{"--listen", "127.0.0.1:0", "--metrics-auth", "--http-listen", "127.0.0.1:0"}, exitUsage},
		{[]string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-mechanisms", "GSSAPI"}, exitUsage},
		{[]string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-mechanisms", "OAUTHBEARER"}, exitUsage}, // no --oauth-jwks-file
		{[]string{"--listen", "127.0.0.1:0", "--advertised-listeners", "SSL://h:1"}, exitUsage},
		// A malformed --advertise, as a malformed --advertised-listeners
		// entry (they exited 1, found by the node).
		{[]string{"--listen", "127.0.0.1:0", "--advertise", "no-port"}, exitUsage},
		{[]string{"--listen", "127.0.0.1:0", "--advertise", "h:99999"}, exitUsage},
		// An advertised host no client can connect to (they served).
		{[]string{"--listen", "127.0.0.1:0", "--advertise", "0.0.0.0:9092"}, exitUsage},
		{[]string{"--listen", "127.0.0.1:0", "--advertised-listeners", "PLAINTEXT://:9092"}, exitUsage},
		// Two addresses for one listener (the entry won, silently).
		{[]string{"--listen", "127.0.0.1:0", "--advertise", "a.example.com:1", "--advertised-listeners", "PLAINTEXT://b.example.com:2"}, exitUsage},
		// Two of the node's own listeners on one port (exit 1, "address
		// already in use", at the second bind).
		{[]string{"--listeners", "PLAINTEXT://127.0.0.1:19092,SASL_PLAINTEXT://127.0.0.1:19092"}, exitUsage},
		{[]string{"--listen", "127.0.0.1:19092", "--http-listen", "127.0.0.1:19092"}, exitUsage},
		// Not the flags: the files named cannot be read, the port is taken.
		{[]string{"--tls-cert-file", "/nonexistent/cert.pem", "--tls-key-file", "/nonexistent/key.pem"}, exitError},
		{[]string{"--listen", taken.Addr().String()}, exitError},
	} {
		args := append([]string{"--log-level", "error", "--data-dir", filepath.Join(data, "d")}, c.args...)
		done := make(chan error, 1)
		go func() { done <- serve(args) }()
		select {
		case err := <-done:
			if code := exitCode(err, io.Discard); code != c.want {
				t.Errorf("serve %q: exit %d, want %d", c.args, code, c.want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("serve %q started (it runs until the test process ends)", c.args)
		}
	}
	for _, args := range [][]string{
		{"--only", "bogus"},
		{"--client", "foo"},
		{"--heartbeat-members", "-1"},
		{"--duration", "0"},
		{"--round-timeout", "0s"},
		{"--groups", "20", "--heartbeat-members", "5"},
	} {
		// The address answers nothing: a check made after connecting
		// would exit 1.
		all := append([]string{"-q", "--bootstrap", "127.0.0.1:1"}, args...)
		if code := exitCode(bench(all), io.Discard); code != exitUsage {
			t.Errorf("bench %q: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestServeMinSessionTimeoutZero: --min-session-timeout 0 sets no lower
// bound, as group.min.session.timeout.ms=0 does in Kafka; a member may then
// join with a 1 s session (group.Config reads a zero minimum as the 6 s
// default, which refused it with INVALID_SESSION_TIMEOUT).
func TestServeMinSessionTimeoutZero(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	for _, c := range []struct {
		min  string
		want int16
	}{
		{"0", 79},  // MEMBER_ID_REQUIRED: admitted
		{"0s", 79}, // the same
		{"2s", 26}, // INVALID_SESSION_TIMEOUT: below the bound
	} {
		s := newServeFlags()
		if err := s.parse([]string{"--min-session-timeout", c.min}, noEnv); err != nil {
			t.Fatal(err)
		}
		sh := group.NewShard(s.groupConfig(), bytes.NewReader(make([]byte, 64)))
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 5
		req.Group, req.ProtocolType = "g", "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 1000, 1000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
		var out group.Output
		sh.JoinGroup(time.Unix(1000, 0), 1, group.Client{ID: "c"}, req, &out)
		if len(out.Replies) != 1 {
			t.Fatalf("--min-session-timeout %s: %d replies", c.min, len(out.Replies))
		}
		if got := out.Replies[0].Resp.(*kmsg.JoinGroupResponse).ErrorCode; got != c.want {
			t.Errorf("--min-session-timeout %s: JoinGroup with a 1s session answered %d, want %d", c.min, got, c.want)
		}
	}
}

// TestServeFailedAuthDelayZero: --failed-auth-delay 0 means no wait, as
// Kafka's connection.failed.authentication.delay.ms=0; it used to reach the
// node as its zero value, the 100ms default.
func TestServeFailedAuthDelayZero(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 100 * time.Millisecond},
		{[]string{"--failed-auth-delay", "0"}, 0},
		{[]string{"--failed-auth-delay", "0s"}, 0},
		{[]string{"--failed-auth-delay", "250ms"}, 250 * time.Millisecond},
	} {
		s := newServeFlags()
		if err := s.parse(c.args, noEnv); err != nil {
			t.Fatal(err)
		}
		if got := server.EffectiveFailedAuthDelay(s.failedAuthDelay()); got != c.want {
			t.Errorf("%q: failed authentications wait %v, want %v", c.args, got, c.want)
		}
	}
}

// TestServeListenAndListenersAsGiven: --listen and --listeners cannot both
// be given, and the refusal names each as it was set, a flag or its
// variable: an operator who typed only --listeners was told "--listen and
// --listeners" for a COHORT_LISTEN left in the environment. An empty
// COHORT_LISTEN (a placeholder, unset as the other empty variables) does
// not count against --listeners, and alone it is named rather than read as
// the listener "PLAINTEXT://".
func TestServeListenAndListenersAsGiven(t *testing.T) {
	data := filepath.Join(t.TempDir(), "d")
	for _, c := range []struct {
		name      string
		env       map[string]string
		args      []string
		want      []string // in the error
		forbidden string   // not in it
	}{
		{"empty COHORT_LISTEN and --listeners", map[string]string{"COHORT_LISTEN": ""},
			// Refused after the listeners parse, for the advertised one.
			[]string{"--listeners", "PLAINTEXT://127.0.0.1:0", "--advertised-listeners", "SSL://h:1"},
			[]string{"advertised listener SSL"}, "--listen "},
		{"COHORT_LISTEN and --listeners", map[string]string{"COHORT_LISTEN": "127.0.0.1:0"},
			[]string{"--listeners", "PLAINTEXT://127.0.0.1:0"}, []string{"$COHORT_LISTEN and --listeners: give one of them"}, ""},
		{"--listen and COHORT_LISTENERS", map[string]string{"COHORT_LISTENERS": "PLAINTEXT://127.0.0.1:0"},
			[]string{"--listen", "127.0.0.1:0"}, []string{"--listen and $COHORT_LISTENERS: give one of them"}, ""},
		{"empty COHORT_LISTEN alone", map[string]string{"COHORT_LISTEN": ""},
			nil, []string{"$COHORT_LISTEN is empty"}, "PLAINTEXT://"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			err := serve(append([]string{"--data-dir", data, "--log-level", "error"}, c.args...))
			if code := exitCode(err, io.Discard); code != exitUsage {
				t.Fatalf("exit %d (%v), want %d", code, err, exitUsage)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q, want it to contain %q", err, w)
				}
			}
			if c.forbidden != "" && strings.Contains(err.Error(), c.forbidden) {
				t.Errorf("error %q contains %q", err, c.forbidden)
			}
		})
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("data directory after refused starts: %v; want none", err)
	}
}

// TestServeEtcdWithStoreInDataDir: cluster mode keeps the state in etcd and
// never reads --data-dir. A node moved to cluster mode with the --data-dir
// of its embedded store still given started on etcd's state, and every
// group's committed offsets seemed lost (clients fell back to
// auto.offset.reset) while they sat unread in the directory. A --data-dir
// given with --etcd that holds a store is now refused before etcd is
// dialled, naming both; one without a store (a shared environment file's
// COHORT_DATA_DIR) is no reason to refuse.
func TestServeEtcdWithStoreInDataDir(t *testing.T) {
	dir := t.TempDir()
	st, err := disk.Open(disk.Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	// No etcd listens at 127.0.0.1:1: had the node got as far as dialling
	// it, the start would fail (exit 1) saying so.
	for _, args := range [][]string{
		{"--data-dir", dir},
		{"--data-dir", filepath.Join(dir, ".")},
	} {
		err = serve(append([]string{"--listen", "127.0.0.1:0", "--log-level", "error", "--etcd", "127.0.0.1:1"}, args...))
		if code := exitCode(err, io.Discard); code != exitUsage {
			t.Fatalf("%q: exit %d (%v), want %d", args, code, err, exitUsage)
		}
		for _, want := range []string{"--data-dir", dir, "--etcd"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %q does not name %q", args, err, want)
			}
		}
	}
	t.Setenv("COHORT_DATA_DIR", dir)
	err = serve([]string{"--listen", "127.0.0.1:0", "--log-level", "error", "--etcd", "127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "$COHORT_DATA_DIR") {
		t.Errorf("COHORT_DATA_DIR on a store with --etcd: %v, want a refusal naming the variable", err)
	}
	os.Unsetenv("COHORT_DATA_DIR")
	// Refused later, by the node's own check, before etcd is dialled.
	err = serve([]string{"--listen", "127.0.0.1:0", "--log-level", "error", "--etcd", "127.0.0.1:1",
		"--data-dir", filepath.Join(t.TempDir(), "none"), "--advertised-listeners", "SSL://h:1"})
	if err == nil || !strings.Contains(err.Error(), "advertised listener SSL") {
		t.Errorf("--data-dir holding no store with --etcd: %v, want it to get as far as the node's check", err)
	}
}
