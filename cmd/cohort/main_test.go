package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/buildinfo"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestExitCodes: -h is success for every command; usage errors exit 2
// before connecting; a connection failure exits 1 and names the address.
func TestExitCodes(t *testing.T) {
	dead := closedAddr(t)
	c := cli{t: t}
	for _, cmd := range [][]string{{"-h"}, {"help"}, {"topics", "-h"}, {"topic", "--help"}, {"groups", "-h"}, {"group", "-h"},
		{"group", "describe", "-h"}, {"offsets", "-h"}, {"offsets", "reset", "-h"}, {"user", "-h"}, {"users", "-h"}, {"acl", "-h"},
		{"serve", "-h"}, {"bench", "-h"}} {
		out, errOut, code := c.run(cmd...)
		// (serve and bench print their usage on the process's stderr)
		captured := cmd[0] != "serve" && cmd[0] != "bench"
		if code != 0 || captured && !strings.Contains(out+errOut, "usage") || strings.Contains(errOut, "help requested") {
			t.Fatalf("%q: exit %d\n%s%s", cmd, code, out, errOut)
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "usage: cohort"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"topics", "extra"}, `topics: unexpected arguments ["extra"]`},
		{[]string{"topics", "--nope"}, "topics: --nope is not one of its flags (see cohort topics -h)"},
		{[]string{"topics", "--output", "yaml"}, `--output "yaml": want table or json`},
		{[]string{"topic"}, "want create|grow|delete NAME"},
		{[]string{"topic", "create"}, "topic create: want one topic NAME"},
		{[]string{"topic", "create", "a", "b"}, "topic create: want one topic NAME"},
		{[]string{"topic", "delete", "a", "--partitions", "3"}, "topic delete: --partitions is not one of its flags (see cohort topic delete -h)"},
		{[]string{"topic", "shrink", "a"}, `unknown action "shrink"`},
		{[]string{"topic", "create", "a", "--partitions", "0"}, "--partitions 0"},
		{[]string{"groups", "x"}, "unexpected arguments"},
		{[]string{"groups", "--type", "consumers"}, `--type "consumers": want one of classic, consumer`},
		{[]string{"groups", "--type", "classic,bogus"}, `--type "bogus"`},
		{[]string{"groups", "--state", "Stabel"}, `--state "Stabel": want one of Empty, PreparingRebalance, CompletingRebalance, Stable, Assigning, Reconciling`},
		{[]string{"groups", "--state", "dead"}, `--state "dead": want one of Empty, PreparingRebalance, CompletingRebalance, Stable, Assigning, Reconciling`},
		{[]string{"groups", "--state", "empty,Dead"}, `--state "Dead"`},
		{[]string{"group"}, "want describe|delete|config|history|why ID"},
		{[]string{"group", "frob", "x"}, `unknown action "frob"`},
		{[]string{"group", "describe"}, "want group ids or --all-groups"},
		{[]string{"group", "describe", "a", "--all-groups"}, "want group ids or --all-groups, not both"},
		{[]string{"group", "delete"}, "want one or more group ids"},
		{[]string{"group", "delete", "a", "--members"}, "group delete: --members is not one of its flags (see cohort group delete -h)"},
		{[]string{"group", "describe", "a", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"group", "describe", "a", "--bootstrap", " , "}, "--bootstrap is empty"},
		// A port no one can listen on: retried until --timeout and exit 1
		// before, as if the node were down.
		{[]string{"groups", "--bootstrap", "127.0.0.1:99999", "--timeout", "1s"}, "--bootstrap 127.0.0.1:99999: port 99999: want 1 to 65535"},
		{[]string{"groups", "--bootstrap", "localhost:9092,localhost:x", "--timeout", "1s"}, `--bootstrap localhost:9092,localhost:x: port "x": want 1 to 65535`},
		{[]string{"topics", "--bootstrap", "[::1]:0", "--timeout", "1s"}, "--bootstrap [::1]:0: port 0: want 1 to 65535"},
		{[]string{"user"}, "want set|delete NAME"},
		{[]string{"user", "set", "a", "--iterations", "1"}, "--iterations 1"},
		{[]string{"acl"}, "want add, list or delete"},
		{[]string{"acl", "add", "--topic", "t"}, "--principal is required"},
		// Security flags that cannot go together, named with the command.
		{[]string{"groups", "--sasl-username", "admin"}, "cohort: groups: SASL credentials are given but no SASL mechanism"},
		{[]string{"offsets", "reset", "g", "--all-topics", "--to-offset", "1", "--sasl-mechanism", "PLAIN"}, "cohort: offsets reset: SASL PLAIN needs a username"},
		{[]string{"topics", "--tls-ca-file", "ca.pem"}, "cohort: topics: TLS settings (CA file, client certificate, server name) are given but TLS is off"},
	} {
		args := tc.args
		if !slices.Contains(args, "--bootstrap") {
			args = append(args, "--bootstrap", dead)
		}
		c.fails(2, args, tc.msg)
	}
	// Connection failures: retried until --timeout, then an error naming
	// where cohort tried.
	for _, args := range [][]string{{"topics"}, {"groups"}, {"group", "describe", "g"}, {"offsets", "g"}, {"users"}, {"acl", "list"},
		{"offsets", "reset", "g", "--all-topics", "--to-offset", "1"}} {
		start := time.Now()
		c.fails(1, append(args, "--bootstrap", dead+", "+dead, "--timeout", "400ms"), "cannot connect to cohort at "+dead+","+dead+" (")
		if el := time.Since(start); el < 350*time.Millisecond || el > 5*time.Second {
			t.Fatalf("%q: gave up after %s, want about --timeout", args, el)
		}
	}
	// A listener that accepts and never answers: the error says so,
	// instead of "cannot connect".
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			conn, err := mute.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- conn
		}
	}()
	c.fails(1, []string{"topics", "--bootstrap", mute.Addr().String(), "--timeout", "400ms"}, "no answer from cohort at "+mute.Addr().String()+" (")
	mute.Close()
	for conn := range accepted {
		conn.Close()
	}
	n := startNode(t, "127.0.0.1:0")
	c.fails(1, []string{"offsets", "g", "--bootstrap", n.Addr(), "--data-bootstrap", dead, "--timeout", "400ms"},
		"cannot connect to the data cluster at "+dead)
	c.fails(2, []string{"topics", "--bootstrap", n.Addr(), "--data-bootstrap", dead}, "topics: --data-bootstrap is not one of its flags")
}

// TestConnectRetry: a command run while the node is still starting (the
// README's "serve &" then an admin command) waits for it.
func TestConnectRetry(t *testing.T) {
	addr := closedAddr(t)
	started := make(chan error, 1)
	go func() {
		// The behaviour under test: the node comes up only after the
		// command has started trying.
		time.Sleep(700 * time.Millisecond)
		cfg := group.Defaults()
		n, err := node.Start(node.Config{Listen: addr, Store: memstore.New(), Group: cfg,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err == nil {
			t.Cleanup(func() { n.Close() })
		}
		started <- err
	}()
	c := cli{t: t}
	out := c.ok("topic", "create", "events", "--partitions", "2", "--bootstrap", addr)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if out != "created events with 2 partitions\n" {
		t.Fatal(out)
	}
}

// TestTopicCommands: create, grow (only upwards, saying the current
// count), delete, JSON.
func TestTopicCommands(t *testing.T) {
	n := startNode(t, "127.0.0.1:0")
	c := cli{t: t, base: []string{"--bootstrap", n.Addr()}}
	if out := c.ok("topic", "create", "events", "--partitions", "6"); out != "created events with 6 partitions\n" {
		t.Fatal(out)
	}
	c.fails(1, []string{"topic", "create", "events"}, "create events: TOPIC_ALREADY_EXISTS: ")
	// A count past int32 is refused before it is sent: cast, it wrapped
	// (4294967298 created 2 partitions and said 4294967298).
	c.fails(2, []string{"topic", "create", "wrap", "--partitions", "4294967298"}, "--partitions 4294967298: want 1 to 2147483647")
	c.fails(2, []string{"topic", "grow", "events", "--partitions", "4294967299"}, "--partitions 4294967299: want 1 to 2147483647")
	// A count the server refuses shows the server's message, not only
	// the code's generic text ("below 1").
	c.fails(1, []string{"topic", "create", "huge", "--partitions", "2147483647"}, "create huge: INVALID_PARTITIONS: ", "the maximum is 65536")
	c.fails(1, []string{"topic", "grow", "events", "--partitions", "2147483647"}, "grow events: INVALID_PARTITIONS: ", "the maximum is 65536")
	if out := c.ok("topic", "grow", "events", "--partitions", "8"); out != "events now has 8 partitions (was 6)\n" {
		t.Fatal(out)
	}
	for _, p := range []string{"8", "3"} {
		c.fails(1, []string{"topic", "grow", "events", "--partitions", p}, "grow events: it has 8 partitions and the count can only grow: give --partitions above 8")
	}
	c.fails(1, []string{"topic", "grow", "nope", "--partitions", "3"}, "grow nope: no topic nope")
	var grown topicJSON
	c.jsonOf(&grown, "topic", "grow", "events", "--partitions", "9")
	if grown.Topic != "events" || grown.Partitions != 9 || grown.PreviousPartitions == nil || *grown.PreviousPartitions != 8 {
		t.Fatalf("%+v", grown)
	}
	c.ok("topic", "create", "audit")
	if out := table(c.ok("topics")); out != "TOPIC PARTITIONS\naudit 1\nevents 9" {
		t.Fatal(out)
	}
	var list struct {
		Topics []topicJSON `json:"topics"`
	}
	c.jsonOf(&list, "topics")
	if len(list.Topics) != 2 || list.Topics[1] != (topicJSON{Topic: "events", Partitions: 9}) {
		t.Fatalf("%+v", list)
	}
	if out := c.ok("topic", "delete", "audit"); out != "deleted audit\n" {
		t.Fatal(out)
	}
	c.fails(1, []string{"topic", "delete", "audit"}, "delete audit: UNKNOWN_TOPIC_OR_PARTITION")
	// delete's document is {"topic", "deleted": true}, as docs/cli.md
	// says: DeleteTopics gives no partition count to report.
	out := c.ok("topic", "delete", "events", "--output", "json")
	var deleted map[string]any
	if err := json.Unmarshal([]byte(out), &deleted); err != nil || !reflect.DeepEqual(deleted, map[string]any{"topic": "events", "deleted": true}) {
		t.Fatalf("topic delete --output json: %v\n%s", err, out)
	}
}

// TestVersion: "cohort version" and "cohort --version" print the build's
// line (internal/buildinfo), and take no arguments.
func TestVersion(t *testing.T) {
	c := cli{t: t}
	want := buildinfo.String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out := c.ok(args...); out != want || !strings.HasPrefix(out, "cohort ") {
			t.Fatalf("%q: %q, want %q", args, out, want)
		}
	}
	c.fails(2, []string{"version", "extra"}, `version: unexpected arguments ["extra"]`)
	if out, errOut, code := c.run("version", "-h"); code != 0 || !strings.Contains(out+errOut, "usage: cohort version") {
		t.Fatalf("version -h: exit %d\n%s%s", code, out, errOut)
	}
}

// TestConnectErrorNamesEveryAddress: with several --bootstrap addresses
// down, the error gives each address's own dial failure and the count of
// dials (franz-go tries them in turn within one request, which used to end
// with only "context deadline exceeded" and "1 attempts").
func TestConnectErrorNamesEveryAddress(t *testing.T) {
	a, b := closedAddr(t), closedAddr(t)
	c := cli{t: t}
	_, errOut, code := c.run("topics", "--bootstrap", a+","+b, "--timeout", "1s")
	re := regexp.MustCompile(`^cohort: topics: cannot connect to cohort at ` + regexp.QuoteMeta(a+","+b) + ` \(([0-9]+) attempts in [0-9.]+m?s\): ` +
		`.*dial tcp ` + regexp.QuoteMeta(a) + `: connect: connection refused; .*dial tcp ` + regexp.QuoteMeta(b) + `: connect: connection refused\n$`)
	m := re.FindStringSubmatch(errOut)
	if code != 1 || m == nil {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if n, _ := strconv.Atoi(m[1]); n < 2 {
		t.Fatalf("%d attempts for two addresses:\n%s", n, errOut)
	}
}

// TestConnectErrorNodeCameUpMute: when the address refused connections at
// first and then a listener came up that accepts but never answers, the
// error says "no answer" and gives the last attempt's failure first, not
// only the earlier refusals ("no answer from ...: connection refused"
// contradicted itself), which it names after it.
func TestConnectErrorNodeCameUpMute(t *testing.T) {
	addr := closedAddr(t)
	up := make(chan net.Listener, 1)
	go func() {
		time.Sleep(1200 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			up <- nil
			return
		}
		up <- ln
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // held open, never answered
		}
	}()
	// Attempts at about 0, 50, 150, 350, 750, 1550 and 3150 ms (the
	// backoff doubles from 50ms): the one at 1550 connects, or the one at
	// 3150 when the listener comes up late on a loaded machine.
	_, errOut, code := cli{t: t}.run("topics", "--bootstrap", addr, "--timeout", "4s")
	ln := <-up
	if ln == nil {
		t.Skip("the closed address was taken meanwhile")
	}
	ln.Close()
	re := regexp.MustCompile(`^cohort: topics: no answer from cohort at ` + regexp.QuoteMeta(addr) + ` \([0-9]+ attempts in [0-9.]+m?s\): (.*)\n$`)
	m := re.FindStringSubmatch(errOut)
	if code != 1 || m == nil {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	// The last attempt's failure (the timeout), then the refusals.
	if reason := m[1]; !strings.HasPrefix(reason, "connected, but no answer before the timeout (context deadline exceeded); earlier attempts: ") ||
		!strings.HasSuffix(reason, "dial tcp "+addr+": connect: connection refused") {
		t.Errorf("reason %q: want the timeout of the connection that got no answer, then the earlier refusals", reason)
	}
}

// TestConnectionRefusedAfterConnectNamesCommandAndNode: a node at its
// --max-connections accepts the command's first connection and closes the
// next at once. The error line then still has the docs' "cohort: <what>:
// <error>" form, naming the command and the node ("cohort at ADDR", as the
// errors of connecting do), and says that the limit, not TLS, is the likely
// cause; "cohort groups" printed only kgo's error.
func TestConnectionRefusedAfterConnectNamesCommandAndNode(t *testing.T) {
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n := startNodeConfig(t, node.Config{Listen: "127.0.0.1:0", Group: cfg, MaxConnections: 1})
	c := cli{t: t, base: []string{"--bootstrap", n.Addr(), "--timeout", "3s"}}
	for _, args := range [][]string{{"groups"}, {"topics"}, {"users"}, {"acl", "list"}} {
		what := strings.Join(args, " ")
		_, errOut, code := c.run(args...)
		if code == 0 && what != "groups" {
			continue // served on the first connection (kgo's choice)
		}
		if code != 1 || !strings.HasPrefix(errOut, "cohort: "+what+": ") {
			t.Errorf("%s: exit %d, stderr:\n%s", what, code, errOut)
			continue
		}
		// (A later command may find the node still counting the
		// previous one's connections and be refused its first: no
		// word of the limit then.)
		if strings.Contains(errOut, "broker closed the connection") &&
			(!strings.Contains(errOut, "cohort at "+n.Addr()+": ") || what == "groups" && !strings.Contains(errOut, "--max-connections")) {
			t.Errorf("%s: the error names no node or no limit:\n%s", what, errOut)
		}
	}
}

// TestSubcommandHelp: each action's -h prints its own usage and only the
// flags it takes, spelled with two dashes as the docs spell them.
func TestSubcommandHelp(t *testing.T) {
	c := cli{t: t}
	for _, tc := range []struct {
		args       []string
		has, lacks []string
	}{
		{[]string{"group", "delete", "-h"}, []string{"usage: cohort group delete ID", "--bootstrap", "--output"},
			[]string{"--set", "--last", "--data-bootstrap", "--verbose", "--members"}},
		{[]string{"group", "history", "-h"}, []string{"usage: cohort group history ID", "--last N"},
			[]string{"--set", "--data-bootstrap", "--verbose", "group describe"}},
		{[]string{"group", "describe", "-h"}, []string{"usage: cohort group describe", "--data-bootstrap", "--verbose", "--all-groups"},
			[]string{"--set", "--last", "group history"}},
		{[]string{"group", "config", "-h"}, []string{"--set NAME=VALUE", "--delete NAME", "--list"}, []string{"--last", "--members"}},
		{[]string{"topic", "--bootstrap", "127.0.0.1:1", "delete", "-h"}, []string{"usage: cohort topic delete NAME"}, []string{"--partitions"}},
		{[]string{"topic", "grow", "-h"}, []string{"--partitions"}, nil},
		{[]string{"offsets", "g", "-h"}, []string{"usage: cohort offsets [show] ID", "--data-bootstrap"}, []string{"--to-offset", "--topic"}},
		{[]string{"offsets", "delete", "-h"}, []string{"--topic"}, []string{"--to-offset", "--data-bootstrap"}},
		{[]string{"user", "delete", "-h"}, []string{"usage: cohort user delete NAME", "--mechanism"}, []string{"--iterations", "--password-file"}},
		{[]string{"users", "-h"}, []string{"usage: cohort users"}, []string{"--mechanism", "--iterations"}},
		{[]string{"store", "copy", "-h"}, []string{"usage: cohort store copy --from-data-dir DIR", "--to-etcd endpoints", "--etcd-password-file file"},
			[]string{"--bootstrap"}},
		{[]string{"acl", "add", "-h"}, []string{"usage: cohort acl add", "--principal"}, []string{"--pattern"}},
		{[]string{"group", "-h"}, []string{"cohort group history ID", "flags of every group command", "--bootstrap"}, []string{"--verbose", "--data-bootstrap"}},
	} {
		out, errOut, code := c.run(tc.args...)
		help := out + errOut
		if code != 0 {
			t.Fatalf("%q: exit %d\n%s", tc.args, code, help)
		}
		for _, s := range tc.has {
			if !strings.Contains(help, s) {
				t.Errorf("%q: lacks %q:\n%s", tc.args, s, help)
			}
		}
		for _, s := range tc.lacks {
			if strings.Contains(help, s) {
				t.Errorf("%q: has %q:\n%s", tc.args, s, help)
			}
		}
		if regexp.MustCompile(`(?m)^\s+-[a-z]`).MatchString(help) {
			t.Errorf("%q: a flag spelled with one dash:\n%s", tc.args, help)
		}
	}
}
