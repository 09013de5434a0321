package main

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// boundCase is a command line (and environment) with a value out of its
// flag's bounds, and the start of the usage error naming the flag.
type boundCase struct {
	args []string
	env  []string // NAME, VALUE, ...
	msg  string
}

// TestServeFlagBounds: an absurd value of a cohort serve flag (a path of a
// megabyte, a duration of decades, a port past 65535, an empty required
// value, an address that is not host:port), given on the command line or in
// the environment, is a usage error (exit 2) naming the flag and what is
// wrong, without the long value, found before the node opens its listener
// or creates its store.
func TestServeFlagBounds(t *testing.T) {
	data := filepath.Join(t.TempDir(), "d")
	listen, httpListen := closedAddr(t), closedAddr(t)
	mib := strings.Repeat("x", 1<<20)
	long := strings.Repeat("x", 60000) // within the bound of a list
	cases := []boundCase{
		{args: []string{"--data-dir", mib}, msg: "--data-dir is 1048576 bytes long: want at most 4096 (a path)"},
		{args: []string{"--backup-dir", mib}, msg: "--backup-dir is 1048576 bytes long: want at most 4096 (a path)"},
		{args: []string{"--tls-cert-file", mib, "--tls-key-file", "k.pem"}, msg: "--tls-cert-file is 1048576 bytes long: want at most 4096"},
		{args: []string{"--oauth-jwks-file", mib}, msg: "--oauth-jwks-file is 1048576 bytes long"},
		{args: []string{"--etcd", "127.0.0.1:1", "--etcd-password-file", mib}, msg: "--etcd-password-file is 1048576 bytes long"},
		{args: []string{"--cluster-id", mib}, msg: "--cluster-id is 1048576 bytes long: want at most 1024 (one value)"},
		{args: []string{"--advertise", mib}, msg: "--advertise is 1048576 bytes long: want at most 1024"},
		{args: []string{"--oauth-issuer", mib}, msg: "--oauth-issuer is 1048576 bytes long"},
		{args: []string{"--etcd", "127.0.0.1:1", "--etcd-prefix", mib}, msg: "--etcd-prefix is 1048576 bytes long"},
		{args: []string{"--listeners", mib}, msg: "--listeners is 1048576 bytes long: want at most 65536 (a list)"},
		{args: []string{"--super-users", mib}, msg: "--super-users is 1048576 bytes long: want at most 65536 (a list)"},
		{args: []string{"--etcd", mib}, msg: "--etcd is 1048576 bytes long: want at most 65536 (a list)"},
		// Values the flag package could not parse, which it quoted whole.
		{args: []string{"--partitions", mib}, msg: "--partitions (a value of 1048576 bytes): want an integer"},
		{args: []string{"--connections-max-idle", mib}, msg: "--connections-max-idle (a value of 1048576 bytes): want a duration"},
		{env: []string{"COHORT_NODE_ID", mib}, msg: "$COHORT_NODE_ID (a value of 1048576 bytes): want an integer"},
		// Empty required values.
		{args: []string{"--cluster-id", ""}, msg: "--cluster-id is empty"},
		{args: []string{"--data-dir", ""}, msg: "--data-dir is empty: want the directory of the embedded store (or --etcd)"},
		{env: []string{"COHORT_CLUSTER_ID", ""}, msg: "$COHORT_CLUSTER_ID is empty"},
		{env: []string{"COHORT_DATA_DIR", mib}, msg: "$COHORT_DATA_DIR is 1048576 bytes long: want at most 4096"},
		// Durations: none above 2^31-1 ms, nor negative.
		{args: []string{"--connections-max-idle", "1000000000000000000ns"}, msg: "--connections-max-idle 277777h46m40s: want at most 596h31m23.647s"},
		{args: []string{"--max-session-timeout", "2562047h"}, msg: "--max-session-timeout 2562047h: want at most 596h31m23.647s"},
		{args: []string{"--initial-rebalance-delay", "1000h"}, msg: "--initial-rebalance-delay 1000h: want at most"},
		{args: []string{"--sasl-session-lifetime", "1000h"}, msg: "--sasl-session-lifetime 1000h: want at most"},
		{args: []string{"--failed-auth-delay", "1000h"}, msg: "--failed-auth-delay 1000h: want at most"},
		{args: []string{"--consumer-assignment-interval", "1000h"}, msg: "--consumer-assignment-interval 1000h: want at most"},
		{args: []string{"--offsets-retention-check-interval", "1000h"}, msg: "--offsets-retention-check-interval 1000h: want at most"},
		{args: []string{"--etcd", "127.0.0.1:1", "--lease-ttl", "1000h"}, msg: "--lease-ttl 1000h: want at most"},
		{args: []string{"--etcd", "127.0.0.1:1", "--etcd-compaction-interval", "1000h"}, msg: "--etcd-compaction-interval 1000h: want at most"},
		{env: []string{"COHORT_MIN_SESSION_TIMEOUT", "1000h"}, msg: "$COHORT_MIN_SESSION_TIMEOUT 1000h: want at most 596h31m23.647s"},
		{args: []string{"--min-session-timeout", "-1s"}, msg: "--min-session-timeout -1s: want a non-negative duration"},
		{args: []string{"--offsets-retention", "100000h"}, msg: "--offsets-retention 100000h: want at most 87600h"},
		{args: []string{"--rebalance-storm", "10/1000h"}, msg: `--rebalance-storm "10/1000h": want N at most 2147483647 and DURATION at most 596h31m23.647s`},
		{args: []string{"--rebalance-storm", "99999999999/5m"}, msg: `--rebalance-storm "99999999999/5m": want N at most`},
		// Addresses and sizes.
		{args: []string{"--listen", "127.0.0.1:99999"}, msg: `"PLAINTEXT://127.0.0.1:99999": bad port`},
		{args: []string{"--http-listen", "127.0.0.1:99999"}, msg: `--http-listen "127.0.0.1:99999": bad port: want 0 to 65535`},
		{args: []string{"--http-listen", "console"}, msg: `--http-listen "console": want host:port`},
		{args: []string{"--metrics-listen", "127.0.0.1"}, msg: `--metrics-listen "127.0.0.1": want host:port`},
		{args: []string{"--advertise", "h:99999"}, msg: `--advertise "h:99999": bad port`},
		{args: []string{"--heap-floor-mib", "2147483647"}, msg: "--heap-floor-mib 2147483647: want at most 1048576 (1 TiB)"},
		{args: []string{"--group-history", "1000000"}, msg: "--group-history 1000000: want at most 10000"},
		{args: []string{"--max-request-bytes", "1000000000000000000"}, msg: "--max-request-bytes 1000000000000000000: want 1 to 2147483647"},
		{args: []string{"--max-connections", "-1"}, msg: "--max-connections -1: want an integer from 0"},
		// Hosts: a DNS name holds 253 bytes, and an advertised host goes
		// to clients as a Kafka string.
		{args: []string{"--listeners", "PLAINTEXT://" + long + ":1"}, msg: "--listeners PLAINTEXT: a host of 60000 bytes: want at most 255"},
		{args: []string{"--advertised-listeners", "PLAINTEXT://" + long[:300] + ":1"}, msg: "--advertised-listeners PLAINTEXT: a host of 300 bytes"},
		{args: []string{"--advertise", long[:300] + ":1"}, msg: "--advertise: a host of 300 bytes: want at most 255"},
		{args: []string{"--etcd", "127.0.0.1:1," + long[:2000]}, msg: "--etcd: an endpoint of 2000 bytes: want at most 1024"},
		// Long values within their bound that an error further down
		// quotes: given by their length.
		{args: []string{"--super-users", long}, msg: "--super-users: (a value of 60000 bytes) is not a principal"},
		{args: []string{"--listeners", "PLAINTEXT://" + long}, msg: "address (a value of 60000 bytes): missing port"},
		{args: []string{"--tls-principal-rules", long}, msg: "invalid rule (a value of 60000 bytes)"},
		{args: []string{"--etcd", "http://" + long[:1000], "--etcd-ca", "ca.pem"}, msg: "write it https://(a value of 1000 bytes)"},
		{args: []string{"--sasl-mechanisms", long}, msg: "--sasl-mechanisms: a mechanism of 60000 bytes"},
		{args: []string{"--tls-client-auth", long[:1000], "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"}, msg: "--tls-client-auth (a value of 1000 bytes): want none"},
	}
	c := cli{t: t}
	// The store's directory comes from the environment, so that a case
	// may set it there too (the command line would win).
	t.Setenv("COHORT_DATA_DIR", data)
	for _, tc := range cases {
		for i := 0; i+1 < len(tc.env); i += 2 {
			t.Setenv(tc.env[i], tc.env[i+1])
		}
		args := []string{"serve", "--log-level", "error", "--http-listen", httpListen}
		if !slices.Contains(tc.args, "--listeners") { // which --listen may not go with
			args = append(args, "--listen", listen)
		}
		args = append(args, tc.args...)
		type result struct {
			errOut string
			code   int
		}
		done := make(chan result, 1)
		go func() {
			_, errOut, code := c.run(args...)
			done <- result{errOut, code}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("serve%s %s: started (it runs until the test process ends)", short(tc.args), short(tc.env))
		}
		for i := 0; i+1 < len(tc.env); i += 2 {
			os.Unsetenv(tc.env[i])
		}
		os.Setenv("COHORT_DATA_DIR", data)
		if r.code != exitUsage || !strings.Contains(r.errOut, tc.msg) {
			t.Errorf("serve%s %s: exit %d, stderr %.300q; want exit 2 and %q", short(tc.args), short(tc.env), r.code, r.errOut, tc.msg)
		}
		if len(r.errOut) > 1000 {
			t.Errorf("serve%s %s: a %d-byte message repeats the value", short(tc.args), short(tc.env), len(r.errOut))
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Fatalf("serve%s %s: the store was created: %v", short(tc.args), short(tc.env), err)
		}
		for _, addr := range []string{listen, httpListen} {
			// Still free: nothing was bound (nor left bound).
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("serve%s %s: %s was bound: %v", short(tc.args), short(tc.env), addr, err)
			}
			ln.Close()
		}
	}
}

// TestServeFlagBoundsFit: values at the bounds are accepted.
func TestServeFlagBoundsFit(t *testing.T) {
	most := maxFlagDuration.String()
	for _, args := range [][]string{
		{"--data-dir", strings.Repeat("d", maxPathBytes)},
		{"--cluster-id", strings.Repeat("c", maxValueBytes)},
		{"--super-users", strings.Repeat("User:a;", maxListBytes/7)},
		{"--connections-max-idle", most, "--max-session-timeout", most, "--sasl-session-lifetime", most,
			"--failed-auth-delay", most, "--initial-rebalance-delay", most, "--offsets-retention-check-interval", most},
		{"--offsets-retention", "87600h"},
		{"--rebalance-storm", "2147483647/" + most},
		{"--heap-floor-mib", "1048576", "--group-history", "10000"},
		{"--http-listen", "127.0.0.1:65535"},
		{"--etcd", "127.0.0.1:1", "--data-dir", ""},
	} {
		if err := newServeFlags().parse(args, func(string) (string, bool) { return "", false }); err != nil {
			t.Errorf("serve%s: %v", short(args), err)
		}
	}
}

// TestCLIFlagBounds: the other commands bound their flags as serve does:
// a path, list or value too long and a duration above 2^31-1 ms are usage
// errors naming the flag, before anything is sent.
func TestCLIFlagBounds(t *testing.T) {
	addr, accepted := countingListener(t)
	mib := strings.Repeat("x", 1<<20)
	wantRefused(t, addr, []usageCase{
		{[]string{"groups", "--timeout", "1000h"}, "groups: --timeout 1000h: want at most 596h31m23.647s"},
		{[]string{"groups", "--timeout", mib}, "--timeout (a value of 1048576 bytes): want a duration"},
		{[]string{"group", "describe", "g", "--tls", "--tls-ca-file", mib}, "--tls-ca-file is 1048576 bytes long: want at most 4096 (a path)"},
		{[]string{"group", "describe", "g", "--sasl-username", mib}, "--sasl-username is 1048576 bytes long: want at most 1024"},
		{[]string{"topics", "--command-config", mib}, "--command-config is 1048576 bytes long"},
		{[]string{"offsets", "reset", "g", "--from-file", mib}, "--from-file is 1048576 bytes long"},
		{[]string{"user", "set", "alice", "--password-file", mib}, "--password-file is 1048576 bytes long"},
		{[]string{"topic", "create", "t", "--partitions", mib}, "--partitions (a value of 1048576 bytes): want an integer"},
		{[]string{"store", "copy", "--from-data-dir", mib, "--to-etcd", "127.0.0.1:1"}, "--from-data-dir is 1048576 bytes long"},
		{[]string{"store", "copy", "--from-data-dir", "d", "--to-etcd", "127.0.0.1:1", "--timeout", "1000h"}, "--timeout 1000h: want at most"},
		{[]string{"store", "copy", "--from-data-dir", "d", "--to-etcd", "127.0.0.1:1," + mib[:2000]}, "--to-etcd: an endpoint of 2000 bytes: want at most 1024"},
		{[]string{"store", "copy", "--from-etcd", mib[:1025], "--to-data-dir", "d"}, "--from-etcd: an endpoint of 1025 bytes: want at most 1024"},
		{[]string{"bench", "-q", "--duration", "1000h"}, "bench: --duration 1000h: want at most"},
	})
	c := cli{t: t}
	for _, args := range [][]string{{"groups", "--bootstrap", mib}, {"offsets", "g", "--bootstrap", addr, "--data-bootstrap", mib}} {
		_, errOut, code := c.run(args...)
		if code != exitUsage || !strings.Contains(errOut, "is 1048576 bytes long: want at most 65536 (a list)") || len(errOut) > 1000 {
			t.Errorf("%s: exit %d, stderr %.300q; want exit 2 and the length", short(args), code, errOut)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections for refused command lines", n)
	}
}

// TestLongValueNotRepeated: a value within its bound but too long to
// repeat, quoted by an error that is no usage error (a file that cannot be
// opened), is given by its length, by serve as by the other commands.
func TestLongValueNotRepeated(t *testing.T) {
	addr, accepted := countingListener(t)
	path := "/" + strings.Repeat("x", 1000)
	c := cli{t: t}
	for _, args := range [][]string{
		{"serve", "--data-dir", filepath.Join(t.TempDir(), "d"), "--listen", closedAddr(t), "--tls-cert-file", path, "--tls-key-file", "k.pem"},
		{"groups", "--bootstrap", addr, "--tls", "--tls-ca-file", path},
	} {
		_, errOut, code := c.run(args...)
		if code != exitError || !strings.Contains(errOut, "(a value of 1001 bytes)") || strings.Contains(errOut, path[:100]) {
			t.Errorf("%s: exit %d, stderr %.300q; want exit 1 and the path's length, not the path", short(args), code, errOut)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections for a command whose CA file cannot be read", n)
	}
}

// TestPropertiesFileBounds: a setting of a Kafka client properties file
// (--command-config, --data-command-config) has the bound of the flag
// that would set it, checked before anything connects; it was read and
// failed later (exit 1), its whole path in the message.
func TestPropertiesFileBounds(t *testing.T) {
	longPath := "/" + strings.Repeat("x", maxPathBytes)
	ca := writeTemp(t, "ca.properties", "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location="+longPath+"\n")
	user := writeTemp(t, "user.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="`+strings.Repeat("u", 5000)+`" password="p";`+"\n")
	addr, accepted := countingListener(t)
	wantRefused(t, addr, []usageCase{
		{[]string{"topics", "--command-config", ca}, "--command-config: its setting for --tls-ca-file is 4097 bytes long: want at most 4096 (a path)"},
		{[]string{"groups", "--command-config", user}, "--command-config: its setting for --sasl-username is 5000 bytes long: want at most 1024"},
		{[]string{"bench", "-q", "--command-config", ca}, "--command-config: its setting for --tls-ca-file is 4097 bytes long"},
	})
	// The data cluster's file is read once cohort answered.
	c := cli{t: t}
	c.fails(exitUsage, []string{"offsets", "g", "--bootstrap", startNode(t, "127.0.0.1:0").Addr(), "--data-bootstrap", addr,
		"--data-command-config", ca}, "--data-command-config: its setting for --tls-ca-file is 4097 bytes long")
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections for refused settings", n)
	}
}
